"""The JSON Slurm's commands print (`squeue --json`, `sinfo --json`, `scontrol show nodes
--json`), told apart by what each document says of itself, and read into plain values for the
scheduler backend. Pure.

Each release prints one family of shapes, named by its data_parser (SchedMD's
`src/plugins/data_parser/v0.0.<n>/parsers.c` at the release's tag; 22.05 has no data_parser
and names its openapi plugin):

- 22.05, openapi/v0.0.38 (`meta.plugin.type`): `job_state` "RUNNING"; times in seconds;
  `exit_code` the raw wait status; a node's `state` "idle" with `state_flags`; nodes listed
  by `sinfo --json`.
- 23.02, v0.0.39 (`meta.plugins.data_parser`): as 22.05, but `exit_code` is the raw wait
  status as `{set, infinite, number}`, a node's `state` a list ["IDLE", "DRAIN"], and the nodes
  listed by `scontrol show nodes --json`.
- 23.11, v0.0.40 (`meta.plugin.data_parser`): `job_state` a list of the base state and its
  flags (["RUNNING", "COMPLETING"]); times `{set, infinite, number}`; `exit_code`
  `{status, return_code, signal: {id, name}}`.
- 24.05, 24.11, 25.05, v0.0.41 to v0.0.43: as 23.11.

From 23.02 `sinfo --json` prints `sinfo` summaries instead of the nodes. A document of a
data_parser this reader does not know is refused in one line naming the release, never read
as a neighbour's; a field of a known one in another shape names the field."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

OLDEST, NEWEST = 38, 43
# The flags a job's state carries beside its base, in the order job_state_string() of
# src/common/slurm_protocol_defs.c lets them name the state, as 22.05 and 23.02 print it.
_STATE_FLAGS = (
    "COMPLETING",
    "STAGE_OUT",
    "CONFIGURING",
    "RESIZING",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "SPECIAL_EXIT",
    "STOPPED",
    "REVOKED",
    "RESV_DEL_HOLD",
    "SIGNALING",
)
# A node's base states (NODE_STATE_BASE); the rest of its list are flags.
_NODE_BASES = frozenset({"IDLE", "DOWN", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "UNKNOWN"})
_PARSER = re.compile(r"v0\.0\.(\d+)")


class ShapeError(ValueError):
    """A document, or one of its fields, not in a shape this reader knows."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """The family of shapes one document is in: its data_parser's number (38 for 22.05's
    openapi/v0.0.38) and the release that printed it."""

    data_parser: int
    release: str

    def __str__(self) -> str:
        return f"Slurm {self.release} (data_parser v0.0.{self.data_parser})"

    @property
    def node_listing(self) -> tuple[str, ...]:
        """The command, and its arguments after `--json`, that lists the nodes one by one."""
        return ("sinfo",) if self.data_parser == OLDEST else ("scontrol", "show", "nodes")

    def job_state(self, job: Mapping[str, Any]) -> str:
        """The state as 22.05 names it: a flag such as COMPLETING before the base state."""
        state = job["job_state"]
        if self.data_parser < 40:
            return _text(state, "job_state")
        flags = _strings(state, "job_state")
        named = next((f for f in _STATE_FLAGS if f in flags), None)
        return named or next((f for f in flags if f not in _STATE_FLAGS), "")

    def time(self, job: Mapping[str, Any], field: str) -> datetime | None:
        """An instant, None when unset (0, no value, infinite)."""
        value = job[field]
        seconds = _number(value, field) if self.data_parser >= 40 else value
        if isinstance(seconds, str) and not seconds.isdigit():
            return None  # "None", "Unknown"
        try:
            whole = int(seconds) if seconds is not None else 0
        except (TypeError, ValueError):
            raise ShapeError(f"{field}: {value!r} is not unix seconds") from None
        return datetime.fromtimestamp(whole, UTC) if whole > 0 else None

    def exit_status(self, job: Mapping[str, Any]) -> tuple[int, int] | None:
        """(return code, signal) the job's batch script ended with; None when not known."""
        value = job["exit_code"]
        if self.data_parser >= 40:
            if not isinstance(value, Mapping) or "return_code" not in value:
                raise ShapeError(f"exit_code: {value!r} is not a process exit code")
            signal = value.get("signal") or {}
            code = _number(value["return_code"], "exit_code.return_code")
            number = _number(signal.get("id"), "exit_code.signal.id") if signal else None
            if code is None and number is None:
                return None
            return int(code or 0), int(number or 0)
        raw = _number(value, "exit_code") if self.data_parser == 39 else value
        if raw is None:
            return None
        status = int(raw)
        return (status >> 8) & 0xFF, status & 0x7F

    def node_state(self, node: Mapping[str, Any]) -> tuple[str, frozenset[str]]:
        """A node's base state in sinfo's lower case, and its flags (DRAIN, NOT_RESPONDING...)."""
        if self.data_parser == OLDEST:
            flags = _strings(node["state_flags"], "state_flags")
            return _text(node["state"], "state").lower(), frozenset(flags)
        states = _strings(node["state"], "state")
        base = next((s for s in states if s in _NODE_BASES), "UNKNOWN")
        return base.lower(), frozenset(s for s in states if s not in _NODE_BASES)


def dialect(document: Mapping[str, Any]) -> Dialect:
    """The family `document` is in, from its `meta`."""
    meta = document.get("meta")
    if not isinstance(meta, Mapping):
        raise ShapeError("no meta: not a document of Slurm's --json")
    plugin = meta.get("plugin") or meta.get("plugins") or {}
    slurm = meta.get("slurm") or meta.get("Slurm") or {}
    release = str(slurm.get("release") or "?")
    named = str(plugin.get("data_parser") or plugin.get("type") or "")
    found = _PARSER.search(named)
    if found is None:
        raise ShapeError(f"Slurm {release}: meta names no data_parser ({named or 'none'})")
    number = int(found.group(1))
    if not OLDEST <= number <= NEWEST:
        raise ShapeError(
            f"Slurm {release} prints data_parser v0.0.{number}, which this observer does not read "
            f"(it reads v0.0.{OLDEST} to v0.0.{NEWEST}: Slurm 22.05 to 25.05)"
        )
    return Dialect(number, release)


def document(output: str, command: str) -> dict[str, Any]:
    """The JSON object a command printed, after any warning lines it printed before it (a
    plugin's or a configuration's complaint on standard output)."""
    start = re.search(r"^\{", output, re.MULTILINE)
    if start is None:
        raise ShapeError(f"{command} printed no JSON object ({_first_line(output)})")
    data: dict[str, Any]
    try:
        data, _ = json.JSONDecoder().raw_decode(output, start.start())
    except json.JSONDecodeError as exc:
        raise ShapeError(
            f"{command} printed JSON cut short or broken after {len(output)} bytes ({exc.msg} at "
            f"line {exc.lineno})"
        ) from None
    return data


def _number(value: Any, field: str) -> int | None:
    """A `{set, infinite, number}` value: its number when set, else None."""
    if not isinstance(value, Mapping) or "set" not in value:
        raise ShapeError(f"{field}: {value!r} is not a {{set, infinite, number}} value")
    if not value["set"] or value.get("infinite"):
        return None
    return int(value["number"])


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise ShapeError(f"{field}: {value!r} is not a string")
    return value


def _strings(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ShapeError(f"{field}: {value!r} is not a list of names")
    return value


def _first_line(output: str) -> str:
    line = next((line.strip() for line in output.splitlines() if line.strip()), "")
    return repr(line[:120]) if line else "nothing"
