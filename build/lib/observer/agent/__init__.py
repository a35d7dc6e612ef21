"""The node agent's composition root: sampler (two-tier NVML reads), attribution of GPU
processes to owners, the node-local detector, and the HTTP surface for Prometheus and the
controller."""
