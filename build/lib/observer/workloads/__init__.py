"""The probes' own programs, run as `observer probe <workload>` inside a probe job (the
observer's own image on Kubernetes, the node's installed observer on Slurm): gpu-burn, log
canaries, the inference stand-in and the failures the catalogue expects."""
