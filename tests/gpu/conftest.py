from __future__ import annotations

from pathlib import Path

import pytest

from tests.gpu import fake_nvml


@pytest.fixture(scope="session")
def fake_nvml_library() -> Path:
    return fake_nvml.require_library()


@pytest.fixture
def fake_nvml_state(
    fake_nvml_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> fake_nvml.FakeNvml:
    return fake_nvml.install(fake_nvml_library, tmp_path, monkeypatch)
