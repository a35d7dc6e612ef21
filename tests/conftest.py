from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
H200_TRACE = REPO / "tests" / "fixtures" / "nvml" / "h200-trace"


@pytest.fixture
def h200_trace() -> Path:
    return H200_TRACE
