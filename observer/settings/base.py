"""The base of every settings group (unknown keys are errors, values are frozen) and the error
a rule across fields raises to name each field at fault."""

from __future__ import annotations

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
