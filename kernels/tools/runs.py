"""A ladder run as recorded: every timed sample of every contender at one shape, what it ran on, the order of each
round and, for an ablation, its grid; saved as JSON by `runner.py --json` and read back by `--from-json`.

Everything a table shows is computed from the samples and the shape (``kernels.tools.tables``): the bytes a call
must move, for GB/s, come from the shape too, so a saved run shows exactly what the live one did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kernels.tools.cli import DTYPE_NAMES
from kernels.tools.clocks import Reading
from kernels.tools.stats import Spread, round_medians, spread


class RunFileError(ValueError):
    """A file that is not a run saved by ``runner.py --json``."""


@dataclass
class Row:
    """One contender of a run: a torch reference, a ladder chapter or an ablation variant, timed and checked."""

    name: str
    kind: str  # "reference", "chapter" (a rung of the ladder) or "variant" (a kernel of an ablation set)
    samples_ms: list[list[float]]  # per round, the time of each repeat
    max_abs: float
    rel_l2: float
    flops: float  # of one call: the same for every row of a run
    ok: bool | None = None  # kernels only: within the error tolerance
    family: str | None = None  # kernels only: the tensor-core instruction family, "mma.sync" or "wgmma"
    clocks: list[Reading] = field(default_factory=list)  # per round, with --clocks: the SM clock and power drawn

    @property
    def round_ms(self) -> list[float]:
        """One time per round: the median of its repeats."""
        return round_medians(self.samples_ms)

    @property
    def ms(self) -> float:
        """The median over the rounds."""
        return spread(self.round_ms).median

    @property
    def tflops_spread(self) -> Spread:
        """TFLOP/s of each round, summarised."""
        return spread([self.flops / ms / 1e9 for ms in self.round_ms])

    @property
    def tflops(self) -> float:
        """The median TFLOP/s over the rounds."""
        return self.tflops_spread.median

    def to_json(self) -> dict:
        data = {
            "name": self.name,
            "kind": self.kind,
            "family": self.family,
            "max_abs": self.max_abs,
            "rel_l2": self.rel_l2,
            "ok": self.ok,
            "samples_ms": self.samples_ms,
        }
        return data | ({"clocks": [reading.to_json() for reading in self.clocks]} if self.clocks else {})


@dataclass(frozen=True)
class Grid:
    """An ablation set's grid: which contender fills each (row, column) cell."""

    name: str  # the set's folder, e.g. "ch03_ldmatrix"
    title: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: dict[tuple[str, str], str]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "rows": list(self.rows),
            "columns": list(self.columns),
            "cells": [[row, column, name] for (row, column), name in self.cells.items()],
        }

    @classmethod
    def from_json(cls, data: dict) -> Grid:
        cells = {(row, column): name for row, column, name in data["cells"]}
        return cls(data["name"], data["title"], tuple(data["rows"]), tuple(data["columns"]), cells)


SHAPE_KEYS = ("batch", "seq_len", "heads", "head_dim", "dtype", "causal")  # kv_heads, kv_len: heads, seq_len if absent


