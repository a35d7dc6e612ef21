"""The scheduler boundary: one Protocol (base.py) and its implementations: Slurm (slurm/),
Kubernetes (kubernetes/, the only kubernetes import) and the simulated cluster
(simulated.py) that `observer demo` and the tests run on."""
