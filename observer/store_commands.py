"""The one-shot commands that read or write the store (`observer report`, `findings`, `db size`,
`runs`, `intervention`): each opens the store, does its one thing and prints the outcome.
Imports are local: the daemons' command line never pays for them."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta, tzinfo

from observer.errors import EXIT_FAILURE, EXIT_OK
from observer.records import StoredDelivery, StoredIntervention
from observer.settings import Settings


def report(args: argparse.Namespace, settings: Settings) -> int:
    from zoneinfo import ZoneInfo  # noqa: PLC0415

    from observer.clock import SystemClock  # noqa: PLC0415
    from observer.reports.deliver import deliver_written  # noqa: PLC0415
    from observer.reports.publish import write_daily, write_verdict, yesterday  # noqa: PLC0415
    from observer.storage.database import store_url  # noqa: PLC0415
    from observer.storage.store import Store  # noqa: PLC0415

    clock = SystemClock()
    now = clock.now()
    with Store(store_url(settings.storage.sqlite_path, settings.storage.url)) as store:
        tz = ZoneInfo(settings.controller.timezone)
        if args.report_command == "deliveries":
            return _deliveries(store.deliveries(report=args.report), args.json, tz)
        if args.report_command == "daily":
            day = now.astimezone(tz).date() if args.today else args.date or yesterday(settings, now)
            paths = write_daily(store, settings, day, now, partial=args.today)
        else:
            paths = write_verdict(store, settings, now, provisional=args.provisional)
        for path in paths:
            print(path)
        if not args.deliver:
            return EXIT_OK
        results = deliver_written(paths, settings, clock, threading.Event(), store)
    failed = [r for r in results if not r.ok]
    for result in failed:
        print(f"observer: delivery to {result.channel} failed: {result.detail}", file=sys.stderr)
    return EXIT_FAILURE if failed else EXIT_OK


def _deliveries(deliveries: Sequence[StoredDelivery], as_json: bool, tz: tzinfo) -> int:
    for d in deliveries:
        at = d.at.astimezone(tz)
        if as_json:
            print(json.dumps({**dataclasses.asdict(d), "at": at.isoformat()}))
        else:
            print(
                f"{at:%Y-%m-%d %H:%M:%S} {at.isoformat()[-6:]}  {d.report:<28} {d.channel:<10} "
                f"{d.outcome:<10} {d.attempts:>2}  {d.detail or '-'}"
            )
    return EXIT_OK


def intervention(args: argparse.Namespace, settings: Settings) -> int:
    from observer.clock import SystemClock  # noqa: PLC0415
    from observer.storage.database import store_url  # noqa: PLC0415
    from observer.storage.store import Store  # noqa: PLC0415

    record = StoredIntervention(
        at=args.at or SystemClock().now(),
        by=args.by,
        reason=args.reason,
        subject=dict(args.subject),
    )
    with Store(store_url(settings.storage.sqlite_path, settings.storage.url)) as store:
        store.add_intervention(record)
    subject = ", ".join(f"{k}={v}" for k, v in sorted(record.subject.items())) or "-"
    print(f"recorded: {record.at.isoformat()} by {record.by} on {subject}: {record.reason}")
    return EXIT_OK


def findings(args: argparse.Namespace, settings: Settings) -> int:
    from zoneinfo import ZoneInfo  # noqa: PLC0415

    from observer import codec  # noqa: PLC0415
    from observer.reports.render.i18n import Words  # noqa: PLC0415
    from observer.reports.render.json import plain  # noqa: PLC0415
    from observer.storage.database import store_url  # noqa: PLC0415
    from observer.storage.store import Store  # noqa: PLC0415

    with Store(store_url(settings.storage.sqlite_path, settings.storage.url)) as store:
        found = store.findings(open_only=args.open, since=args.since, detector=args.detector)
    tz = ZoneInfo(settings.controller.timezone)
    if args.json:
        # The evidence's instants too, as the reports' JSON gives them.
        for finding in found:
            print(json.dumps(plain(codec.finding_to_json(finding), tz), ensure_ascii=False))
        return EXIT_OK

    def local(at: datetime) -> str:
        """The platform's time a person reads in the reports, with its offset."""
        at = at.astimezone(tz)
        return f"{at:%Y-%m-%d %H:%M:%S} {at.isoformat()[-6:]}"

    if found:
        words = Words(settings.reports.language, tz)
        instants = [at for f in found for at in (f.opened_at, f.closed_at) if at is not None]
        zone = words.zone(min(instants), max(instants) + timedelta(microseconds=1))
        print(words("label.timezone", timezone=zone))
    for finding in found:
        state = f"closed {local(finding.closed_at)}" if finding.closed_at else "open"
        print(
            f"{local(finding.opened_at)}  {finding.severity.value:<8} "
            f"{finding.detector:<24} {state:<33} {finding.summary}"
        )
    return EXIT_OK


