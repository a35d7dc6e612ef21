"""`observer demo`: the whole product on a simulated cluster, faults injected at known times."""
