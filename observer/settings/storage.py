"""Where the observer's store lives (`storage`): PostgreSQL or the embedded SQLite file."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from pydantic import Field, field_validator

from observer.settings.base import Group

# What the store speaks, and the package each needs: psycopg 3 for PostgreSQL (SQLAlchemy's
# plain postgresql:// would look for psycopg2), the standard library's sqlite3 for SQLite.
DRIVERS = {"postgresql+psycopg": "psycopg", "sqlite": "sqlite3"}


class StorageSettings(Group):
    url: str | None = Field(
        None,
        description="SQLAlchemy URL of PostgreSQL (postgresql+psycopg://...); takes precedence "
        "over sqlite_path. Give it through the environment or a Secret, not the config file.",
    )
    sqlite_path: Path = Field(Path("observer.db"), description="The embedded default store.")
    raw_retention_days: int | None = Field(
        7,
        ge=1,
        description="Days each raw GPU sample is kept, then deleted in small batches; what the "
        "reports read of it is counted as it is stored and kept for the soak, and so are the "
        "samples of the hours a report period begins or ends inside of. null: kept for ever.",
    )
    space_warning_days: float = Field(
        3.0,
        gt=0,
        description="store_space_low opens when the store's volume would fill within this many "
        "days at the growth measured over the last day (SQLite; PostgreSQL's volume is not "
        "seen from here).",
    )

    @field_validator("url")
    @classmethod
    def _a_driver_the_store_speaks(cls, url: str | None) -> str | None:
        """Refused when read, not when the controller first opens the store; the message
        names the scheme only, never the rest (it may hold a password)."""
        if not url:
            return url
        scheme = url.split("://", 1)[0] if "://" in url else ""
        if scheme not in DRIVERS:
            named = f"{scheme}://" if scheme else "one without a scheme"
            raise ValueError(f"must be a postgresql+psycopg:// URL, not {named}")
        if find_spec(DRIVERS[scheme]) is None:
            raise ValueError(f"{scheme}:// needs the {DRIVERS[scheme]} package, not installed")
        return url
