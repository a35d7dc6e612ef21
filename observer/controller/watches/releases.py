"""Our own probes' GPUs not back to idle after they end: each (run, node) that ended is judged
until clean, against the agents' snapshots and what the scheduler last listed of its job."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial

from observer.controller.watches.base import Checked, Look
from observer.detectors import probe_release
from observer.detectors.conditions import ConditionTracker
from observer.domain import Finding, ProbeRun, SchedulerSnapshot
from observer.logging_setup import get_logger
from observer.settings.detectors import DetectorSettings
from observer.storage.store import Store

_log = get_logger("observer.controller.watches.releases")

# A probe's node that no agent has reported on this long after the run's end is not judged
# (the agent's own unreachable condition says why); the check is let go to stay bounded.
RELEASE_CHECK_HORIZON = timedelta(hours=1)


class ProbeReleases:
    def __init__(self, store: Store, rules: DetectorSettings) -> None:
        self._store = store
        self._rules = rules
        self._tracker = ConditionTracker()
        self._releases: dict[tuple[str, str], ProbeRun] = {}  # by (run id, node)
        # Our jobs' owner ids as the scheduler last listed them, and when, by job id: a run is
        # judged once it ended, when the scheduler may no longer list its job.
        self._owners: dict[str, tuple[tuple[str, ...], datetime]] = {}
        self._latest: SchedulerSnapshot | None = None  # the last snapshot whose owners are kept

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        """The release checks of the open probe_unreleased findings are queued again."""
        mine = [f for f in left_open if f.detector == probe_release.DETECTOR]
        self._tracker.resume(mine)
        for finding in mine:
            run = self._store.run(finding.subject["run_id"])
            if run is not None:
                self._releases[run.run_id, finding.subject["node"]] = run

    def check(self, look: Look) -> Checked:
        """A (run, node) is forgotten once judged clean (a finding on it closes then too), or
        unjudged after RELEASE_CHECK_HORIZON without an open finding: the work per check is
        the runs that ended within the horizon, plus open findings."""
        if look.latest is not None and look.latest is not self._latest:
            self._sampled(look.latest)
        for run in look.changed:
            if run.finished_at is not None and run.job_id is not None:
                self._releases.update(((run.run_id, node), run) for node in run.node_names)
        if not self._releases:
            return Checked()
        now = look.now
        rules = self._rules.probe_release
        check = probe_release.evaluate(
            [(run, node) for (_, node), run in self._releases.items()],
            look.scheduler,
            look.nodes,
            now,
            owners={job: ids for job, (ids, _) in self._owners.items()},
            grace_seconds=rules.grace_seconds,
            snapshot_max_age_seconds=rules.snapshot_max_age_seconds,
            memory_tolerance_bytes=self._rules.node.memory_tolerance_bytes,
        )
        changed = self._tracker.update(check.symptoms, now, partial(probe_release.covers, check))
        still_open = {
            (f.subject["run_id"], f.subject["node"]) for f in self._tracker.open_findings()
        }
        for key, run in list(self._releases.items()):
            ended = run.finished_at or now
            if key in check.clean:
                del self._releases[key]
            elif ended < now - RELEASE_CHECK_HORIZON and key not in still_open:
                _log.info(
                    "probe release not checked: no agent snapshot", run_id=key[0], node=key[1]
                )
                del self._releases[key]
        return Checked(changed)

    def _sampled(self, snapshot: SchedulerSnapshot) -> None:
        """Keep the owners of our jobs a new snapshot lists, for as long as a run of theirs is
        judged or they are within the horizon."""
        self._latest = snapshot
        for job in snapshot.jobs:
            if job.run_id is not None and job.owner_ids:
                self._owners[job.job_id] = (job.owner_ids, snapshot.at)
        judging = {run.job_id for run in self._releases.values()}
        horizon = snapshot.at - RELEASE_CHECK_HORIZON
        self._owners = {
            job: seen for job, seen in self._owners.items() if seen[1] >= horizon or job in judging
        }
