"""Where the observer's store lives (`storage`): PostgreSQL or the embedded SQLite file."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from observer.settings.base import Group


class StorageSettings(Group):
    url: str | None = Field(
        None,
        description="SQLAlchemy URL of PostgreSQL (postgresql+psycopg://...); takes precedence "
        "over sqlite_path. Give it through the environment or a Secret, not the config file.",
    )
    sqlite_path: Path = Field(Path("observer.db"), description="The embedded default store.")
