"""How the observer logs (`logging`): level and output format."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from observer.settings.base import Group


class LoggingSettings(Group):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = Field(
        "auto", description="`auto`: JSON unless standard error is a terminal."
    )
