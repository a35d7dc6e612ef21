"""Who owns a GPU process: cgroup and environment parsing, the host /proc reader, and the
directories that say whether an owner (pod, Slurm job) is still running."""
