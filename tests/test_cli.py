"""The command line as a user meets it: `--config` after any word of a command or from
$OBSERVER_CONFIG, the README's command table against the parser, and ordinary failures (a
taken port, a missing database, a reader gone early) as one line with nothing left behind."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from observer.cli import _parser
from observer.domain import Finding, FindingKind, Severity
from observer.records import StoredDelivery
from observer.storage.store import Store
from tests.support import net
from tests.support.cli import run_cli
from tests.support.databases import migrated_sqlite

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "tests" / "fixtures" / "nvml" / "h200-trace"


def verbs(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every command the parser has, as its words: ('agent',), ('agent', 'replay'), ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*words, name)
                yield from verbs(sub, (*words, name))


@pytest.mark.parametrize(
    "argv",
    [
        ["agent", "--config", "c.yaml"],
        ["agent", "replay", "trace", "--config", "c.yaml"],
        ["agent", "--config", "c.yaml", "replay", "trace"],
        ["controller", "--config", "c.yaml"],
        ["findings", "--json", "--config", "c.yaml"],
        ["db", "upgrade", "--config", "c.yaml"],
        ["db", "--config", "c.yaml", "upgrade"],
        ["report", "daily", "--config", "c.yaml"],
        ["report", "--config", "c.yaml", "daily"],
        ["report", "verdict", "--deliver", "--config", "c.yaml"],
        ["report", "deliveries", "--config", "c.yaml"],
        ["intervention", "add", "--by", "me", "--reason", "why", "--config", "c.yaml"],
        ["intervention", "--config", "c.yaml", "add", "--by", "me", "--reason", "why"],
    ],
)
def test_config_is_taken_after_any_word_of_a_command(argv: list[str]) -> None:
    assert _parser().parse_args(argv).config == Path("c.yaml")


def test_config_comes_from_the_environment_when_not_given(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"storage:\n  sqlite_path: {tmp_path / 'env.db'}\n")

    result = run_cli("db", "upgrade", env={"OBSERVER_CONFIG": str(config)}, cwd=tmp_path)

    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "env.db").is_file()


def test_an_invalid_config_from_the_environment_stops_the_command(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("agent:\n  colour: blue\n")

    result = run_cli("findings", env={"OBSERVER_CONFIG": str(config)}, cwd=tmp_path)

    assert (result.exit_code, result.stderr) == (2, "agent.colour: unknown setting\n")


def _table_commands() -> list[list[str]]:
    """The README's command table, each row's command with sample values for its
    placeholders and its optional parts given."""
    samples = {
        "FILE": "c.yaml",
        "TRACE_DIR": "trace",
        "N": "1",
        "T": "2026-11-30T00:00",
        "D": "fairness",
        "YYYY-MM-DD": "2026-11-30",
        "NAME": "x",
        "TEXT": "x",
        "K=V": "node=a",
        "DIR": "out",
        "P": "0",
    }
    readme = (REPO / "README.md").read_text()
    rows = re.findall(r"^\| `observer ([^`]*)` \|", readme, flags=re.MULTILINE)
    commands = []
    for row in rows:
        words = shlex.split(re.sub(r"[\[\]]|\.\.\.", " ", row.replace("\\|", "|")))
        commands.append([samples.get(w, w.split("|")[0]) for w in words])
    return commands


def test_every_command_of_the_readme_table_parses() -> None:
    commands = _table_commands()
    assert len(commands) >= 12
    for argv in commands:
        _parser().parse_args(argv)


def test_every_command_of_the_parser_is_in_the_readme_table() -> None:
    listed = {tuple(argv[:n]) for argv in _table_commands() for n in range(1, len(argv) + 1)}
    assert set(verbs(_parser())) - listed == set()


@pytest.mark.parametrize(
    "argv",
    [
        ["findings"],
        ["findings", "--json"],
        ["runs", "--date", "2026-11-30"],
        ["report", "daily", "--date", "2026-11-30"],
        ["report", "verdict"],
        ["report", "deliveries"],
    ],
)
def test_a_missing_database_is_named_with_its_fix_and_never_created(
    tmp_path: Path, argv: list[str]
) -> None:
    database = tmp_path / "soak.db"
    (tmp_path / "c.yaml").write_text(f"storage:\n  sqlite_path: {database}\n")

    result = run_cli(*argv, "--config", "c.yaml", cwd=tmp_path)

    assert result.exit_code == 2
    assert re.fullmatch(
        rf"observer: sqlite:///{re.escape(str(database))} has schema revision none \(no such "
        r"file\), this observer needs \w+: run `observer db upgrade --config c\.yaml`\n",
        result.stderr,
    ), result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_an_unmigrated_database_is_named_with_its_fix(tmp_path: Path) -> None:
    database = tmp_path / "soak.db"
    database.touch()
    (tmp_path / "c.yaml").write_text(f"storage:\n  sqlite_path: {database}\n")

    result = run_cli("findings", "--config", "c.yaml", cwd=tmp_path)

    assert result.exit_code == 2
    assert "has schema revision none, this observer needs" in result.stderr
    assert result.stderr.endswith(": run `observer db upgrade --config c.yaml`\n")


def test_a_reader_gone_early_ends_the_command_quietly(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # `| head` that has already left
    # A process of its own: its standard output is the pipe, flushed once more at its exit.
    proc = subprocess.run(
        [sys.executable, "-m", "observer.cli", "metrics", "list"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )
    os.close(write)

    assert proc.returncode == 1
    assert proc.stderr == ""


@pytest.fixture
def taken_port() -> Iterator[int]:
    with net.taken_port() as port:
        yield port


@pytest.mark.parametrize(
    ("argv", "setting"),
    [
        (["agent", "--config", "c.yaml"], "agent.listen_port"),
        (["controller", "--config", "c.yaml"], "controller.listen_port"),
        (["demo", "--out", "demo-out", "--port", "{port}"], "--port"),
    ],
)
def test_a_taken_port_names_the_setting_to_change(
    tmp_path: Path, taken_port: int, argv: list[str], setting: str
) -> None:
    (tmp_path / "c.yaml").write_text(
        f"agent:\n  gpu_backend: replay\n  replay_trace_dir: {TRACE}\n"
        f"  listen_host: 127.0.0.1\n  listen_port: {taken_port}\n"
        f"controller:\n  listen_host: 127.0.0.1\n  listen_port: {taken_port}\n"
        f"storage:\n  sqlite_path: {tmp_path / 'observer.db'}\n"
    )

    result = run_cli(*(a.format(port=taken_port) for a in argv), cwd=tmp_path)

    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"{setting}: port {taken_port} on 127.0.0.1 is already in use; "
        "choose another (0: any free one)"
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("daemon", ["agent", "controller"])
@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("192.0.2.1", "Cannot assign requested address"),  # TEST-NET-1: no address here
        ("no-such-host.invalid", ""),  # never resolves; the resolver's words vary
    ],
)
def test_an_address_check_config_accepts_but_this_machine_lacks_is_one_line(
    tmp_path: Path, daemon: str, host: str, reason: str
) -> None:
    (tmp_path / "c.yaml").write_text(
        f"agent:\n  gpu_backend: replay\n  replay_trace_dir: {TRACE}\n"
        f"  listen_host: {host}\n  listen_port: 0\n"
        f"controller:\n  listen_host: {host}\n  listen_port: 0\n"
        f"storage:\n  sqlite_path: {tmp_path / 'observer.db'}\n"
    )
    assert run_cli("check-config", "c.yaml", cwd=tmp_path).exit_code == 0

    result = run_cli(daemon, "--config", "c.yaml", cwd=tmp_path)

    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1].startswith(
        f"{daemon}.listen_host: cannot listen on {host} ({reason}"
    )
    assert "Traceback" not in result.stderr


def test_check_config_says_which_checks_are_off_and_why(tmp_path: Path) -> None:
    config = tmp_path / "observer.yaml"
    config.write_text("controller:\n  backend: simulated\n")

    done = run_cli("check-config", str(config), cwd=tmp_path)

    assert (done.exit_code, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        f"{config}: valid",
        "monitoring: off: controller.prometheus_url is not set",
        "alerts: off: reports.alertmanager_url is not set",
        "freshness of agent series: off: no agents configured (controller.agent_urls, "
        "controller.agent_dns_name)",
    ]


def test_check_config_lists_no_check_off_when_every_source_is_set(tmp_path: Path) -> None:
    config = tmp_path / "observer.yaml"
    config.write_text(
        "controller:\n"
        "  prometheus_url: http://prometheus:9090\n"
        "  agent_dns_name: agents.observer.svc\n"
        "reports:\n"
        "  alertmanager_url: http://alertmanager:9093\n"
    )

    done = run_cli("check-config", str(config), cwd=tmp_path)

    assert (done.exit_code, done.stdout) == (0, f"{config}: valid\n")


def test_check_config_warns_of_each_planned_probe_no_launch_of_which_fits_the_budget(
    tmp_path: Path,
) -> None:
    config = tmp_path / "observer.yaml"
    config.write_text(
        "controller:\n"
        "  prometheus_url: http://prometheus:9090\n"
        "  agent_dns_name: agents.observer.svc\n"
        "  gpus_per_node: 4\n"
        "  max_probe_gpus: 6\n"
        "  max_probe_gpus_per_tenant: 3\n"
        "  plan:\n"
        "    - {window: weekday-peak, probe: burst, every_seconds: 1800}\n"
        "    - {window: night, probe: burst, every_seconds: 3600}\n"
        "    - {window: night, probe: multi-node, every_seconds: 3600}\n"
        "    - {window: night, probe: short, every_seconds: 600}\n"
        "    - {window: night, probe: isolation, every_seconds: 600}\n"
        "reports:\n"
        "  alertmanager_url: http://alertmanager:9093\n"
    )

    done = run_cli("check-config", str(config), cwd=tmp_path)

    # burst: 4 copies of 1 GPU; multi-node: 2 nodes of 4 GPUs, over both budgets.
    assert (done.exit_code, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        f"{config}: valid",
        "warning: probe burst: 4 x 1 GPUs can never fit max_probe_gpus_per_tenant 3",
        "warning: probe multi-node: 1 x 8 GPUs can never fit max_probe_gpus_per_tenant 3",
    ]


def test_check_config_names_the_total_budget_when_it_is_the_smaller(tmp_path: Path) -> None:
    config = tmp_path / "observer.yaml"
    config.write_text(
        "controller:\n"
        "  max_probe_gpus: 6\n"
        "  max_probe_gpus_per_tenant: 8\n"
        "  plan: [{window: night, probe: multi-gpu, every_seconds: 3600}]\n"
    )

    done = run_cli("check-config", str(config), cwd=tmp_path)

    assert done.exit_code == 0
    assert done.stdout.splitlines()[-1] == (
        "warning: probe multi-gpu: 1 x 8 GPUs can never fit max_probe_gpus 6"
    )


def test_findings_read_in_the_platforms_time_with_its_offset(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path / "soak.db")
    opened = datetime(2026, 11, 29, 19, 20, tzinfo=UTC)
    with Store(url) as store:
        store.save_findings(
            [
                Finding(
                    detector="stuck_terminating",
                    kind=FindingKind.CONDITION,
                    subject={"job_id": "j1", "node": "n1"},
                    severity=Severity.CRITICAL,
                    summary="pod j1 stuck Terminating",
                    opened_at=opened,
                    closed_at=opened.replace(hour=20),
                )
            ]
        )
    (tmp_path / "c.yaml").write_text(
        f"storage: {{url: '{url}'}}\ncontroller: {{timezone: Asia/Shanghai}}\n"
    )

    result = run_cli("findings", "--config", "c.yaml", cwd=tmp_path)

    assert result.exit_code == 0, result.stderr
    zone, line = result.stdout.splitlines()
    assert zone == "Platform timezone: China Standard Time (UTC+8)"
    assert line.split()[:3] == ["2026-11-30", "03:20:00", "+08:00"]
    assert "closed 2026-11-30 04:20:00 +08:00" in line


def test_findings_as_json_give_the_platforms_time_with_its_offset(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path / "soak.db")
    opened = datetime(2026, 11, 29, 19, 20, tzinfo=UTC)
    with Store(url) as store:
        store.save_findings(
            [
                Finding(
                    detector="stuck_terminating",
                    kind=FindingKind.CONDITION,
                    subject={"job_id": "j1", "node": "n1"},
                    severity=Severity.CRITICAL,
                    summary="pod j1 stuck Terminating",
                    opened_at=opened,
                    closed_at=opened.replace(hour=20),
                )
            ]
        )
    (tmp_path / "c.yaml").write_text(
        f"storage: {{url: '{url}'}}\ncontroller: {{timezone: Asia/Shanghai}}\n"
    )

    result = run_cli("findings", "--json", "--config", "c.yaml", cwd=tmp_path)

    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    said = [datetime.fromisoformat(found[key]) for key in ("opened_at", "closed_at")]
    assert said == [opened, opened.replace(hour=20)]
    assert {at.utcoffset() for at in said} == {timedelta(hours=8)}


def test_deliveries_read_in_the_platforms_time_with_its_offset(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path / "soak.db")
    at = datetime(2026, 11, 29, 23, 5, tzinfo=UTC)
    with Store(url) as store:
        store.add_deliveries([StoredDelivery(at, "daily-2026-11-29", "slack", "full", 1)])
    (tmp_path / "c.yaml").write_text(
        f"storage: {{url: '{url}'}}\ncontroller: {{timezone: Asia/Shanghai}}\n"
    )

    text = run_cli("report", "deliveries", "--config", "c.yaml", cwd=tmp_path).stdout
    as_json = run_cli("report", "deliveries", "--json", "--config", "c.yaml", cwd=tmp_path)

    [recorded] = as_json.stdout.splitlines()

    assert text.split()[:3] == ["2026-11-30", "07:05:00", "+08:00"]
    said = datetime.fromisoformat(json.loads(recorded)["at"])
    assert said == at and said.utcoffset() == timedelta(hours=8)
