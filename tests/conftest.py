import gc
from pathlib import Path

import pytest

from observer.cli import GC_FIRST_GENERATION_THRESHOLD

# The tests play days in process as the CLI does: with its collector's threshold.
gc.set_threshold(GC_FIRST_GENERATION_THRESHOLD)

REPO = Path(__file__).resolve().parent.parent
H200_TRACE = REPO / "tests" / "fixtures" / "nvml" / "h200-trace"


@pytest.fixture
def h200_trace() -> Path:
    return H200_TRACE
