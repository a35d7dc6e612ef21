"""The controller's production tasks stepped on a clock (stepped.py), and the soaks built on
them over the simulated cluster (soak.py, nights.py) for the demo, benchmarks and tests."""
