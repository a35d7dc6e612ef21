"""Pure reading of `sacctmgr list transactions` into the limit changes people made.

sacctmgr keeps slurmdbd's SQL: a limit change's Info is the update it ran (`grp_tres = if
(id_assoc=3, '1001=4', grp_tres)`, TRES by id, associations by id_assoc, a QOS list as
`,1,2,`), so the ids are read back into names from the listings of associations, QOS and TRES.
A transaction not read as a limit change is passed over rather than an error, since an error
would hold up the job listing read with it, again at every retry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from observer.backends.base import QuotaChange
from observer.errors import BackendError

# slurmdbd's columns of an association's or QOS's limits, in sacctmgr's words
_LIMITS = {
    "grp_jobs": "GrpJobs",
    "grp_jobs_accrue": "GrpJobsAccrue",
    "grp_submit_jobs": "GrpSubmitJobs",
    "grp_tres": "GrpTRES",
    "grp_tres_mins": "GrpTRESMins",
    "grp_tres_run_mins": "GrpTRESRunMins",
    "grp_wall": "GrpWall",
    "max_jobs": "MaxJobs",
    "max_jobs_accrue": "MaxJobsAccrue",
    "max_submit_jobs": "MaxSubmitJobs",
    "max_tres_pj": "MaxTRES",
    "max_tres_pn": "MaxTRESPerNode",
    "max_tres_mins_pj": "MaxTRESMins",
    "max_tres_run_mins": "MaxTRESRunMins",
    "max_wall_pj": "MaxWall",
    "max_jobs_pa": "MaxJobsPerAccount",
    "max_jobs_per_user": "MaxJobsPerUser",
    "max_jobs_accrue_pa": "MaxJobsAccruePerAccount",
    "max_jobs_accrue_pu": "MaxJobsAccruePerUser",
    "max_submit_jobs_pa": "MaxSubmitJobsPerAccount",
    "max_submit_jobs_per_user": "MaxSubmitJobsPerUser",
    "max_tres_pa": "MaxTRESPerAccount",
    "max_tres_pu": "MaxTRESPerUser",
    "max_tres_run_mins_pa": "MaxTRESRunMinsPerAccount",
    "max_tres_run_mins_pu": "MaxTRESRunMinsPerUser",
    "min_tres_pj": "MinTRESPerJob",
    "max_wall_duration_per_job": "MaxWall",
    "qos": "QOS",
}
_LIMIT_ACTIONS = ("Modify Associations", "Modify QOS")
# a transaction's Where: `(id_assoc=4 || id_assoc=3)`, `(name='high' || name='low')`
_WHERE = re.compile(r"\((?:id_assoc=\d+|name='[^']*')(?: \|\| (?:id_assoc=\d+|name='[^']*'))*\)")
_WHERE_ITEM = re.compile(r"(?:id_assoc=(\d+)|name='([^']*)')")
# a value set for one of them: `if (id_assoc=3, '1001=4', grp_tres)`, `if (id=2, ...)`
_ONE = re.compile(r"if \((?:id_assoc|id)=(\d+), '([^']*)', \w+\)$")
_QOS_ADDED = re.compile(r", ',(\d+),'\)")
_QOS_NAMED = re.compile(r"',(\d+),'")


def quota_changes(transactions: str, associations: str, qos: str, tres: str) -> list[QuotaChange]:
    """The limit changes among `sacctmgr -P -n list transactions
    format=Time,Action,Actor,Where,Info` (SLURM_TIME_FORMAT=%s), one per association or QOS
    changed, in order; ids named from `list associations withdeleted format=ID,Account,User`,
    `list qos withdeleted format=ID,Name` and `list tres withdeleted format=ID,Type,Name`.
    An association is a tenant (its account) and, for one user's limits, that user."""
    accounts = {row[0]: row[1:3] for row in _rows(associations, 3)}
    qos_names = {row[0]: row[1] for row in _rows(qos, 2)}
    tres_names = {row[0]: "/".join(p for p in row[1:3] if p) for row in _rows(tres, 3)}

    def subject(action: str, key: str) -> dict[str, str]:
        if action == "Modify QOS":
            return {"qos": key}
        if key not in accounts:
            return {"association": key}
        account, user = accounts[key]
        return {"tenant": account, "user": user} if user else {"tenant": account}

    found = []
    for line in transactions.splitlines():
        at, action, actor, rest = [*line.split("|", 3), "", "", ""][:4]
        where = _WHERE.match(rest)
        if action not in _LIMIT_ACTIONS or where is None:
            continue
        keys = [assoc or name for assoc, name in _WHERE_ITEM.findall(where.group())]
        words: dict[str, list[str]] = {key: [] for key in keys}
        for column, value in _assignments(rest[where.end() + 1 :]):
            if column not in _LIMITS:
                continue
            one = _ONE.match(value)
            key = one.group(1) if one else None
            if key is not None and action == "Modify QOS":
                key = qos_names.get(key, key)
            text = _limit_words(column, one.group(2) if one else value, qos_names, tres_names)
            if text:  # a QOS list only tidied up
                for k in keys if key is None else [key]:
                    words.setdefault(k, []).append(text)
        try:
            when = datetime.fromtimestamp(int(at), UTC)
        except ValueError as exc:
            raise BackendError(f"unexpected sacctmgr transaction time {at!r}") from exc
        found += [
            QuotaChange(when, actor, subject(action, key), " ".join(texts))
            for key, texts in words.items()
            if texts
        ]
    return found


def _rows(output: str, width: int) -> list[list[str]]:
    return [(line.split("|") + [""] * width)[:width] for line in output.splitlines() if line]


def _assignments(info: str) -> list[tuple[str, str]]:
    """`a=1, b = if (x, 'y, z', b)` as [("a", "1"), ("b", "if (x, 'y, z', b)")]."""
    items, depth, quoted, start = [], 0, False, 0
    for i, char in enumerate(info + ","):
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0 and char == ",":
            items.append(info[start:i])
            start = i + 1
    pairs = [item.split("=", 1) for item in items if "=" in item]
    return [(column.strip(), value.strip()) for column, value in pairs]


def _limit_words(
    column: str, value: str, qos_names: Mapping[str, str], tres_names: Mapping[str, str]
) -> str:
    """One column's new value as sacctmgr is told it; -1 for no limit, "" for no change."""
    name = _LIMITS[column]
    if column == "qos" and value.startswith("if ("):
        added = set(_QOS_ADDED.findall(value))
        removed = set(_QOS_NAMED.findall(value)) - added
        return " ".join(
            f"{name}{sign}={','.join(qos_names.get(q, q) for q in sorted(ids, key=int))}"
            for sign, ids in (("+", added), ("-", removed))
            if ids
        )
    value = value.strip("'")
    if value in ("", "NULL"):
        return f"{name}=-1"
    if column == "qos":
        ids = [q for q in value.split(",") if q]
        return f"{name}={','.join(qos_names.get(q, q) for q in ids)}"
    if "tres" in column:
        pairs = [pair.split("=", 1) for pair in value.split(",")]
        return f"{name}={','.join(f'{tres_names.get(k, k)}={v}' for k, v in pairs)}"
    return f"{name}={value}"
