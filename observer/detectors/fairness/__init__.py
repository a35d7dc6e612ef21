"""Persistent queue unfairness, from stored probe runs and scheduler state.

Per occurrence of a window (Monday's night, Tuesday's night...) and per tenant:
- the waits of the fairness probes (identical one-GPU jobs every tenant submits at the same
  moment), each compared with the other tenants' probes of the same launch batch;
- the GPUs the tenant received against its entitlement, over the queue samples in which its
  jobs had been pending longer than the wait rule (a job submitted just before a sample has
  not yet been through a scheduling cycle: its wait says nothing about the scheduler). The
  entitlement is weighted max-min fair given every tenant's demand (running + pending GPUs)
  and the GPUs in service at that sample: nobody is entitled to more than it asks, and what
  one tenant does not ask for is shared by the others in proportion to their weights. Where
  the tenant's queue guarantees it GPUs (a Kueue ClusterQueue's nominal quota, a Volcano
  Queue's deserved GPUs) the entitlement is that guarantee, capped by its demand, plus its
  weighted share of what the guarantees leave, up to its borrowing limit;
- Jain's fairness index over the tenants' received/entitled ratios;
- for a tenant held short: the stretch of samples in which it was (start, end, GPUs short)
  and who held the GPUs then (the tenants beyond their entitlement, by priority and user).

A tenant is *disadvantaged* in an occurrence when its probes waited longer than the others'
in most launch batches, or when it received less than its entitlement (within a tolerance)
while its jobs were held pending, unless it *over-asked*: it received its entitlement and still
wanted more, so its waits are the price of asking beyond its share, not the scheduler's doing.

The rule, persistent_unfairness (a condition, opened by the tracker): a tenant disadvantaged in
at least K of the last M completed occurrences of a window; one bad night is not a finding, a
pattern across nights is.

The parts, each over the next: `persistence` (the rule), `evidence` (what its symptom says),
`assessment` (one occurrence, per tenant), `entitlement` (the shares and the capacity).
"""

from observer.detectors.fairness.assessment import (
    NOMINAL_QUOTA,
    WEIGHTED_SHARE,
    Holder,
    QueueSample,
    Stretch,
    TenantAssessment,
    WindowAssessment,
    assess_window,
)
from observer.detectors.fairness.entitlement import (
    Capacity,
    Guarantee,
    NodeChange,
    capacity_over,
    entitlements,
    jain_index,
    schedulable_gpus,
)
from observer.detectors.fairness.persistence import PERSISTENT_UNFAIRNESS, covers, evaluate

__all__ = [
    "NOMINAL_QUOTA",
    "PERSISTENT_UNFAIRNESS",
    "WEIGHTED_SHARE",
    "Capacity",
    "Guarantee",
    "Holder",
    "NodeChange",
    "QueueSample",
    "Stretch",
    "TenantAssessment",
    "WindowAssessment",
    "assess_window",
    "capacity_over",
    "covers",
    "entitlements",
    "evaluate",
    "jain_index",
    "schedulable_gpus",
]
