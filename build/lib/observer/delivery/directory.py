"""The directory that is every report's home, its files each replaced atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from observer.clock import Clock
from observer.delivery.base import DeliveryResult, RenderedReport


class DirectoryChannel:
    """The report's home: <directory>/<kind>-<label>.{md,html,json}, each written atomically
    (a reader sees the old file or the new one, never half of one)."""

    def __init__(self, directory: Path, clock: Clock, name: str = "directory") -> None:
        self.name = name
        self._directory = directory
        self._clock = clock

    def deliver(self, report: RenderedReport) -> DeliveryResult:
        stem = report.file_stem
        files = {".json": report.json_text, ".html": report.html, ".md": report.markdown}
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
            for suffix, text in files.items():
                write_atomically(self._directory / f"{stem}{suffix}", text)
        except OSError as exc:
            return DeliveryResult(
                self.name,
                False,
                1,
                f"cannot write {stem} in {self._directory}: {exc.strerror or exc}",
                None,
                "full",
            )
        return DeliveryResult(
            self.name,
            True,
            1,
            f"wrote {stem}.md, .html and .json in {self._directory}",
            self._clock.now(),
            "full",
        )


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` whole: a reader sees the old file or the new one, never half."""
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file private; a report is for whoever serves the directory.
        temporary.chmod(0o644)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
