"""Detection quality with confounders: the scenario files under bench/scenarios/ (or those
named) played as `observer demo --scenario` plays them - the real controller, agents,
detectors and reports over the simulated cluster - each scored against its own ground truth,
and the scores summed per detector.

Prints per scenario a line (passed, faults not injected, missed, unexplained findings), then
one JSON object: per detector the expected findings and those met (recall), the findings and
those a fault explains (precision), the median delay from fault to first finding; every
unexplained finding with the confounders that were on when it opened; and the wall time.

    .venv/bin/python bench/scenarios.py [FILE ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from observer.demo.run import run_demo, score_json
from observer.demo.scenario import load_scenario
from observer.logging_setup import configure_logging

HERE = Path(__file__).with_name("scenarios")


def _totals(scores: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for result in scores:
        for detector, r in result["detectors"].items():
            row = rows.setdefault(
                detector, {"expected": 0, "met": 0, "findings": 0, "explained": 0, "delays": []}
            )
            for key in ("expected", "met", "findings", "explained"):
                row[key] += r[key]
        for fault in result["faults"]:
            first: dict[str, float] = {}
            for f in fault["findings"]:
                first.setdefault(f["detector"], f["delay_seconds"])
            for detector, delay in first.items():
                rows[detector]["delays"].append(delay)
    return {
        detector: {
            "expected": r["expected"],
            "met": r["met"],
            "recall": round(r["met"] / r["expected"], 3) if r["expected"] else None,
            "findings": r["findings"],
            "explained": r["explained"],
            "precision": round(r["explained"] / r["findings"], 3) if r["findings"] else None,
            "median_delay_seconds": round(statistics.median(r["delays"]), 1)
            if r["delays"]
            else None,
        }
        for detector, r in sorted(rows.items())
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="scenario files (default: all)")
    parser.add_argument("--out", type=Path, help="keep each run's output under this directory")
    args = parser.parse_args()
    files = args.files or sorted(HERE.glob("*.yaml"))
    configure_logging("warning")
    scores = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.out or Path(tmp)
        for path in files:
            out = base / path.stem
            scenario = load_scenario(path, out, "en")
            t0 = time.monotonic()
            result = run_demo(scenario, out, progress=io.StringIO())
            data = score_json(scenario, result.score)
            data["file"] = str(path)
            data["wall_seconds"] = round(time.monotonic() - t0, 1)
            scores.append(data)
            faults = data["faults"]
            print(
                f"{path.name}: {'passed' if data['passed'] else 'FAILED'} in "
                f"{data['wall_seconds']} s; {len(faults)} faults, "
                f"{sum(not f['injected'] for f in faults)} not injected, "
                f"{sum(bool(f['missed']) for f in faults)} missed, "
                f"{len(data['unexplained'])} unexplained findings",
                file=sys.stderr,
                flush=True,
            )
    kinds: dict[str, int] = {}
    for data in scores:
        for fault in data["faults"]:
            if fault["injected"]:
                kinds[fault["kind"]] = kinds.get(fault["kind"], 0) + 1
    print(
        json.dumps(
            {
                "scenarios": [
                    {k: d[k] for k in ("file", "seed", "days", "passed", "wall_seconds")}
                    for d in scores
                ],
                "injected_per_kind": dict(sorted(kinds.items())),
                "detectors": _totals(scores),
                "unexplained": [
                    {"scenario": d["scenario"], **u} for d in scores for u in d["unexplained"]
                ],
                "not_injected": [
                    {"scenario": d["scenario"], "kind": f["kind"], "why": f["not_injected_because"]}
                    for d in scores
                    for f in d["faults"]
                    if not f["injected"]
                ],
                "wall_seconds": round(time.monotonic() - began, 1),
            }
        )
    )
    return 0 if all(d["passed"] for d in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
