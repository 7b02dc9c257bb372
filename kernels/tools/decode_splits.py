"""How a decode kernel's speed depends on how many splits each (sequence, K/V head)'s keys are dealt to.

    python -m kernels.tools.decode_splits [--chapter 20] [--rounds 7] [--json results/decode_splits.json]

At each shape of `runner.py decode`, the chapter's decode kernel runs with the split count its rule picks
(``decode_split_count`` in kernels/launch.py) and with 2, 4 and 8 times as many, beside cuDNN, in interleaved
rounds on fresh inputs larger than L2. Each count's output is first checked against exact attention as the ladder
checks a kernel's: no worse than about twice cuDNN's error. The table shows GB/s of K and V as the median and
[min–max] over the rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from unittest import mock

import torch
from tabulate import tabulate

import kernels.launch as launch
from kernels.chapters import chapters, select
from kernels.tools.cli import Parser, ToolError, positive_int, run
from kernels.tools.commands import DECODE_SHAPES
from kernels.tools.ladder import environment, make_inputs, on_input_sets
from kernels.tools.sources import source_hashes
from kernels.tools.stats import Spread, rotated, round_medians, spread
from kernels.tools.tables import format_spread
from kernels.tools.timing import time_ms
from reference import SDPA_BACKENDS, attention_error, exact_attention, sdpa_function

CUDNN = "torch cuDNN"
MULTIPLES = (1, 2, 4, 8)  # the split counts tried, as multiples of the rule's
WARMUP, REPEATS = 5, 30


def parser() -> Parser:
    """The module's options."""
    parser = Parser(prog="python -m kernels.tools.decode_splits", description=__doc__.split("\n")[0])
    parser.add_argument("--chapter", default="20", help="a chapter with a decode kernel (default 20)")
    parser.add_argument("--rounds", type=positive_int, default=7, help="interleaved rounds; medians are shown")
    parser.add_argument("--json", metavar="FILE", help="also save every sample as JSON")
    return parser


def split_counts(rule: int, key_tiles: int) -> list[int]:
    """The counts tried: the rule's, then MULTIPLES of it, none above one key tile a split."""
    return sorted({min(rule * multiple, key_tiles) for multiple in MULTIPLES})


def with_splits(attention, count: int):
    """The chapter's attention with its decode split rule replaced by a fixed count."""

    def call(q, k, v, causal):
        with mock.patch.object(launch, "decode_split_count", lambda *_: count):
            return attention(q, k, v, causal=causal)

    return call


def measure_shape(chapter, shape: dict, rounds: int, generator: torch.Generator) -> dict:
    """Every count's and cuDNN's GB/s of K and V at one shape, after checking each count's output against exact
    attention as the ladder does: no worse than about twice cuDNN's error."""
    b, h, hk, n = shape["batch"], shape["heads"], shape["kv_heads"], shape["kv_len"]
    inputs = make_inputs((b, 1, h, 128), (b, n, hk, 128), torch.bfloat16, generator)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    q, k, v = inputs[0]
    if not chapter.kernel.decodes(q.shape, hk):
        raise ToolError(f"{chapter.name} has no decode kernel for this shape")
    rule = chapter.kernel.splits(q.shape, k.shape, sms)
    counts = split_counts(rule, math.ceil(n / chapter.kernel.decode["DECODE_KV"]))
    contenders = {CUDNN: sdpa_function(SDPA_BACKENDS[CUDNN])}
    contenders |= {
        f"{count} split{'s' * (count > 1)}{' (the rule)' * (count == rule)}": with_splits(chapter.attention, count)
        for count in counts
    }
    exact = exact_attention(q, k, v)
    errors = {name: attention_error(attention(q, k, v, causal=False), exact) for name, attention in contenders.items()}
    for name, error in errors.items():
        if not error.within(errors[CUDNN]):
            raise ToolError(
                f"{name}: error {error.max_abs:.1e} (max abs) against exact attention, cuDNN's "
                f"{errors[CUDNN].max_abs:.1e}"
            )
    samples = {name: [] for name in contenders}
    for round_index in range(rounds):
        for name in rotated(list(contenders), round_index):
            samples[name].append(time_ms(on_input_sets(contenders[name], inputs, False), WARMUP, REPEATS))
    kv_bytes = 2 * k.nbytes
    return {"shape": shape, "kv_bytes": kv_bytes, "splits": counts, "samples_ms": samples}


def gb_per_s(measured: dict, name: str) -> Spread:
    """One contender's GB/s of K and V over the rounds."""
    return spread([measured["kv_bytes"] / ms / 1e6 for ms in round_medians(measured["samples_ms"][name])])


def shape_table(measured: dict, rounds: int, tablefmt: str = "simple") -> str:
    """One shape's title and table."""
    shape = measured["shape"]
    title = f"batch {shape['batch']} × {shape['kv_len']:,} keys, heads {shape['heads']}/{shape['kv_heads']}"
    rows = [[name, format_spread(gb_per_s(measured, name), rounds, digits=0)] for name in measured["samples_ms"]]
    return f"{title}\n\n" + tabulate(rows, headers=["splits", "GB/s of K and V"], tablefmt=tablefmt)


def markdown_tables(saved: dict) -> str:
    """A saved file's tables in GitHub Markdown, each under its shape, for docs/results.md."""
    rounds = len(next(iter(saved["shapes"][0]["samples_ms"].values())))
    tables = [shape_table(measured, rounds, "github") for measured in saved["shapes"]]
    return "\n\n".join(tables) + f"\n\nMedian over {rounds} rounds [min–max], bf16, head_dim 128.\n"


def run_decode_splits(args: argparse.Namespace) -> int:
    """Measure every shape, print its table, save the JSON; a ToolError naming why it cannot."""
    if not torch.cuda.is_available():
        raise ToolError("no CUDA GPU: the decode splits are measured on one")
    try:
        (chapter,) = select(chapters(), args.chapter)
    except ValueError as error:
        raise ToolError(str(error)) from error
    if chapter.kernel.decode is None:
        raise ToolError(f"{chapter.name} has no decode kernel")
    generator = torch.Generator(device="cuda").manual_seed(0)
    measured = []
    for shape in DECODE_SHAPES:
        measured.append(measure_shape(chapter, shape, args.rounds, generator))
        print(shape_table(measured[-1], args.rounds) + "\n")
        torch.cuda.empty_cache()
    print(f"{torch.cuda.get_device_name(0)}: median over {args.rounds} rounds [min–max], bf16, head_dim 128")
    if args.json:
        command = "python -m kernels.tools.decode_splits " + " ".join(sys.argv[1:])
        record = environment(command) | {"sources": source_hashes([chapter.source])}
        with open(args.json, "w") as file:
            json.dump({"environment": record, "shapes": measured}, file, indent=1)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run(parser(), run_decode_splits, sys.argv[1:]))
