import gc
from pathlib import Path

import pytest

from observer.cli import GC_FIRST_GENERATION_THRESHOLD
from tests import components

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
