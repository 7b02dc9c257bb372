"""The ladder (ladder.png, on the results page): every chapter's TFLOP/s in results/headline.json against the torch
references, the same plot as `runner.py --from-json results/headline.json --plot ...`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .runs import Run, first_run, plot_ladder


def without_overprinted_references(run: Run) -> Run:
    """The run less each reference within 3% of one kept before it: "torch default" is whichever backend torch
    picks (cuDNN on the H200), so its line would sit on top of that backend's and the two labels would overprint."""
    kept: list[float] = []
    rows = []
    for row in run.rows:
        if row.kind == "reference":
            if any(abs(row.tflops - other) < 0.03 * other for other in kept):
                continue
            kept.append(row.tflops)
        rows.append(row)
    return dataclasses.replace(run, rows=rows)


def figure_ladder(path: Path, results: Path) -> None:
    """The headline run's ladder, drawn by plot_ladder (what runner.py --plot calls)."""
    plot_ladder(without_overprinted_references(first_run(results)), path)
    print(f"wrote {path}")
