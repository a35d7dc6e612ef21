"""The base of every settings group (unknown keys are errors, values are frozen), the error
a rule across fields raises to name each field at fault, and the rule that names are unique."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from datetime import time
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict


class Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldProblems(ValueError):
    """Problems found by a rule across fields, each at its path below the model that raised it:
    pydantic would report them all at that model, joined on one line."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{path}: {message}" for path, message in problems))
        self.problems = problems


def repeated(field: str, names: Sequence[str], attribute: str = "") -> list[tuple[str, str]]:
    """A problem at `field.<i>[.attribute]` for each of `names` that came before (at item
    `first`): whatever refers to one of them by name could mean either."""
    first: dict[str, int] = {}
    problems = []
    for i, name in enumerate(names):
        if name in first:
            path = f"{field}.{i}.{attribute}" if attribute else f"{field}.{i}"
            problems.append((path, f"{name!r} again (first at item {first[name]})"))
        else:
            first[name] = i
    return problems


def _http_url(text: str) -> str:
    """An http(s) URL with a host (and a port that is a number), else one line saying why."""
    example = "e.g. http://host:port"
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise ValueError(f"is not a URL ({exc}), {example}") from None
    try:
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        raise ValueError(f"has a port that is not a number, {example}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL with a host, {example}")
    if any(c.isspace() for c in text):
        raise ValueError(f"must be one URL, without spaces, {example}")
    return text


# A base URL the observer sends HTTP requests to: checked when the settings are read, not at
# the first request.
HttpUrl = Annotated[str, AfterValidator(_http_url)]


_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")


def _listen_host(text: str) -> str:
    """An IP address or a host name (RFC 1123), else one line: a server cannot bind to it."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        if len(text) > 253 or not _HOST_NAME.fullmatch(text):
            raise ValueError("must be an IP address or a host name, e.g. 0.0.0.0") from None
    return text


# The address a daemon's HTTP server binds: checked when the settings are read, so that
# `observer check-config` refuses what the daemon could not listen on.
ListenHost = Annotated[str, AfterValidator(_listen_host)]


def _local_time(value: time) -> time:
    if value.tzinfo is not None:
        raise ValueError("must be a local time without an offset (controller.timezone is its zone)")
    return value


# A time of day in the platform's timezone: one with an offset would be compared with the
# local clock's naive times, and fail at every comparison instead of here.
LocalTime = Annotated[time, AfterValidator(_local_time)]
