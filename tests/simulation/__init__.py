"""The simulated cluster's own behaviour, beyond the scheduler contract suite."""
