"""Tests of the NVML boundary: the real pynvml adapter over the stand-in libnvidia-ml.so.1."""
