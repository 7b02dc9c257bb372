"""The saved runs in results/ that the ladder and the roofline show, read and plotted by kernels.tools.report: the
one place the figures import it."""

from __future__ import annotations

from pathlib import Path

from kernels.tools.report import Run, load_runs, plot_ladder

__all__ = ["Run", "first_run", "plot_ladder"]


def first_run(path: Path) -> Run:
    """The first run saved in a results/ file (runner.py --json writes a list; the headline file holds one)."""
    return load_runs(path)[0]
