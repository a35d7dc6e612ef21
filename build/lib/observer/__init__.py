"""GPU Soak Observer: runs the pre-production soak of a shared multi-tenant GPU platform.

The package is laid out as the architecture (docs/ARCHITECTURE.md): composition roots (cli,
demo, simulation, agent, controller) over the reports and one boundary per external system,
over the pure detectors, settings, probes and domain types; pyproject.toml's import-linter
contracts hold it to that.
"""

__version__ = "0.1.0"
