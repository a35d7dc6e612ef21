"""Tests of the scheduler backends against real schedulers (Slurm 22.05 started locally)."""
