"""Finished jobs counted per slot: each listing of a slot replaces what an earlier one
stored, in job_listings (how far, how complete), job_tallies (the counts) and job_waits
(the queue waits of those that started)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa

from observer.records import JobOrigin, JobSlot, JobTally, JobWait
from observer.storage.database import Repository
from observer.storage.mapping import RowMapping
from observer.storage.tables import job_listings_table, job_tallies_table, job_waits_table

# The reason and the cause are part of the key, which cannot be NULL: "" stands for none.
_NONE_AS_EMPTY = (lambda word: word or "", lambda word: word or None)
_ORIGIN = (lambda o: o.value if o else "", lambda word: JobOrigin(word) if word else None)
_WAIT = RowMapping(JobWait, job_waits_table, convert={"origin": _ORIGIN})
_TALLY = RowMapping(
    JobTally,
    job_tallies_table,
    convert={"reason": _NONE_AS_EMPTY, "cause": _NONE_AS_EMPTY, "origin": _ORIGIN},
)


class JobTalliesRepository(Repository):
    def save_job_slots(self, slots: Iterable[JobSlot]) -> None:
        """Store each slot's tallies in place of what an earlier listing of it stored. One
        transaction."""
        slots = list(slots)
        if not slots:
            return
        listings, tallies, waits = job_listings_table, job_tallies_table, job_waits_table
        starts = [slot.start for slot in slots]
        with self._errors("saving job tallies"), self._engine.begin() as connection:
            connection.execute(sa.delete(waits).where(waits.c.slot.in_(starts)))
            connection.execute(sa.delete(tallies).where(tallies.c.slot.in_(starts)))
            connection.execute(sa.delete(listings).where(listings.c.slot.in_(starts)))
            # A slot nests its tallies, stored in their own table: no mapping fits its row.
            connection.execute(
                sa.insert(listings),
                [
                    {
                        "slot": slot.start,
                        "listed_until": slot.listed_until,
                        "complete": slot.complete,
                        "note": slot.note,
                    }
                    for slot in slots
                ],
            )
            rows = [
                {"slot": slot.start, **_TALLY.row(tally)}
                for slot in slots
                for tally in slot.tallies
            ]
            if rows:
                connection.execute(sa.insert(tallies), rows)
            waited = [
                {"slot": slot.start, **_WAIT.row(wait)} for slot in slots for wait in slot.waits
            ]
            if waited:
                connection.execute(sa.insert(waits), waited)

    def job_slots(self, since: datetime, until: datetime) -> list[JobSlot]:
        """The listed slots starting in [since, until), in order; a slot never listed is
        absent."""
        listings, tallies, waits = job_listings_table, job_tallies_table, job_waits_table
        with self._reading("reading job tallies") as connection:
            listed = connection.execute(
                sa.select(listings)
                .where(listings.c.slot >= since, listings.c.slot < until)
                .order_by(listings.c.slot)
            ).all()
            counted = connection.execute(
                _TALLY.select(tallies.c.slot)
                .where(tallies.c.slot >= since, tallies.c.slot < until)
                .order_by(tallies.c.tenant, tallies.c.phase, tallies.c.reason, tallies.c.cause)
            ).all()
            timed = connection.execute(
                _WAIT.select(waits.c.slot)
                .where(waits.c.slot >= since, waits.c.slot < until)
                .order_by(waits.c.tenant, waits.c.origin, waits.c.wait_seconds)
            ).all()
        by_slot: dict[datetime, list[JobTally]] = {}
        for row in counted:
            by_slot.setdefault(row.slot, []).append(_TALLY.value(row))
        waits_by_slot: dict[datetime, list[JobWait]] = {}
        for row in timed:
            waits_by_slot.setdefault(row.slot, []).append(_WAIT.value(row))
        return [
            JobSlot(
                row.slot,
                row.listed_until,
                row.complete,
                row.note,
                tuple(by_slot.get(row.slot, ())),
                tuple(waits_by_slot.get(row.slot, ())),
            )
            for row in listed
        ]

    def jobs_listed_until(self) -> datetime | None:
        """How far finished jobs have been listed: the end of the latest listing."""
        query = sa.select(sa.func.max(job_listings_table.c.listed_until))
        with self._reading("reading job tallies") as connection:
            latest: datetime | None = connection.execute(query).scalar()  # max() keeps UTC
        return latest
