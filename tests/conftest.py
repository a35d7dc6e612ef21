import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from observer.cli import GC_FIRST_GENERATION_THRESHOLD
from tests import components
from tests.backends.slurm_harness import SlurmCluster, SlurmHarness, require, slurm_harness

# The tests play days in process as the CLI does: with its collector's threshold.
gc.set_threshold(GC_FIRST_GENERATION_THRESHOLD)

REPO = Path(__file__).resolve().parent.parent
H200_TRACE = REPO / "tests" / "fixtures" / "nvml" / "h200-trace"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real: needs a real component (make test, not make check)")
    for name, needs in (components.REAL | components.STAND_INS).items():
        config.addinivalue_line("markers", f"{name}: {needs}")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    components.mark(items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    components.running(item)


def pytest_runtest_teardown() -> None:
    components.running(None)


@pytest.fixture
def h200_trace() -> Path:
    return H200_TRACE


@pytest.fixture(params=components.params("slurm", "slurm24"))
def slurm_cluster(request: pytest.FixtureRequest) -> SlurmCluster:
    """Each local Slurm release in turn, marked for it: 22.05 (deploy/local/infra/slurm-up.sh)
    and 24.11 (slurm24-up.sh)."""
    return require(request.param)


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster) -> Iterator[SlurmHarness]:
    """The cluster of `slurm_cluster`, emptied of jobs, held by this test alone."""
    with slurm_harness(slurm_cluster) as harness:
        yield harness
