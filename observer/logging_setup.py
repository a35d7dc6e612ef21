"""structlog set-up: JSON lines for machines, a console renderer for people at a terminal."""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog

Format = Literal["auto", "json", "console"]

# What this process was configured with, its format resolved: a process it spawns (the report
# build) configures itself the same, so that its lines join the parent's on the same stream.
_configured: tuple[str, Format] | None = None


def configure_logging(
    level: str = "info", fmt: Format = "auto", stream: TextIO | None = None
) -> None:
    """`stream`: where the lines go, standard error when None (the demo gives a file, so that
    they stay out of its console)."""
    global _configured  # noqa: PLW0603
    to = sys.stderr if stream is None else stream
    as_json = fmt == "json" or (fmt == "auto" and not to.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=to),
        cache_logger_on_first_use=False,
    )
    _configured = (level, "json" if as_json else "console")


def logging_configured() -> tuple[str, Format] | None:
    """The level and format this process was configured with; None when it never was."""
    return _configured


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger
