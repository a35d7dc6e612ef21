"""The jobs and nodes Slurm 22.05.8 printed (tests/backends/slurm_output/), rewritten field by
field into the shapes each later release prints, as SchedMD's data_parser declares them in
`src/plugins/data_parser/v0.0.<n>/parsers.c` at the release's tag:

- v0.0.39, slurm-23-02-7-1: `meta.plugins.data_parser`, `meta.Slurm.release`; `exit_code`
  UINT32_NO_VAL (`{set, infinite, number}` of the raw wait status); a node's `state` the
  NODE_STATES flag array; nodes from `scontrol show nodes --json`.
- v0.0.40, slurm-23-11-1-1: `meta.plugin.data_parser`, `meta.slurm.release` (version parts as
  strings); `job_state` the JOB_STATE flag array; times TIMESTAMP_NO_VAL; `exit_code`
  PROCESS_EXIT_CODE (DUMP_FUNC: `{status: [SUCCESS|ERROR|SIGNALED|PENDING],
  return_code: UINT32_NO_VAL, signal: {id: UINT16_NO_VAL, name}}`).
- v0.0.41 (slurm-24-05-1-1), v0.0.42 (slurm-24-11-0-1), v0.0.43 (slurm-25-05-0-1):
  `job_resources.nodes.allocation[]` (JOB_RES_NODE: `index`, `name`, ...) in place of
  `job_resources.allocated_nodes[]`.

Fixtures recorded from a real release of these families are read beside them where the tests
have them (tests/fixtures/slurm/)."""

from __future__ import annotations

import copy
import signal
from typing import Any

RELEASES = {
    38: "22.05.8",
    39: "23.02.7",
    40: "23.11.1",
    41: "24.05.1",
    42: "24.11.0",
    43: "25.05.0",
}
_TIMES = ("submit_time", "start_time", "end_time", "eligible_time")


def as_printed_by(document: dict[str, Any], parser: int) -> dict[str, Any]:
    """A 22.05 `squeue --json` or `sinfo --json` answer in data_parser v0.0.`parser`'s shapes
    (`sinfo`'s nodes as `scontrol show nodes --json` lists them from 23.02)."""
    out = copy.deepcopy(document)
    if parser == 38:
        return out
    out["meta"] = _meta(parser)
    for job in out.get("jobs", []):
        _job(job, parser)
    for node in out.get("nodes", []):
        node["state"] = [node["state"].upper(), *node.pop("state_flags")]
    return out


def no_val(number: int | None) -> dict[str, Any]:
    return {"set": number is not None, "infinite": False, "number": number or 0}


def _meta(parser: int) -> dict[str, Any]:
    release = RELEASES[parser]
    major, minor, micro = release.split(".")
    if parser == 39:
        version = {"major": int(major), "micro": int(micro), "minor": int(minor)}
        return {
            "plugins": {
                "data_parser": "data_parser/v0.0.39",
                "accounting_storage": "accounting_storage/slurmdbd",
            },
            "command": ["squeue", "--json"],
            "Slurm": {"version": version, "release": release},
        }
    return {
        "plugin": {
            "type": "",
            "name": "",
            "data_parser": f"data_parser/v0.0.{parser}",
            "accounting_storage": "accounting_storage/slurmdbd",
        },
        "client": {"source": "/dev/pts/0", "user": "root", "group": "root"},
        "command": ["squeue", "--json"],
        "slurm": {
            "version": {"major": major, "micro": micro, "minor": minor},
            "release": release,
            "cluster": "observer",
        },
    }


def _job(job: dict[str, Any], parser: int) -> None:
    status = job["exit_code"]
    job["exit_code"] = no_val(status) if parser == 39 else _process_exit_code(status)
    if parser >= 40:
        job["job_state"] = [job["job_state"]]
        for field in _TIMES:
            job[field] = no_val(job[field] or None)
    resources = job.get("job_resources")
    if parser >= 41 and resources:
        allocated = resources.pop("allocated_nodes")
        resources["nodes"] = {
            "count": len(allocated),
            "select_type": ["AVAILABLE"],
            "list": resources["nodes"],
            "whole": False,
            "allocation": [
                {"index": i, "name": n["nodename"], "cpus": {"count": 1, "used": 0}}
                for i, n in enumerate(allocated)
            ],
        }


def _process_exit_code(status: int | None) -> dict[str, Any]:
    """PROCESS_EXIT_CODE of a raw wait status, as DUMP_FUNC(PROCESS_EXIT_CODE) writes it."""
    if status is None:
        return {"status": ["PENDING"], "return_code": no_val(None), "signal": _signal(None)}
    code, number = (status >> 8) & 0xFF, status & 0x7F
    if number:
        return {"status": ["SIGNALED"], "return_code": no_val(None), "signal": _signal(number)}
    word = "ERROR" if code else "SUCCESS"
    return {"status": [word], "return_code": no_val(code), "signal": _signal(None)}


def _signal(number: int | None) -> dict[str, Any]:
    name = signal.Signals(number).name.removeprefix("SIG") if number else ""
    return {"id": no_val(number), "name": name}
