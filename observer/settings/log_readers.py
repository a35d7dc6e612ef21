"""Where finished log canaries are read back (`controller.logs`): the reader, each reader's
own settings, and the credentials they send, given by reference (an environment variable or
a file, e.g. from a Secret), never as the secret itself."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from observer.settings.base import FieldProblems, Group, HttpUrl

LogReaderName = Literal["pod_logs", "loki", "elasticsearch", "files", "none"]
# What each reader cannot be built without, in the group of its name (the chart's schema
# asks for the same: deploy/chart-tools/values_schema.py).
REQUIRED_BY_READER: dict[str, tuple[str, ...]] = {
    "loki": ("url", "selector"),
    "elasticsearch": ("url", "index"),
    "files": ("pattern",),
}


class SecretRef(Group):
    """A secret named, never held: exactly one of `env` and `file`. Read when the controller
    builds its reader (and checked by `observer check-config`)."""

    env: str | None = Field(
        None,
        min_length=1,
        description="Environment variable holding it (on Kubernetes: a controller.secretEnv "
        "entry from a Secret).",
    )
    file: Path | None = Field(None, description="File holding it, e.g. a mounted Secret's key.")

    @model_validator(mode="after")
    def _one_source(self) -> SecretRef:
        if self.env is None and self.file is None:
            raise FieldProblems([("env", "is required: the variable's name, or set file")])
        if self.env is not None and self.file is not None:
            raise FieldProblems([("file", "set either env or file, not both")])
        return self


class AuthSettings(Group):
    """HTTP credentials of a log backend: basic auth (username and password) or a bearer
    token; neither: none."""

    username: str | None = Field(None, min_length=1, description="Basic auth user.")
    password: SecretRef | None = Field(None, description="Basic auth password, by reference.")
    bearer_token: SecretRef | None = Field(
        None, description="Sent as 'Authorization: Bearer ...', by reference."
    )

    @model_validator(mode="after")
    def _one_scheme(self) -> AuthSettings:
        problems = []
        if (self.username is None) != (self.password is None):
            missing = "password" if self.password is None else "username"
            problems.append((missing, "is required with basic auth (username and password)"))
        if self.bearer_token is not None and self.username is not None:
            problems.append(("bearer_token", "set either basic auth or a bearer token, not both"))
        if problems:
            raise FieldProblems(problems)
        return self


def _no_credentials(url: str | None) -> str | None:
    """A backend URL, refused when it carries credentials (user:password@), which belong in
    `auth` as a reference."""
    if url is not None and urlsplit(url).username is not None:
        raise ValueError("carries credentials: give them in auth, by reference")
    return url


class LokiSettings(Group):
    """Grafana Loki (logs.reader: loki), read through query_range."""

    url: HttpUrl | None = Field(None, description="Loki's base URL, e.g. http://loki-gateway.loki.")
    selector: str | None = Field(
        None,
        description="LogQL stream selector holding the probes' output, e.g. "
        '\'{namespace=~"team-.*", container="probe"}\'; each query adds the run\'s line '
        'filter (|= "run=<run id>").',
    )
    tenant: str | None = Field(
        None, min_length=1, description="X-Scope-OrgID of a multi-tenant Loki; unset: none sent."
    )
    page_limit: int = Field(
        5000, ge=1, description="Entries per query, at most Loki's max_entries_limit_per_query."
    )
    timeout_seconds: float = Field(10.0, gt=0, description="Each query.")
    auth: AuthSettings = AuthSettings()

    _url = field_validator("url")(_no_credentials)


class ElasticsearchSettings(Group):
    """Elasticsearch or OpenSearch (logs.reader: elasticsearch), read through _search with
    search_after."""

    url: HttpUrl | None = Field(None, description="The cluster's base URL.")
    index: str | None = Field(
        None, description="Index, alias, data stream or pattern holding the probes' output."
    )
    message_field: str = Field(
        "message", min_length=1, description="The line's field; analysed text, not keyword."
    )
    timestamp_field: str = Field(
        "@timestamp", min_length=1, description="The time documents are filed under."
    )
    delivered_field: str | None = Field(
        None,
        min_length=1,
        description="An ingest time the cluster sets (e.g. event.ingested): the line's delivery "
        "time; unset: delivery is bounded by timestamp_field only.",
    )
    page_size: int = Field(1000, ge=1, description="Documents per _search page.")
    timeout_seconds: float = Field(10.0, gt=0, description="Each search.")
    auth: AuthSettings = AuthSettings()

    _url = field_validator("url")(_no_credentials)


class FileLogSettings(Group):
    """Plain files at the end of a pipeline (logs.reader: files), e.g. a collector's output."""

    pattern: str | None = Field(
        None,
        description="Glob of the file and its rotations, e.g. /var/log/collected.log* "
        "(.gz rotations are read too).",
    )
    delivery_time: Literal["leading_timestamp", "unknown"] = Field(
        "unknown",
        description="leading_timestamp: each line starts with the collector's RFC 3339 receive "
        "time (rsyslog's date-rfc3339), the line's delivery time; unknown: none is recorded.",
    )


class LogsSettings(Group):
    """The log backend the controller reads finished canaries back from."""

    reader: LogReaderName = Field(
        "pod_logs",
        description="pod_logs: the job's own output through the scheduler (pod-log API, Slurm "
        "output file); loki, elasticsearch, files: the pipeline's end, set in the group of the "
        "same name; none: log canaries are not read back.",
    )
    settle_seconds: float = Field(
        60.0, ge=0, description="Wait after a canary ends before reading it back (shippers batch)."
    )
    loki: LokiSettings = LokiSettings()
    elasticsearch: ElasticsearchSettings = ElasticsearchSettings()
    files: FileLogSettings = FileLogSettings()

    @model_validator(mode="after")
    def _reader_is_set_up(self) -> LogsSettings:
        # What the controller could not build its reader without, refused at load.
        required = REQUIRED_BY_READER.get(self.reader, ())
        group = getattr(self, self.reader, None)
        problems = [
            (f"{self.reader}.{name}", f"is required with reader {self.reader}")
            for name in required
            if not getattr(group, name)
        ]
        if problems:
            raise FieldProblems(problems)
        return self