def runs(args: argparse.Namespace, settings: Settings) -> int:
    from zoneinfo import ZoneInfo  # noqa: PLC0415

    from observer.reports.compute.tasks import is_failed, task_records  # noqa: PLC0415
    from observer.reports.inputs import day_period, load_tasks  # noqa: PLC0415
    from observer.reports.render.i18n import Words  # noqa: PLC0415
    from observer.reports.render.json import task_record_json  # noqa: PLC0415
    from observer.reports.render.tasks import task_headers, task_row, tasks_csv  # noqa: PLC0415
    from observer.storage.database import store_url  # noqa: PLC0415
    from observer.storage.store import Store  # noqa: PLC0415

    tz = ZoneInfo(settings.controller.timezone)
    day = args.date or datetime.now(tz).date()
    bounds = day_period(day, tz)
    with Store(store_url(settings.storage.sqlite_path, settings.storage.url)) as store:
        # What the runs' nodes went through, to class each failure as the summary does, and
        # what each run had and met while it lived.
        data, context = load_tasks(store, settings, bounds)
    records = [
        r
        for r in task_records(data, context)
        if (not args.failed or is_failed(r.run))
        and (args.probe is None or r.run.probe == args.probe)
    ]
    words = Words(settings.reports.language, tz)
    if args.csv:
        sys.stdout.write(tasks_csv(records, words))
    elif args.json:
        for record in records:
            print(json.dumps(task_record_json(record, words), ensure_ascii=False))
    else:
        print(words("label.timezone", timezone=words.zone(bounds.start, bounds.end)))
        print("\t".join(task_headers(words)))
        for record in records:
            print("\t".join(str(c) for c in task_row(record, words, record.run.run_id)))
    return EXIT_OK


def db_size(args: argparse.Namespace, settings: Settings) -> int:
    from observer.clock import SystemClock  # noqa: PLC0415
    from observer.records import days_until_full, growth_per_day, size_text  # noqa: PLC0415
    from observer.storage.database import store_url  # noqa: PLC0415
    from observer.storage.store import Store  # noqa: PLC0415

    now = SystemClock().now()
    with Store(store_url(settings.storage.sqlite_path, settings.storage.url)) as store:
        tables = store.table_sizes()
        size, free_inside = store.database_bytes()
        per_day = growth_per_day(store.store_sizes(now - timedelta(days=1)), size, now)
        free = store.volume_free_bytes()
    days_left = None if free is None else days_until_full(free + free_inside, per_day)
    if args.json:
        print(
            json.dumps(
                {
                    "tables": [dataclasses.asdict(t) for t in tables],
                    "bytes": size,
                    "free_inside_bytes": free_inside,
                    "growth_bytes_per_day": per_day,
                    "volume_free_bytes": free,
                    "days_until_full": days_left,
                    "raw_retention_days": settings.storage.raw_retention_days,
                }
            )
        )
        return EXIT_OK
    print(f"{'table':<22} {'rows':>14} {'bytes':>12}")
    for table in tables:
        print(f"{table.name:<22} {table.rows:>14,} {size_text(table.bytes):>12}")
    print(f"on its volume: {size_text(size)} ({size_text(free_inside)} of it free, reused first)")
    if per_day is None:
        print("growth: not known: the running controller measures it each hour, over 6 h or more")
    else:
        print(f"growth over the last day: {size_text(per_day)} a day")
    if free is not None:
        until = f", full in about {days_left:.1f} days" if days_left is not None else ""
        print(f"the volume: {size_text(free)} free{until}")
    retention = settings.storage.raw_retention_days
    kept = f"{retention} days" if retention is not None else "for ever"
    print(f"raw GPU samples kept {kept} (storage.raw_retention_days)")
    return EXIT_OK
