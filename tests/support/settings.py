"""Settings as the tests build them: a controller over one window that is always open, or an
agent replaying a trace on a loopback port, the rest given by the test; and the controller
settings that put it on a Slurm harness's cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from observer.settings import Settings
from observer.settings.controller import SlurmSettings

ALWAYS = {"name": "always", "days": "*", "start": "00:00", "end": "00:00"}


def controller_settings(reports: dict[str, Any] | None = None, **controller: Any) -> Settings:
    """Settings of a controller open in the one window ALWAYS unless `controller` gives its
    own windows, with `controller` and `reports` as given."""
    return Settings.model_validate(
        {"controller": {"windows": [ALWAYS], **controller}, "reports": reports or {}}
    )


def on_slurm(slurm: SlurmSettings) -> dict[str, Any]:
    """The controller settings of the Slurm backend on the cluster of a harness's `slurm`."""
    return {
        "backend": "slurm",
        "slurm": slurm.model_dump(
            mode="json", include={"slurm_conf", "commands_dir", "run_as_command", "output_dir"}
        ),
    }


def replay_agent_settings(trace: Path, **agent: Any) -> Settings:
    """Settings of an agent replaying `trace` on a free loopback port, with `agent` over them."""
    return Settings.model_validate(
        {
            "agent": {
                "gpu_backend": "replay",
                "replay_trace_dir": trace,
                "listen_host": "127.0.0.1",
                "listen_port": 0,
                **agent,
            }
        }
    )
