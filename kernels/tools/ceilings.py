"""The ceilings a ladder run is held against: each kernel's "% of peak" is its TFLOP/s over the rate of the
tensor-core instructions it issues, as `runner.py peak` measured them on the same GPU (results/peak.json)."""

from __future__ import annotations

import json
from pathlib import Path

from kernels.tools.runs import Row

ROOT = Path(__file__).resolve().parents[2]


def instruction_family(source: Path) -> str:
    """The tensor-core instructions a kernel's source issues: "wgmma" (Hopper) or "mma.sync" (Ampere on)."""
    return "wgmma" if "wgmma.mma_async" in source.read_text() else "mma.sync"


def load_ceilings(path: Path, device: str) -> dict[str, float]:
    """TFLOP/s ceiling per instruction family from ``runner.py peak``'s JSON; a ValueError saying why not."""
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if not path.is_file():
        raise ValueError(f"no {shown} (python runner.py peak --json {shown} measures it)")
    try:
        peak = json.loads(path.read_text())
        measured_on = peak["environment"]["device"]
        ceilings = {family: float(ceiling["tflops"]) for family, ceiling in peak["ceilings"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{shown} is not a ceilings file written by runner.py peak ({error!r})") from error
    if measured_on != device:
        raise ValueError(f"{shown} was measured on {measured_on}, this run on {device}")
    return ceilings


def pct_of_peak(row: Row, ceilings: dict[str, float]) -> float | None:
    """The row's median TFLOP/s over the ceiling of the instruction family it uses."""
    ceiling = ceilings.get(row.family or "")
    return None if ceiling is None else 100 * row.tflops / ceiling
