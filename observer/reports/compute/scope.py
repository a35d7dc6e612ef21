"""The launch scope: the tenants and pools on which every must criterion passed and no
must-fix failure touched, where a launch may begin (one team or one pool first); and for each
tenant or pool left out, what must pass to widen the scope to it, with the re-verification
steps for those criteria (see plan). Pure.

A criterion concerns the tenants and pools its failure's findings and runs named (the pools of
their nodes), or, for a pass its layers narrowed, the pools they could not see. A must
criterion that failed or went unobserved without naming a tenant or a pool concerns every
one: the scope is then empty. A must-fix failure excludes what it names whatever its layer; a
failure classed a later optimisation excludes nothing."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from observer.reports.compute.criteria.result import (
    CriterionResult,
    FailureClass,
    Status,
    Subjects,
)
from observer.reports.compute.notes import Note


@dataclass(frozen=True, slots=True)
class Widen:
    """A tenant or pool left out of the scope (`part`: "tenant" or "pool"), the criteria that
    concern it, and their re-verification steps."""

    part: str
    name: str
    criteria: tuple[str, ...]
    reverify: tuple[Note, ...]


@dataclass(frozen=True, slots=True)
class LaunchScope:
    tenants: tuple[str, ...]
    pools: tuple[str, ...]
    widen: tuple[Widen, ...]

    @property
    def empty(self) -> bool:
        return not (self.tenants and self.pools)


def launch_scope(
    criteria: Sequence[CriterionResult],
    must: Collection[str],
    tenants: Iterable[str],
    pools: Iterable[str],
    reverification: Sequence[Note],
) -> LaunchScope:
    """`tenants` and `pools`: the fleet's, those the soak exercised; `reverification`: the
    plan's steps, each naming its criterion."""
    blocking = [(c.criterion, where) for c in criteria if (where := _concerns(c, must)) is not None]
    steps = {
        str(n.params.get("criterion")): n
        for n in reverification
        if isinstance(n.params.get("criterion"), str)
    }

    def left_out(part: str, names: Iterable[str]) -> tuple[list[str], list[Widen]]:
        kept, widen = [], []
        for name in sorted(set(names)):
            named = tuple(
                criterion
                for criterion, where in blocking
                if not (where.tenants or where.pools) or name in getattr(where, f"{part}s")
            )
            if not named:
                kept.append(name)
                continue
            reverify = tuple(steps[c] for c in named if c in steps)
            widen.append(Widen(part, name, named, reverify))
        return kept, widen

    kept_tenants, widen_tenants = left_out("tenant", tenants)
    kept_pools, widen_pools = left_out("pool", pools)
    return LaunchScope(tuple(kept_tenants), tuple(kept_pools), (*widen_tenants, *widen_pools))


def _concerns(c: CriterionResult, must: Collection[str]) -> Subjects | None:
    """Whom and where `c` keeps out of the scope (empty Subjects: everyone), or None when it
    keeps nobody out."""
    if c.status is Status.FAIL:
        # A later optimisation never blocks a launch, whatever its criterion's layer.
        later = c.failure_class is FailureClass.LATER_OPTIMISATION
        blocks = c.criterion in must or c.failure_class is FailureClass.MUST_FIX
        return c.subjects if blocks and not later else None
    if c.criterion not in must:
        return None
    if c.status is Status.NOT_OBSERVED:
        return Subjects()
    # A pass its node layers narrowed: the pools of the nodes they could not see. Nodes in
    # no pool leave no pool to name, and the pass stands for the rest.
    return Subjects(pools=c.not_observed.pools) if c.not_observed.pools else None
