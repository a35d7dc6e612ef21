import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def fake_cuda_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the stand-in libcuda.so.1, built from deploy/local/fake_cuda/."""
    out = tmp_path_factory.mktemp("fake-cuda")
    subprocess.run(
        ["bash", str(REPO / "deploy" / "local" / "build-fake-cuda.sh"), str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out
