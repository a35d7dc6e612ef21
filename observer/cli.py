"""Command line: parse arguments, load settings, dispatch. Nothing else lives here."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from prometheus_client import disable_created_metrics

from observer import store_commands
from observer.errors import (
    EXIT_FAILURE,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_SCHEMA_NEWER,
    NO_GPU_EXIT_CODE,
    ConfigError,
    CudaCallError,
    GpuCommunicationError,
    GpuOutOfMemoryError,
    ListenAddressError,
    ObserverError,
    PortInUseError,
    SchemaError,
    SchemaNewerError,
    WorkloadError,
)
from observer.logging_setup import configure_logging
from observer.settings import Settings, load_settings
from observer.signals import stop_on_signals

GC_FIRST_GENERATION_THRESHOLD = 10_000

CONFIG_ENV = "OBSERVER_CONFIG"
# What to change when a server's port is taken, by command.
_PORT_SETTINGS = {
    "agent": "agent.listen_port",
    "controller": "controller.listen_port",
    "demo": "--port",
    "probe": "--port",
}


def _add_runs(commands: Any) -> None:
    runs = commands.add_parser(
        "runs", help="every probe run of one day, as the daily summary's per-task appendix"
    )
    _config_option(runs)
    runs.add_argument(
        "--date", type=_day, help="the day, YYYY-MM-DD in the platform's timezone (default: today)"
    )
    runs.add_argument(
        "--failed",
        action="store_true",
        help="only runs that failed (refused, timed out, lost, or ended another way than expected)",
    )
    runs.add_argument("--probe", help="only this probe's runs")
    form = runs.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="one JSON object per line")
    form.add_argument("--csv", action="store_true", help="CSV, as beside the daily summary")


def _add_report(commands: Any) -> None:
    report = commands.add_parser("report", help="build reports into reports.output_dir")
    _config_option(report)
    report_commands = report.add_subparsers(dest="report_command", required=True)
    daily = report_commands.add_parser(
        "daily", help="the daily summary of one day (default: yesterday, platform timezone)"
    )
    which = daily.add_mutually_exclusive_group()
    which.add_argument("--date", type=_day, help="the day, YYYY-MM-DD in the platform's timezone")
    which.add_argument(
        "--today",
        action="store_true",
        help="the day so far, marked partial, as daily-YYYY-MM-DD-so-far.*",
    )
    verdict = report_commands.add_parser("verdict", help="the go-live verdict over the soak")
    verdict.add_argument(
        "--provisional",
        action="store_true",
        help="over the soak so far, up to now, marked provisional, as verdict-*-provisional.*",
    )
    for built in (daily, verdict):
        _config_option(built)
        built.add_argument(
            "--deliver",
            action="store_true",
            help="then hand it to the configured channels (reports.delivery) and record it; "
            "exit 1 when a channel failed",
        )
    deliveries = report_commands.add_parser(
        "deliveries", help="list recorded report deliveries, oldest first"
    )
    deliveries.add_argument("--report", help="only this report's, e.g. daily-2026-11-30")
    deliveries.add_argument("--json", action="store_true", help="one JSON object per line")
    _config_option(deliveries)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="observer", description="GPU Soak Observer")
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check-config", help="validate a configuration file")
    check.add_argument("file", type=Path)

    agent = commands.add_parser("agent", help="run the node agent (DaemonSet on GPU nodes)")
    _config_option(agent)
    agent_commands = agent.add_subparsers(dest="agent_command")
    replay = agent_commands.add_parser(
        "replay", help="run the agent over a recorded NVML trace and print its findings"
    )
    replay.add_argument("trace_dir", type=Path)
    replay.add_argument("--grace-seconds", type=float, help="detectors.node.grace_seconds")
    replay.add_argument("--idle-seconds", type=float, help="detectors.node.idle_seconds")
    _config_option(replay)

    controller = commands.add_parser(
        "controller", help="run the controller: probes through windows, scheduler sampling"
    )
    _config_option(controller)

    findings = commands.add_parser("findings", help="list stored findings")
    _config_option(findings)
    findings.add_argument("--open", action="store_true", help="only conditions still open")
    findings.add_argument(
        "--since", type=_instant, help="active at or after this ISO-8601 time (UTC if no zone)"
    )
    findings.add_argument("--detector", help="only this detector's findings")
    findings.add_argument("--json", action="store_true", help="one JSON object per line")

    _add_runs(commands)
    db = commands.add_parser("db", help="database administration")
    _config_option(db)
    db_commands = db.add_subparsers(dest="db_command", required=True)
    _config_option(
        db_commands.add_parser(
            "upgrade",
            help="apply schema migrations up to the latest",
            epilog=f"exit status: 0 done; 1 failed; 2 bad configuration; {EXIT_SCHEMA_NEWER} a "
            "newer release migrated the database (the line names it and the way back to it)",
        )
    )
    size = db_commands.add_parser(
        "size", help="rows and bytes per table, the growth per day and the volume's room"
    )
    _config_option(size)
    size.add_argument("--json", action="store_true", help="one JSON object")

    _add_report(commands)
    intervention = commands.add_parser("intervention", help="manual interventions")
    _config_option(intervention)
    intervention_commands = intervention.add_subparsers(dest="intervention_command", required=True)
    add = intervention_commands.add_parser("add", help="record a manual intervention")
    add.add_argument("--by", required=True, help="who intervened")
    add.add_argument("--reason", required=True, help="why")
    add.add_argument(
        "--subject",
        action="append",
        type=_pair,
        default=[],
        metavar="KEY=VALUE",
        help="what it touched, e.g. node=gpu-07 or run_id=...; repeatable",
    )
    add.add_argument("--at", type=_instant, help="when (ISO-8601, UTC if no zone); default: now")
    _config_option(add)

    _add_demo(commands)
    _add_probe(commands)
    metrics = commands.add_parser("metrics", help="the metrics the observer exports")
    metrics_commands = metrics.add_subparsers(dest="metrics_command", required=True)
    metrics_commands.add_parser("list", help="print every metric name, one per line")
    return parser


def _config_option(parser: argparse.ArgumentParser) -> None:
    # Suppressed when absent, so that a level not given it keeps what the level above parsed.
    parser.add_argument(
        "--config",
        type=Path,
        default=argparse.SUPPRESS,
        help=f"YAML settings file (default: ${CONFIG_ENV}, else the built-in defaults)",
    )


def _add_demo(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="the whole product on a simulated cluster with injected faults, in minutes",
    )
    demo.add_argument(
        "--scenario",
        type=Path,
        help="scenario file (YAML; default: the packaged one-day scenario)",
    )
    demo.add_argument("--out", type=Path, default=Path("demo-out"), help="where it writes")
    demo.add_argument("--days", type=_positive, help="simulated days (default: the scenario's)")
    demo.add_argument(
        "--start",
        type=_day,
        help="first day, the faults moved with it (default: the scenario's; for the packaged "
        "one, the latest Monday that fits before today)",
    )
    demo.add_argument("--language", choices=("en", "zh-CN"), default="en")
    demo.add_argument("--port", type=int, default=9500, help="/metrics port (0: any free one)")
    demo.add_argument(
        "--check",
        action="store_true",
        help="validate the scenario and print what it would play, without playing it",
    )


PROBE_EPILOG = (
    f"exit status: 0 done; 2 bad arguments; {NO_GPU_EXIT_CODE} no GPU here (no libcuda.so.1, "
    'or the driver sees no device: read as "no GPU on the node"); '
    f"{GpuOutOfMemoryError.exit_code} out of GPU memory; {CudaCallError.exit_code} another "
    f"CUDA driver call failed; {GpuCommunicationError.exit_code} (gpu-comm) GPUs of the job "
    "could not reach each other at their link's rate; exit: the code asked for. Every failure "
    "is one line on stderr."
)


def _add_probe(commands: Any) -> None:
    probe = commands.add_parser(
        "probe",
        help="a probe's own program, run inside the probe job",
        epilog=PROBE_EPILOG,
    )
    workloads = probe.add_subparsers(dest="workload", required=True)
    burn = workloads.add_parser(
        "gpu-burn", help="load one GPU through the CUDA driver API", epilog=PROBE_EPILOG
    )
    burn.add_argument("--seconds", type=_non_negative, required=True)
    burn.add_argument("--memory-gib", type=_non_negative, required=True, help="GPU memory held")
    burn.add_argument(
        "--utilization", type=_percent, default=100.0, help="target busy share, 1-100 (100)"
    )
    burn.add_argument("--device", type=int, default=0, help="CUDA device ordinal (0)")
    comm = workloads.add_parser(
        "gpu-comm",
        help="copy between every pair of the job's GPUs and judge each pair's rate",
        epilog=PROBE_EPILOG,
    )
    comm.add_argument("--size-mib", type=_positive, default=256, help="each copy (256)")
    comm.add_argument("--repeats", type=_positive, default=10, help="timed copies a pair (10)")
    comm.add_argument(
        "--expect-gbps",
        type=_positive,
        help="a pair's expected rate, GB/s one way (default: by GPU model, where known)",
    )
    comm.add_argument(
        "--expect-model",
        type=_model_rate,
        action="append",
        metavar="MODEL=GBPS",
        help="a GPU model's pair rate, GB/s one way (longest name in CUDA's device name "
        "wins); given, the whole table (default: the built-in H100/H200/A100 figures)",
    )
    comm.add_argument(
        "--min-percent", type=_percent, default=75.0, help="of the expected rate a pair needs (75)"
    )
    comm.add_argument(
        "--allow-no-peer",
        action="store_true",
        help="a pair without a direct path is measured, not failed (PCIe without P2P)",
    )
    for name, what, line_bytes in (
        ("log-canary", "sequenced log lines at an interval", 0),
        ("log-burst", "sequenced, padded log lines as fast as they can be written", 1024),
    ):
        canary = workloads.add_parser(name, help=what)
        canary.add_argument("--run-id", required=True)
        canary.add_argument("--lines", type=int, required=True)
        canary.add_argument("--interval-seconds", type=_non_negative, default=0.0)
        canary.add_argument(
            "--line-bytes", type=int, default=line_bytes, help=f"pad lines to this ({line_bytes})"
        )
    serve = workloads.add_parser("serve", help="the inference stand-in: /healthz and /infer")
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--latency-ms", type=_non_negative, default=20.0)
    serve.add_argument("--warmup-seconds", type=_non_negative, default=0.0)
    serve.add_argument("--seconds", type=_non_negative, default=0.0, help="0: until signalled")
    code = workloads.add_parser("exit", help="end with a given exit code")
    code.add_argument("--code", type=int, required=True)
    code.add_argument("--after-seconds", type=_non_negative, default=0.0)
    oom = workloads.add_parser("oom", help="allocate memory until killed, or up to --mib")
    oom.add_argument("--mib", type=_positive, help="stop at this many MiB (default: no bound)")
    oom.add_argument("--hold-seconds", type=_non_negative, default=0.0)
    sleep = workloads.add_parser("sleep", help="hold the job's resources, then end with 0")
    sleep.add_argument("--seconds", type=_non_negative, required=True)


def main(argv: Sequence[str] | None = None) -> int:
    # No _created series: prometheus_client's switch is process-wide (no registry has one of
    # its own), so it is set once here, for every command that serves metrics.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated in the library
    # The loops allocate many short-lived objects (readings, rows, findings) and few that
    # live long: at the default first-generation threshold (700) the demo's day took ~15 %
    # more CPU, the 1,000-node fleet read ~12 % more, for no measurable memory saved.
    gc.set_threshold(GC_FIRST_GENERATION_THRESHOLD)
    args = _parser().parse_args(argv)
    try:
        code = _run(args)
        sys.stdout.flush()  # a reader gone early (`| head`) shows here, not as a traceback at exit
        return code
    except BrokenPipeError:
        # Python's recipe: nothing more reaches the reader, and the exit's own flush must not fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE


def _run(args: argparse.Namespace) -> int:
    config = _config_file(args)
    try:
        if args.command == "check-config":
            checked = _check_config(args.file)
            print(f"{args.file}: valid")
            from observer.controller.compose import budget_warnings, checks_off  # noqa: PLC0415

            for check, why in checks_off(checked).items():
                print(f"{check}: off: {why}")
            for warning in budget_warnings(checked.controller):
                print(warning)
            return EXIT_OK
        if args.command == "demo":
            return _demo(args)
        if args.command == "probe":
            return _probe(args)
        if args.command == "metrics":
            from observer.metrics import all_metric_names  # noqa: PLC0415

            print("\n".join(all_metric_names()))
            return EXIT_OK
        settings = load_settings(config, _overrides(args))
        configure_logging(settings.logging.level, settings.logging.format)
        return _dispatch(args, settings)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_INVALID
    except SchemaError as exc:
        fix = "observer db upgrade" + (f" --config {config}" if config else "")
        print(f"observer: {exc.problem}: run `{fix}`", file=sys.stderr)
        return EXIT_INVALID
    except SchemaNewerError as exc:
        print(f"observer: {exc}", file=sys.stderr)
        return EXIT_SCHEMA_NEWER
    except PortInUseError as exc:
        print(
            f"{_PORT_SETTINGS[args.command]}: {exc}; choose another (0: any free one)",
            file=sys.stderr,
        )
        return EXIT_INVALID
    except ListenAddressError as exc:
        print(f"{args.command}.listen_host: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except WorkloadError as exc:
        print(f"observer probe {args.workload}: {exc}", file=sys.stderr)
        return exc.exit_code
    except ObserverError as exc:
        print(f"observer: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def _check_config(path: Path) -> Settings:
    """The settings, or ConfigError for what the controller would refuse at start, the needs
    of the backend it selects included (only that one: the rest may be another machine's)."""
    from observer.controller.compose import (  # noqa: PLC0415 - heavy
        backend_preconditions,
        log_reader_preconditions,
    )

    settings = load_settings(path)
    problems = backend_preconditions(settings.controller) + log_reader_preconditions(
        settings.controller
    )
    if problems:
        raise ConfigError(problems)
    return settings


def _config_file(args: argparse.Namespace) -> Path | None:
    """--config at any level of the command, else $OBSERVER_CONFIG, else none (the defaults)."""
    given: Path | None = getattr(args, "config", None)
    from_environment = os.environ.get(CONFIG_ENV)
    return given or (Path(from_environment) if from_environment else None)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Command-line flags that set a setting, as a settings tree (validated like the file)."""
    node = {
        key: value
        for key, value in (
            ("grace_seconds", getattr(args, "grace_seconds", None)),
            ("idle_seconds", getattr(args, "idle_seconds", None)),
        )
        if value is not None
    }
    return {"detectors": {"node": node}} if node else {}


_STORE_COMMANDS = {
    "findings": store_commands.findings,
    "runs": store_commands.runs,
    "report": store_commands.report,
    "intervention": store_commands.intervention,
}


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "agent":
        if args.agent_command == "replay":
            return _agent_replay(args, settings)
        return _run_until_signalled(settings, "agent")
    if args.command == "controller":
        return _run_until_signalled(settings, "controller")
    if args.command in _STORE_COMMANDS:
        return _STORE_COMMANDS[args.command](args, settings)
    if args.command == "db" and args.db_command == "size":
        return store_commands.db_size(args, settings)
    if args.command == "db":
        from observer.storage.database import store_url, upgrade  # noqa: PLC0415 - heavy import
        from observer.storage.upgrades import Installation  # noqa: PLC0415 - with the above

        url = store_url(settings.storage.sqlite_path, settings.storage.url)
        upgrade(url, Installation.from_environment(os.environ))
        print("database schema is up to date")
        return EXIT_OK
    raise AssertionError(f"unhandled command {args.command}")


def _demo(args: argparse.Namespace) -> int:
    from observer.demo.run import LOG_FILE, default_start, run_demo, summary  # noqa: PLC0415
    from observer.demo.scenario import DEFAULT, load_scenario, what_would_play  # noqa: PLC0415

    scenario = load_scenario(args.scenario, args.out, args.language, days=args.days)
    start = args.start
    if start is None and args.scenario is None:
        start = default_start(scenario.spec.days, scenario.timezone)
    if start is not None:
        scenario = load_scenario(
            args.scenario, args.out, args.language, start=start, days=args.days
        )
    if args.check:
        print("\n".join(what_would_play(scenario, str(args.scenario or DEFAULT))))
        return EXIT_OK
    # Every finding is logged as it opens and closes, stamped by the real clock: the lines go
    # to a file, the console keeps the simulated timeline.
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / LOG_FILE).open("w", encoding="utf-8") as log:
        configure_logging("warning", "json", log)
        result = run_demo(scenario, args.out, port=args.port)
        print(summary(result))
    return EXIT_OK if result.score.passed else EXIT_FAILURE


def _probe(args: argparse.Namespace) -> int:
    if args.workload == "gpu-burn":
        from observer.workloads.gpu_burn import Burn, burn  # noqa: PLC0415

        work = Burn(args.seconds, int(args.memory_gib * 2**30), args.utilization, args.device)
        result = burn(work)
        print(
            f"gpu-burn: device {work.device}, {args.memory_gib:g} GiB held, {result.launches} "
            f"launches, busy {result.duty_percent:.1f}% of {result.elapsed_seconds:.1f} s"
        )
    elif args.workload == "gpu-comm":
        from observer.workloads import gpu_comm  # noqa: PLC0415

        def say(pair: gpu_comm.PairResult) -> None:
            path = "peer" if pair.copy.peer_access else "no peer access"
            expected = f"expected {pair.expected_gbps:g}" if pair.expected_gbps else "not judged"
            verdict = "FAILED" if pair.failure else "ok"
            print(
                f"gpu-comm: GPU {pair.copy.source} -> GPU {pair.copy.target}: {path}, "
                f"{pair.gbps:.1f} GB/s ({expected}): {verdict}",
                flush=True,
            )

        comm = gpu_comm.Comm(
            int(args.size_mib * 2**20),
            int(args.repeats),
            args.expect_gbps,
            args.min_percent / 100,
            not args.allow_no_peer,
            tuple(args.expect_model or gpu_comm.EXPECTED_GBPS),
        )
        gpu_comm.communicate(comm, report=say)
    elif args.workload in ("log-canary", "log-burst"):
        from observer.workloads.canary import write_canary  # noqa: PLC0415

        write_canary(sys.stdout, args.run_id, args.lines, args.interval_seconds, args.line_bytes)
    elif args.workload == "serve":
        from observer.workloads.serve import Service, serve  # noqa: PLC0415

        service = Service(
            args.host, args.port, args.latency_ms / 1000, args.warmup_seconds, args.seconds
        )
        stop = threading.Event()
        with stop_on_signals(stop):
            serve(service, stop)
    elif args.workload == "exit":
        time.sleep(args.after_seconds)
        return int(args.code)
    elif args.workload == "oom":
        from observer.workloads.failures import hold_memory  # noqa: PLC0415

        held = hold_memory(args.mib, args.hold_seconds)
        print(f"oom: held {held} MiB and was not killed: no memory limit reached")
    else:
        time.sleep(args.seconds)
    return EXIT_OK


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _percent(text: str) -> float:
    value = float(text)
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 100, not {text}")
    return value


def _model_rate(text: str) -> tuple[str, float]:
    model, _, rate = text.rpartition("=")
    if not model or not rate.replace(".", "", 1).isdigit() or float(rate) <= 0:
        raise argparse.ArgumentTypeError(f"not MODEL=GBPS with a rate above 0: {text!r}")
    return model, float(rate)


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _instant(text: str) -> datetime:
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {text!r}") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a YYYY-MM-DD day: {text!r}") from None


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"not KEY=VALUE: {text!r}")
    return key, value


def _agent_replay(args: argparse.Namespace, settings: Settings) -> int:
    from observer import codec  # noqa: PLC0415
    from observer.agent.main import replay_trace  # noqa: PLC0415

    for finding in replay_trace(args.trace_dir, settings.detectors.node):
        print(json.dumps(codec.finding_to_json(finding)))
    return EXIT_OK


def _run_until_signalled(settings: Settings, process: str) -> int:
    stop = threading.Event()
    with stop_on_signals(stop):
        if process == "agent":
            from observer.agent.main import run_agent  # noqa: PLC0415

            run_agent(settings, stop)
        else:
            from observer.controller.main import run_controller  # noqa: PLC0415

            run_controller(settings, stop)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
