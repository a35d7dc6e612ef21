"""The simulated GPU cluster used by `observer demo` and the tests: a scheduler with tenants,
weights, quotas and a policy, driven by the injected clock, with switches for the faults the
detectors must find."""
