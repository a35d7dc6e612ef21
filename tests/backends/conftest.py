from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.slurm24_harness import Slurm24, slurm24_cluster
from tests.backends.slurm_harness import SlurmHarness, require_slurm, slurm_harness


@pytest.fixture(scope="session")
def slurm_conf() -> Path:
    """Starts the local Slurm once per session (deploy/local/infra/slurm-up.sh)."""
    return require_slurm()


@pytest.fixture
def slurm(slurm_conf: Path) -> Iterator[SlurmHarness]:
    with slurm_harness() as harness:
        yield harness


@pytest.fixture
def slurm24() -> Iterator[Slurm24]:
    """The local Slurm 24.11 (deploy/local/infra/slurm24-up.sh), one test at a time."""
    with slurm24_cluster() as cluster:
        yield cluster
