"""The saved runs in results/ that the ladder and the roofline show, read by kernels.tools.runs and plotted by
kernels.tools.plot: the one place the figures import them."""

from __future__ import annotations

from pathlib import Path

from kernels.tools.plot import plot_ladder
from kernels.tools.runs import Run, load_runs

__all__ = ["Run", "first_run", "plot_ladder"]


def first_run(path: Path) -> Run:
    """The first run saved in a results/ file (runner.py --json writes a list; the headline file holds one)."""
    return load_runs(path)[0]
