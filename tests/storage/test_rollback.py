"""A store an older release meets after a rollback: this release migrates it forward and
records itself; the previous release (this code with its migrations stopping before the
newest, run as a process of its own) refuses it with one line that names both revisions, the
release that migrated it and the way back, and a status of its own, from `db upgrade`, the
controller and a command that opens the store."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

import observer
from observer.errors import EXIT_SCHEMA_NEWER
from observer.settings import ENV_PREFIX
from observer.storage.database import display, upgrade
from observer.storage.tables import schema_upgrades_table
from observer.storage.upgrades import (
    HELM_NAMESPACE_ENV,
    HELM_RELEASE_ENV,
    Installation,
)
from tests.support.cli import run_cli

PACKAGE = Path(observer.__file__).parent
PREVIOUS_VERSION = "0.0.9"  # what the previous release's copy calls itself
HELM = {HELM_RELEASE_ENV: "soak", HELM_NAMESPACE_ENV: "gpu"}


@dataclass(frozen=True)
class Release:
    """A copy of the observer package importable from `path`, its newest migration `head`."""

    path: Path
    head: str


def _script(package: Path) -> ScriptDirectory:
    config = Config()
    config.set_main_option("script_location", str(package / "storage" / "migrations"))
    return ScriptDirectory.from_config(config)


def _head(package: Path) -> str:
    head = _script(package).get_current_head()
    assert head is not None
    return head


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """The previous release: this package without its newest migration, its version older."""
    root = tmp_path_factory.mktemp("previous")
    copy = root / "observer"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    newest = _script(PACKAGE).get_revision(_head(PACKAGE))
    assert newest is not None
    (copy / "storage" / "migrations" / "versions" / Path(newest.path).name).unlink()
    init = copy / "__init__.py"
    init.write_text(
        init.read_text().replace(
            f'__version__ = "{observer.__version__}"', f'__version__ = "{PREVIOUS_VERSION}"'
        )
    )
    assert newest.down_revision == _head(copy)
    return Release(root, _head(copy))


def run_release(
    release: Release, *argv: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`observer ARGV` of `release`, as its own process, with no OBSERVER_* variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env["PYTHONPATH"] = str(release.path)
    code = "import sys; from observer.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=release.path,
        check=False,
    )


def config(tmp_path: Path, db_url: str) -> Path:
    path = tmp_path / "observer.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "storage": {"url": db_url},
                "controller": {"listen_host": "127.0.0.1", "listen_port": 0},
                "reports": {"output_dir": str(tmp_path / "reports")},
            }
        )
    )
    return path


def revision_of(db_url: str) -> str:
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as connection:
            return str(
                connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
            )
    finally:
        engine.dispose()


def upgrades(db_url: str) -> list[sa.Row[Any]]:
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as connection:
            t = schema_upgrades_table
            return list(connection.execute(sa.select(t).order_by(t.c.id)))
    finally:
        engine.dispose()


def the_line(proc: subprocess.CompletedProcess[str]) -> str:
    """Its one line on stderr: no traceback, nothing else."""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_the_previous_release_refuses_a_store_this_one_migrated_and_names_the_way_back(
    previous: Release, db_url: str, tmp_path: Path
) -> None:
    cfg = config(tmp_path, db_url)
    forward = run_cli("db", "upgrade", "--config", str(cfg), env=HELM)
    assert forward.exit_code == 0, forward.stderr
    head = _head(PACKAGE)
    (row,) = upgrades(db_url)
    assert (row.version, row.revision) == (observer.__version__, head)
    assert (row.helm_release, row.helm_namespace) == ("soak", "gpu")

    where = re.escape(display(db_url))
    expected = (
        rf"observer: {where} has schema revision {head}, newer than this observer's "
        rf"{previous.head} \(release {PREVIOUS_VERSION}\): observer {observer.__version__} "
        rf"migrated it on {row.at:%Y-%m-%d %H:%M} UTC \(Helm release soak\); go back to it: "
        r"`helm rollback soak <REVISION> --namespace gpu`, REVISION the newest with APP "
        rf"VERSION {observer.__version__} in `helm history soak --namespace gpu`; or restore "
        r"the database from a backup taken before that upgrade"
    )
    # the init container, the controller itself, and a command that only opens the store
    for argv in (("db", "upgrade"), ("controller",), ("findings",)):
        proc = run_release(previous, *argv, "--config", str(cfg))
        assert proc.returncode == EXIT_SCHEMA_NEWER, proc.stderr
        assert re.fullmatch(expected, the_line(proc)), argv
        assert "db upgrade`" not in proc.stderr  # the old advice, which cannot help
    assert revision_of(db_url) == head, "the refusal leaves the store as it was"
    assert len(upgrades(db_url)) == 1


def test_a_store_migrated_outside_helm_names_the_release_to_reinstall(
    previous: Release, db_url: str, tmp_path: Path
) -> None:
    upgrade(db_url, Installation("0.3.1"))

    proc = run_release(previous, "db", "upgrade", "--config", str(config(tmp_path, db_url)))

    assert proc.returncode == EXIT_SCHEMA_NEWER
    line = the_line(proc)
    assert line.endswith(
        " UTC; go back to it: reinstall observer 0.3.1, or restore the database from a backup "
        "taken before that upgrade"
    ), line
    assert ": observer 0.3.1 migrated it on " in line
    assert "helm" not in line


def test_a_store_with_no_record_of_its_release_is_still_refused_in_one_line(
    previous: Release, db_url: str, tmp_path: Path
) -> None:
    upgrade(db_url)
    engine = sa.create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(sa.delete(schema_upgrades_table))
    engine.dispose()

    proc = run_release(previous, "db", "upgrade", "--config", str(config(tmp_path, db_url)))

    assert proc.returncode == EXIT_SCHEMA_NEWER
    assert the_line(proc).endswith(
        f"has schema revision {_head(PACKAGE)}, newer than this observer's {previous.head} "
        f"(release {PREVIOUS_VERSION}), and no record of the release that migrated it: install "
        "that release again, or restore the database from a backup taken before that upgrade"
    )


def test_each_release_that_upgrades_adds_one_row_and_a_restart_none(db_url: str) -> None:
    chart = Installation.from_environment(HELM)
    upgrade(db_url, chart)  # the init container
    upgrade(db_url)  # the controller's own upgrade as it starts: the same release
    upgrade(db_url, chart)  # a restarted pod
    upgrade(db_url, Installation("0.2.1", "soak", "gpu"))  # the next release

    assert [(r.version, r.helm_release, r.helm_namespace) for r in upgrades(db_url)] == [
        (observer.__version__, "soak", "gpu"),
        ("0.2.1", "soak", "gpu"),
    ]


def test_a_partial_helm_environment_records_no_helm_release() -> None:
    assert Installation.from_environment({HELM_RELEASE_ENV: "soak"}) == Installation()
    assert Installation.from_environment({HELM_NAMESPACE_ENV: "gpu"}) == Installation()
    assert Installation.from_environment(HELM) == Installation(observer.__version__, "soak", "gpu")


def test_migration_0022_reverts_leaving_the_other_tables_as_they_were(db_url: str) -> None:
    upgrade(db_url)
    below = _script(PACKAGE).get_revision("0019")
    assert below is not None
    engine = sa.create_engine(db_url)
    try:
        config = Config()
        config.set_main_option("script_location", str(PACKAGE / "storage" / "migrations"))
        with engine.begin() as connection:  # the migrations after it, reverted first
            config.attributes["connection"] = connection
            command.downgrade(config, below.revision)
        before = set(sa.inspect(engine).get_table_names())
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, str(below.down_revision))
        after = set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()

    assert before - after == {"schema_upgrades"}
    assert after <= before
    upgrade(db_url, Installation.from_environment(HELM))
    assert [(r.revision, r.helm_release) for r in upgrades(db_url)] == [(_head(PACKAGE), "soak")]
