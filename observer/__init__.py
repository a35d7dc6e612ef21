"""GPU Soak Observer: runs the pre-production soak of a shared multi-tenant GPU platform.

The package is laid out as the architecture: boundaries (gpu/, ownership/, storage/), pure
detectors, and composition roots (agent/, cli.py).
"""

__version__ = "0.1.0"