@dataclass
class Run:
    """Everything one run measured at one shape, with what it ran on and the order of each round."""

    shape: dict
    environment: dict
    flops: float
    rows: list[Row] = field(default_factory=list)
    order: list[list[str]] = field(default_factory=list)  # the contenders' order in each round
    grid: Grid | None = None  # an ablation's grid; None for the ladder
    splits: dict[str, int] = field(default_factory=dict)  # split-KV chapters: how many splits the shape gave each
    tails: dict[str, list[int]] = field(default_factory=dict)  # tail-split kernels: [tiles, pieces] where split

    @property
    def rounds(self) -> int:
        return len(self.order)

    @property
    def bytes_moved(self) -> float:
        """The fewest bytes one call must move through DRAM, from the shape (so a saved run of any age has it)."""
        from kernels.launch import DTYPES  # imported here: torch, which this module does without otherwise
        from reference import attention_bytes

        shape = self.shape
        return attention_bytes(
            shape["batch"],
            shape["seq_len"],
            shape["heads"],
            shape["head_dim"],
            seq_len_k=shape["kv_len"],
            n_kv_heads=shape["kv_heads"],
            element_bytes=DTYPES[shape["dtype"]].itemsize,
        )

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: FLOPs per byte of the fewest bytes moved."""
        return self.flops / self.bytes_moved

    def gbps_spread(self, row: Row) -> Spread:
        """GB/s of one of its rows in each round, summarised: the bytes moved over the round's time."""
        return spread([self.bytes_moved / ms / 1e6 for ms in row.round_ms])

    def gbps(self, row: Row) -> float:
        """The median GB/s of one of its rows over the rounds."""
        return self.gbps_spread(row).median

    def to_json(self) -> dict:
        data = {
            "shape": self.shape,
            "environment": self.environment,
            "flops": self.flops,
            "order": self.order,
            "rows": [row.to_json() for row in self.rows],
        }
        if self.grid is not None:
            data["grid"] = self.grid.to_json()
        if self.splits:
            data["splits"] = self.splits
        if self.tails:
            data["tails"] = self.tails
        return data

    @classmethod
    def from_json(cls, data: dict) -> Run:
        """A saved run; one saved before rounds existed (one ``ms`` per row) reads as a single round."""
        if not data["rows"]:
            raise ValueError("a run with no rows")
        old = "samples_ms" not in data["rows"][0]
        flops = data["rows"][0]["tflops"] * data["rows"][0]["ms"] * 1e9 if old else float(data["flops"])
        rows = [_row_from_json(row, flops) for row in data["rows"]]
        order = [[row.name for row in rows]] if old else [list(names) for names in data["order"]]
        if any(len(row.samples_ms) != len(order) for row in rows):
            raise ValueError(f"every row needs one sample list per round ({len(order)} rounds)")
        if any(row.clocks and len(row.clocks) != len(order) for row in rows):
            raise ValueError(f"a row's clocks need one reading per round ({len(order)} rounds)")
        missing = [key for key in SHAPE_KEYS if key not in data["shape"]]
        if missing:
            raise ValueError(f"the shape has no {', '.join(missing)}")
        if data["shape"]["dtype"] not in DTYPE_NAMES:
            raise ValueError(f"the shape's dtype is {data['shape']['dtype']!r}, not one of {', '.join(DTYPE_NAMES)}")
        shape = {"kv_heads": data["shape"]["heads"], "kv_len": data["shape"]["seq_len"], **data["shape"]}
        grid = Grid.from_json(data["grid"]) if data.get("grid") else None
        splits = {name: int(n) for name, n in data.get("splits", {}).items()}
        tails = {name: [int(n) for n in tail] for name, tail in data.get("tails", {}).items()}
        return cls(shape, dict(data["environment"]), flops, rows, order, grid, splits, tails)


def _row_from_json(data: dict, flops: float) -> Row:
    samples = data["samples_ms"] if "samples_ms" in data else [[data["ms"]]]
    if not samples or not all(repeats and all(float(ms) > 0 for ms in repeats) for repeats in samples):
        raise ValueError(f"{data['name']}: samples_ms must hold, per round, a non-empty list of positive times")
    if data.get("ok") not in (True, False, None) or not isinstance(data.get("family"), str | None):
        raise ValueError(f"{data['name']}: ok must be true, false or null and family a string or null")
    return Row(
        str(data["name"]),
        str(data["kind"]),
        [[float(ms) for ms in repeats] for repeats in samples],
        float(data["max_abs"]),
        float(data["rel_l2"]),
        flops,
        data.get("ok"),
        data.get("family"),
        [Reading.from_json(reading) for reading in data.get("clocks", [])],
    )


def save_runs(runs: list[Run], path: Path) -> None:
    path.write_text(json.dumps([run.to_json() for run in runs], indent=1) + "\n")


def load_runs(path: Path) -> list[Run]:
    """The runs saved in a file; a RunFileError that names the problem if it holds none."""
    if not path.is_file():
        raise RunFileError(f"{path}: no such file")
    text = path.read_text()
    if not text.strip():
        raise RunFileError(f"{path} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise RunFileError(f"{path} is not JSON: {error}") from error
    if not isinstance(data, list) or not data:
        raise RunFileError(f"{path}: expected a list of runs as runner.py --json writes it")
    try:
        return [Run.from_json(run) for run in data]
    except KeyError as error:
        raise RunFileError(f"{path}: not a run saved by runner.py --json: no field {error}") from error
    except (TypeError, ValueError, AttributeError) as error:
        raise RunFileError(f"{path}: not a run saved by runner.py --json: {error}") from error


def shape_title(shape: dict) -> str:
    """The shape in words; the K/V heads and length only where they differ from the queries'."""
    kv = ""
    if shape.get("kv_heads", shape["heads"]) != shape["heads"]:
        kv += f", kv_heads {shape['kv_heads']}"
    if shape.get("kv_len", shape["seq_len"]) != shape["seq_len"]:
        kv += f", kv_len {shape['kv_len']}"
    return (
        f"batch {shape['batch']}, seq_len {shape['seq_len']}, heads {shape['heads']}{kv}, "
        f"head_dim {shape['head_dim']}, {shape['dtype']}{', causal' if shape['causal'] else ''}"
    )
