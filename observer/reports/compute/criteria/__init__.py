"""The go-live criteria, each judged over the whole soak: pass / fail / not observed with the
recorded evidence behind it, a failure classed (must fix, limited launch, later optimisation)
with its reason. Pure.

Classes follow what a failure costs the platform's users: lost capacity, lost evidence or a
broken promise (quota, isolation) must be fixed before anyone relies on the platform; waits
or monitoring nobody can explain limit the launch to tenants who accept them; the rest can
follow the launch. A criterion the soak never exercised, or whose layers it did not observe
(see layers), is not observed, never a pass.

`judge` lists every criterion in order; `result` is what a judgement is; the criteria are
grouped by what they promise: `scheduling`, `monitoring`, `tenancy`, `release`, `audit`,
`service`."""
