"""The ceilings a ladder run is held against, as `runner.py peak` measured them on the same GPU (results/peak.json).

A compute-bound run's "% of peak" is each kernel's TFLOP/s over the rate of the tensor-core instructions it issues.
A memory-bound run (``memory_bound``: the rule is stated there, once) is shown in GB/s instead, and its "% of DRAM"
is that over the DRAM copy rate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kernels.tools.runs import Row, Run

ROOT = Path(__file__).resolve().parents[2]

# A run is memory-bound, and shown in GB/s of the bytes it must move, when its arithmetic intensity (its FLOPs over
# those bytes) is below this many FLOP per byte: under the ridge point (tensor-core ceiling ÷ DRAM bandwidth) of the
# GPUs the ladder is measured on (A100, H100, H200: between about 140 and 300), where a kernel waits on DRAM whatever
# its tensor cores could do. One query row per sequence against a long KV cache does about as many FLOP per byte as
# query heads share a K/V head; the headline shape (seq_len queries and keys) about seq_len / 2.
MEMORY_BOUND_BELOW = 100


def memory_bound(run: Run) -> bool:
    """Whether the run's shape is memory-bound by the rule above (the same for a saved run as for a live one)."""
    return run.intensity < MEMORY_BOUND_BELOW


def instruction_family(source: Path) -> str:
    """The tensor-core instructions a kernel's source issues: "wgmma" (Hopper) or "mma.sync" (Ampere on)."""
    return "wgmma" if "wgmma.mma_async" in source.read_text() else "mma.sync"


@dataclass(frozen=True)
class Ceilings:
    """The ceilings of one GPU: TFLOP/s per tensor-core instruction family, and the DRAM copy rate in TB/s."""

    tflops: dict[str, float] = field(default_factory=dict)
    dram_tbps: float | None = None
    no_dram: str | None = None  # why dram_tbps is None, when the file was read but holds no DRAM ceiling


def load_ceilings(path: Path, device: str) -> Ceilings:
    """The ceilings in ``runner.py peak``'s JSON; a ValueError saying why not. A file without ``memory`` (written
    before the DRAM rate was measured) gives the tensor-core ceilings alone, and says so in ``no_dram``."""
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if not path.is_file():
        raise ValueError(f"no {shown} (python runner.py peak --json {shown} measures it)")
    try:
        peak = json.loads(path.read_text())
        measured_on = peak["environment"]["device"]
        tflops = {family: float(ceiling["tflops"]) for family, ceiling in peak["ceilings"].items()}
        dram = peak.get("memory", {}).get("dram copy")
        dram_tbps = None if dram is None else float(dram["tbps"])
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{shown} is not a ceilings file written by runner.py peak ({error!r})") from error
    if measured_on != device:
        raise ValueError(f"{shown} was measured on {measured_on}, this run on {device}")
    no_dram = None if dram_tbps else f"{shown} holds no DRAM ceiling (python runner.py peak --json {shown} measures it)"
    return Ceilings(tflops, dram_tbps or None, no_dram)


def pct_of_peak(row: Row, ceilings: Ceilings) -> float | None:
    """The row's median TFLOP/s over the ceiling of the instruction family it uses."""
    ceiling = ceilings.tflops.get(row.family or "")
    return None if ceiling is None else 100 * row.tflops / ceiling


def pct_of_dram(run: Run, row: Row, ceilings: Ceilings) -> float | None:
    """The row's median GB/s over the DRAM copy rate: how near it comes to moving its bytes as fast as a copy."""
    return None if ceilings.dram_tbps is None else 100 * run.gbps(row) / (1000 * ceilings.dram_tbps)
