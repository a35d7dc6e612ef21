"""The NVML boundary: a Protocol returning domain types, the real pynvml adapter (nvml.py, the
only module importing pynvml) and a replay of recorded traces (replay.py)."""
