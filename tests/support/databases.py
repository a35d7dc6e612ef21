"""Databases as the tests get them: a new SQLite file is a copy of one migrated once per test
process, since the thirteen migrations cost more than most tests. PostgreSQL schemas are
migrated as the daemon migrates them (a schema cannot be copied)."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import sqlalchemy as sa

from observer.storage.database import upgrade


@functools.cache
def _template() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="observer-schema-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    path = directory / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


def migrate(url: str) -> None:
    """What `observer db upgrade` leaves: the database at the migrations' head."""
    parsed = sa.make_url(url)
    new_file = parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "")
    if new_file and not Path(str(parsed.database)).exists():
        shutil.copyfile(_template(), str(parsed.database))
    else:
        upgrade(url)


def migrated_sqlite(path: Path) -> str:
    """The URL of a new SQLite database at `path`, at the migrations' head."""
    url = f"sqlite:///{path}"
    migrate(url)
    return url
