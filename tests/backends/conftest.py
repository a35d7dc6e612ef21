from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.slurm_harness import SlurmHarness, require_slurm, slurm_harness


@pytest.fixture(scope="session")
def slurm_conf() -> Path:
    """Starts the local Slurm once per session (deploy/local/infra/slurm-up.sh)."""
    return require_slurm()


@pytest.fixture
def slurm(slurm_conf: Path) -> Iterator[SlurmHarness]:
    with slurm_harness() as harness:
        yield harness
