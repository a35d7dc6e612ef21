"""The scheduler boundary: one Protocol (base.py) and its implementations: Slurm (slurm.py),
Kubernetes (kubernetes.py, the only kubernetes import) and the simulated cluster."""
