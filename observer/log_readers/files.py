"""Plain files at the end of a pipeline (a collector's output, a node's log directory), with
their rotations: a glob such as /var/log/collected.log* reads collected.log, collected.log.1,
collected.log.2.gz... oldest first."""

from __future__ import annotations

import glob
import gzip
from datetime import datetime
from pathlib import Path

from observer.errors import BackendError
from observer.log_readers.base import DeliveredLine, run_token, split_timestamp


class FileLogReader:
    def __init__(self, pattern: str, *, leading_timestamp: bool = False) -> None:
        """`pattern`: a glob matching the file and its rotations. `leading_timestamp`: lines
        start with the collector's RFC 3339 receive time, taken as `delivered_at` (a file's
        mtime says nothing about one line, so without it delivery time is unknown)."""
        self._pattern = pattern
        self._leading_timestamp = leading_timestamp

    def read(self, run_id: str, since: datetime, until: datetime) -> list[DeliveredLine]:
        token = run_token(run_id)
        lines: list[DeliveredLine] = []
        try:
            for path in self._files(since):
                for raw in _text_lines(path):
                    if token not in raw:
                        continue
                    delivered_at, text = (
                        split_timestamp(raw) if self._leading_timestamp else (None, raw)
                    )
                    lines.append(DeliveredLine(text, path.name, delivered_at=delivered_at))
        except OSError as exc:  # includes a corrupt .gz (gzip.BadGzipFile)
            raise BackendError(f"cannot read log files {self._pattern}: {exc}") from exc
        return lines

    def _files(self, since: datetime) -> list[Path]:
        """Matching files oldest first by last write; a file last written before `since` holds
        nothing of the run."""
        since_ns = since.timestamp() * 1e9
        stamped = []
        for name in glob.glob(self._pattern):
            path = Path(name)
            if not path.is_file():
                continue
            mtime_ns = path.stat().st_mtime_ns
            if mtime_ns >= since_ns:
                stamped.append((mtime_ns, _rotation_number(path), path))
        # equal mtimes (a rotation and the next write within one tick): higher number is older
        stamped.sort(key=lambda s: (s[0], -s[1], s[2].name))
        return [path for _, _, path in stamped]


def _text_lines(path: Path) -> list[str]:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def _rotation_number(path: Path) -> int:
    """N of name.N or name.N.gz (logrotate's numbering); 0 for the live file."""
    stem = path.name.removesuffix(".gz")
    _, _, last = stem.rpartition(".")
    return int(last) if last.isdigit() else 0
