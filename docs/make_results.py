"""Write docs/results.md, the ladder table in README.md, the reading list in docs/README.md and the results
snippets in the pages and README.md, from the saved runs in results/.

    python docs/make_results.py

docs/results.md renders every file in results/, each once under a heading that names it: the runs as
`runner.py --json` writes them (ablations with their grid, sweeps with a table across seq_len, decode.json), the
ceilings of results/peak.json (`runner.py peak --json`), the profiles of `runner.py profile --json`, and a link
with a line for each text file. results/peak.json also gives "% of peak" and "% of DRAM". The README
table is exactly what `runner.py --from-json results/headline.json --markdown` prints, so the two never
disagree. A page's snippet lies between `<!-- results:NAME:start -->` and `<!-- results:NAME:end -->`:
`step-05` is chapter 5 and the chapter before it, headline and causal; `decode-17` is chapter 17 and the one
before it at the decode shapes of results/decode.json, beside cuDNN; `ablation-ch03` is the grid of
results/ablation_ch03.json (`runner.py ablate 3 --json ...`); `runs-dynamic_schedule` is every run of
results/dynamic_schedule.json, one row per shape, its chapters side by side; `clocks-fa4_clocks` the same runs'
rates at the SM clock each held (`runner.py --clocks`); `beside-fa4` a row per file that times chapters beside
FlashAttention-4 at its four shapes. A snippet whose results are missing is left as it is, with a warning.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernels.tools.ceilings import Ceilings, load_ceilings, memory_bound  # noqa: E402
from kernels.tools.decode_splits import markdown_tables as decode_splits_tables  # noqa: E402
from kernels.tools.peak import load_peak, markdown_tables  # noqa: E402
from kernels.tools.profiling import load_profile_table  # noqa: E402
from kernels.tools.read_rate import load_read_rate  # noqa: E402
from kernels.tools.read_rate import markdown_tables as read_rate_tables  # noqa: E402
from kernels.tools.runs import Row, Run, RunFileError, load_runs, shape_title  # noqa: E402
from kernels.tools.stats import Spread, ratio_spread, verdict  # noqa: E402
from kernels.tools.tables import (  # noqa: E402
    ceiling_notes,
    format_spread,
    legend,
    markdown,
    markdown_grid,
    markdown_table,
    pct_of_reference,
    reference_row,
    steps,
)
from kernels.tools.timeline import load_timelines  # noqa: E402
from reference import FA4  # noqa: E402

DOCS = ROOT / "docs"
LADDER_MARKERS = ("<!-- ladder:start -->", "<!-- ladder:end -->")
CHAPTER_MARKERS = ("<!-- chapters:start -->", "<!-- chapters:end -->")
SNIPPET = re.compile(r"<!-- results:([\w-]+):start -->")
README_STUB = "# Flash Attention 2 from scratch in CUDA, one optimization per chapter\n\n{start}\n{end}\n"


class MissingResults(Exception):
    """A snippet's results are not recorded yet: the snippet stays as it is."""


def ceilings_note(run: Run, results: Path) -> tuple[Ceilings, str | None]:
    """The ceilings for "% of peak" and "% of DRAM" if results/peak.json was measured on the run's GPU, else why not."""
    try:
        return load_ceilings(results / "peak.json", run.environment.get("device", "?")), None
    except ValueError as why:
        return Ceilings(), str(why)


def ladder_block(run: Run, results: Path) -> str:
    """A run as `runner.py --markdown` prints it: the shape line, the table, how to read it."""
    ceilings, note = ceilings_note(run, results)
    block = (
        f"**{shape_title(run.shape)}** on {run.environment.get('device', '?')}\n\n"
        f"{markdown_table(run, ceilings)}\n\n{legend(run, ceilings)}"
    )
    return "\n\n".join([block, *ceiling_notes([run], ceilings, note)])


def driver_version(code: int | str | None) -> str:
    """CUDA's driver version code (1000 · major + 10 · minor, e.g. 13000) as "13.0"."""
    if not isinstance(code, int):
        return str(code or "?")
    return f"{code // 1000}.{code % 1000 // 10}"


def environment_lines(run: Run) -> str:
    """What a reader needs to reproduce a run: the command, and what it ran on."""
    env = run.environment
    return (
        f"- command: `{env.get('command', '?')}`\n"
        f"- GPU: {env.get('device', '?')}; CUDA driver {driver_version(env.get('cuda_driver'))}, "
        f"runtime {env.get('cuda_runtime', '?')}\n"
        f"- torch {env.get('torch', '?')}, cupy {env.get('cupy', '?')}, Python {env.get('python', '?')}"
        + "".join(
            f", {name} {env[key]}" for key, name in (("nvrtc", "NVRTC"), ("flash_attn_4", "flash-attn-4")) if key in env
        )
        + "\n"
        f"- date: {env.get('date', '?')}"
    )


def sweep_groups(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs that differ only in seq_len, keyed by their shape title without the seq_len."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        title = re.sub(r"seq_len \d+, ", "", shape_title(run.shape))
        groups.setdefault(title, []).append(run)
    return {title: sorted(group, key=lambda r: r.shape["seq_len"]) for title, group in groups.items()}


def sweep_table(runs: list[Run]) -> str:
    """Median TFLOP/s of every reference and chapter (rows) at every seq_len (columns)."""
    names: list[str] = []
    for run in runs:
        names += [row.name for row in run.rows if row.name not in names]
    lines = []
    for name in names:
        cells = []
        for run in runs:
            row = next((r for r in run.rows if r.name == name), None)
            cells.append("" if row is None else f"{row.tflops:.1f}")
        lines.append([name, *cells])
    return markdown(["TFLOP/s", *(f"seq {run.shape['seq_len']}" for run in runs)], lines)


# The results files in the page's order, each under its heading; other run files follow these, by name.
RUN_TITLES = {
    "headline.json": "The ladder at the headline shape",
    "causal.json": "Causal",
    "headline_k14_to_k16.json": "Chapters 14-16 at the headline shape, more rounds",
    "causal_k14_to_k16.json": "Chapters 14-16, causal, more rounds",
    "fp16.json": "fp16",
    "gqa.json": "Grouped K/V heads",
    "kv_cache.json": "A KV cache: a block of new queries against longer keys, causal",
    "fa4_k14_to_k16.json": "FlashAttention-4 beside chapters 14-16 (4,096 keys, full and causal; 1,024; 16,384)",
    "decode.json": "Decoding: one query row against a KV cache",
    "sweep.json": "Sequence-length sweep",
    "sweep_causal.json": "Sequence-length sweep, causal",
    "sweep_k16.json": "Sequence-length sweep, chapters 14-16",
    "sweep_causal_k16.json": "Sequence-length sweep, chapters 14-16, causal",
    "dynamic_schedule.json": "Chapter 19 beside 16 and 18: 16,384 keys, the headline shape, causal",
    "fa4_k16_k19.json": "FlashAttention-4 beside chapters 16 and 19 (4,096 keys, full and causal; 1,024; 16,384)",
    "prefill_k16_k20.json": "Chapters 16, 19 and 20 at the headline shape, full and causal",
    "fa4_clocks.json": "FlashAttention-4 beside chapters 16 and 20, with each one's SM clock and power (four shapes)",
    "nvrtc_13_4.json": "Chapters 16 and 20 built by NVRTC 13.0 and by 13.4, in alternating runs",
    "prefill_k16_k21.json": "Chapters 16, 20 and 21 at the headline shape, full and causal",
    "fa4_k21.json": "FlashAttention-4 beside chapters 16, 20 and 21, with each one's SM clock and power (four shapes)",
    "decode_k21.json": "Decoding: chapters 16, 20 and 21 at the decode shapes",
    "fa4_k26.json": "FlashAttention-4 beside chapters 21 to 26, with each one's SM clock and power (four shapes)",
    "decode_k26.json": "Decoding: chapters 21 to 26 at the decode shapes",
    "k26_k27.json": "Chapter 27 beside chapter 26 and FlashAttention-4, with each one's SM clock and power",
    "k26_k27_repeat.json": "Chapter 27 beside chapter 26 again, full and causal, and 64 x 1,024 over 15 rounds",
    "decode_k27.json": "Decoding: chapters 26 and 27 at the decode shapes",
    "k27_k28.json": "Chapter 28 beside chapter 27 and FlashAttention-4, with each one's SM clock and power",
    "decode_k28.json": "Decoding: chapters 27 and 28 at the decode shapes",
    "k27_k29_h200.json": "Chapters 27, 28 and 29, causal and at 16,384 keys, with each one's SM clock and power",
    "decode_k29.json": "Decoding: chapters 28 and 29 at the decode shapes",
    "k28_k29.json": "Chapter 29 beside chapter 28 and FlashAttention-4, with each one's SM clock and power",
    "k28_k29_repeat.json": "Chapter 29 beside chapter 28 and FlashAttention-4 again, the four shapes",
    "k28_k29_h200.json": "Chapter 29 beside chapter 28 and FlashAttention-4 on an H200, the four shapes",
    "k29_k30.json": "Chapter 30 beside chapter 29, with each one's SM clock and power, the four shapes",
    "decode_k30.json": "Decoding: chapters 29 and 30 at the decode shapes",
    "k29_k30_h200.json": "Chapter 30 beside chapter 29 and FlashAttention-4 on an H200, the four shapes",
    "k29_k30_fa4.json": "Chapter 30 beside chapter 29 and FlashAttention-4, the four shapes",
    "k29_k30_fa4_repeat.json": "Chapter 30 beside chapter 29 and FlashAttention-4 again, the four shapes",
    "decode_k31.json": "Decoding: chapters 30 and 31 at the decode shapes",
    "k30_k31.json": "Chapter 31 beside chapter 30, with each one's SM clock and power, the four shapes",
    "k30_k31_headline.json": "Chapter 31 beside chapter 30, with each one's SM clock and power, at the headline shape",
    "k30_k31_h200.json": "Chapter 31 beside chapter 30 and FlashAttention-4 on an H200, the four shapes",
    "k30_k31_fa4.json": "Chapter 31 beside chapter 30 and FlashAttention-4, the four shapes",
    "k30_k31_fa4_repeat.json": "Chapter 31 beside chapter 30 and FlashAttention-4 again, the four shapes",
    "decode_k32.json": "Decoding: chapters 31 and 32 at the decode shapes",
    "k31_k32.json": "Chapter 32 beside chapter 31 and FlashAttention-4, the four shapes",
    "k31_k32_h200.json": "Chapter 32 beside chapter 31 and FlashAttention-4 on an H200, the four shapes",
}
PEAK_FILE = "peak.json"  # `runner.py peak --json results/peak.json`
READ_RATE_FILE = "read_rate.json"  # `runner.py read_rate --json results/read_rate.json`
DECODE_SPLITS_FILE = "decode_splits.json"  # `python -m kernels.tools.decode_splits --json results/decode_splits.json`
# What a text file holds, for its link; another .txt is described by its first line.
TEXT_FILES = {
    "loop_anatomy_ch19_trims.txt": "one tile of chapter 19's tile loop and of its trimmed variants, in SASS "
    "(`python -m kernels.tools.loop_anatomy 19 k19_lean k19_lean_descriptors`)",
    "loop_anatomy_k16_k19_fa4.txt": "one tile of the tile loops of chapters 16 and 19 and of FlashAttention-4, in "
    "their SASS (`python -m kernels.tools.loop_anatomy`)",
    "loop_anatomy_ch21_softmax_first.txt": "one tile of the tile loops of chapter 21 and of its variants with the "
    "softmax under P V, in their SASS (`python -m kernels.tools.loop_anatomy 21 k21_exponentials_first ...`)",
    "loop_anatomy_ch21_short_tile.txt": "one tile of the tile loops of chapter 21 and of FlashAttention-4's tile on "
    "it, piece by piece, in their SASS (`python -m kernels.tools.loop_anatomy 21 k21_ping_pong k21_peeked ...`)",
    "loop_anatomy_k20_k21.txt": "one tile of the tile loops of chapters 20 and 21, in their SASS "
    "(`python -m kernels.tools.loop_anatomy 20 21`)",
    "loop_anatomy_k22_k26.txt": "one tile of the tile loops of chapters 22 to 26, in their SASS "
    "(`python -m kernels.tools.loop_anatomy 22 23 24 25 26`)",
    "loop_anatomy_k26_k27.txt": "one tile of the tile loops of chapters 26 and 27, in their SASS "
    "(`python -m kernels.tools.loop_anatomy 26 27`)",
    "loop_anatomy_k29_k30.txt": "one tile of the tile loops of chapters 29 and 30, in their SASS "
    "(`python -m kernels.tools.loop_anatomy 29 30`)",
    "loop_anatomy_k30_k31.txt": "one tile of the tile loops of chapters 30 and 31, in their SASS "
    "(`python -m kernels.tools.loop_anatomy 30 31`)",
    "loop_anatomy_k31_k32.txt": "one tile of the tile loops of chapters 31 and 32, in their SASS "
    "(`python -m kernels.tools.loop_anatomy 31 32`)",
    "loop_anatomy_ch29_less_per_tile.txt": "one tile of chapter 29's tile loop, of its rescale vote and of its "
    "half-wide diagonal tile, in their SASS (`python -m kernels.tools.loop_anatomy 29 k29_lazy_rescale k29_half_tile`)",
    "loop_anatomy_ch30_q_in_registers.txt": "one tile of chapter 30's tile loop, with Q in registers, with its first "
    "exponentials under P V, and with both, in their SASS (`python -m kernels.tools.loop_anatomy 30 k30_q_in_registers "
    "k30_early_exponentials k30_q_early_exponentials`)",
    "loop_anatomy_nvrtc_13_4.txt": "one tile of the tile loops of chapters 16 and 20 built by NVRTC 13.4, in SASS "
    "(`python -m kernels.tools.loop_anatomy 16 20` with NVRTC 13.4 loaded)",
    "profile_k05_to_k09.txt": "Nsight Compute on chapters 5-9, one `runner.py profile` per chapter, as text",
    "qwen3_attention.txt": "`python -m examples.qwen3_attention`: a Qwen3 attention layer on torch's backends and "
    "the op, prefill and chunked",
    "qwen3_attention_repeats.txt": "the Qwen3 example four times in a row, twice on the op's default chapter and "
    "twice on chapter 15",
    "read_rate.txt": "the tables of `results/read_rate.json` as the terminal printed them (`runner.py read_rate`)",
    "decode_splits.txt": "the tables of `results/decode_splits.json` as the terminal printed them "
    "(`python -m kernels.tools.decode_splits`)",
    "sanitizer.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapters 7-16 (`scripts/sanitize.py`)",
    "sanitizer_k17_k18.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapters 17 and 18, with a "
    "decode shape (`scripts/sanitize.py 17 18`)",
    "sanitizer_k19.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapter 19, with a decode shape "
    "(`scripts/sanitize.py 19`)",
    "sanitizer_k20.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapter 20, with a decode shape "
    "(`scripts/sanitize.py 20`)",
    "sanitizer_k21.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapter 21, with a decode shape "
    "(`scripts/sanitize.py 21`)",
    "sanitizer_k22_k26.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapters 22 to 26, with a "
    "decode shape (`scripts/sanitize.py 22 23 24 25 26`)",
    "sanitizer_k27.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapter 27, with a decode shape "
    "(`scripts/sanitize.py 27`)",
    "sanitizer_k28.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapter 28, with a decode shape "
    "(`scripts/sanitize.py 28`)",
    "sanitizer_k29.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapter 29, with a decode shape "
    "(`scripts/sanitize.py 29`)",
    "sanitizer_k31.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapter 31, with a decode shape "
    "and full attention over 8,200 keys, where its blocks pair (`scripts/sanitize.py 31`)",
    "sanitizer_k32.txt": "compute-sanitizer's memcheck, racecheck and synccheck on chapter 32, with a decode shape "
    "and attention over 8,200 keys, full and causal, where its blocks pair (`scripts/sanitize.py 32`)",
    "sanitizer_kv_multicast.txt": "compute-sanitizer's memcheck, racecheck and synccheck on kernel 29 with K and V "
    "shared by a cluster's two blocks, with a decode shape and full attention over 8,200 keys "
    "(`scripts/sanitize.py k29_kv_multicast`)",
    "sanitizer_next_query_tile.txt": "compute-sanitizer's memcheck, racecheck and synccheck on kernel 29 with each "
    "query tile started beside the last P V before it, with a decode shape "
    "(`scripts/sanitize.py k29_next_query_tile`)",
    "sanitizer_o_under_next_s.txt": "compute-sanitizer's memcheck, racecheck and synccheck on kernel 30 with O "
    "written out under the next query tile's first S, with a decode shape (`scripts/sanitize.py k30_o_under_next_s`)",
    "sanitizer_q_in_registers.txt": "compute-sanitizer's memcheck, racecheck and synccheck on kernel 30 with Q in "
    "registers, with a decode shape (`scripts/sanitize.py k30_q_in_registers`)",
    "sanitizer_tail_split.txt": "compute-sanitizer's memcheck, racecheck and synccheck on kernel 29 with its last "
    "wave split along the keys, with a decode shape and a split tail (`scripts/sanitize.py k29_tail_split`)",
}
CUDNN = "torch cuDNN"  # the row of cuDNN's attention in a run (reference.SDPA_BACKENDS)
DECODE_FILE = "decode.json"  # `runner.py decode --json results/decode.json`
DECODE_LATER_FILES = "decode_k[0-9][0-9].json"  # `runner.py decode --kernels ...`: a chapter after decode.json's
DECODE_INTRO = (
    "`python runner.py decode`: one new query row per sequence attends to its KV cache, with grouped-query heads, as "
    "when a model generates one token at a time. Each call reads all of K and V for a few FLOPs per byte, so it waits "
    "on DRAM: GB/s count the fewest bytes a call must move (Q, K and V read once, K and V once per K/V head, O "
    'written once) over its time, and "% of DRAM" divides them by the DRAM copy rate of `results/peak.json`. Not '
    "causal: with one query the bottom-right causal mask hides no key."
)


def heading(title: str, path: Path) -> str:
    """A section's heading, naming the file it renders so that a reader who meets the name finds the numbers."""
    return f"## {title} (`results/{path.name}`)\n"


def run_section(path: Path, results: Path) -> list[str]:
    """A run file: each run's table as `runner.py --markdown` prints it (an ablation's grid under it), the sweep
    files first as one table of median TFLOP/s per seq_len, then what it ran on."""
    runs = load_runs(path)
    grid = runs[0].grid
    title = RUN_TITLES.get(path.name) or (f"Ablation: {grid.title}" if grid else path.stem)
    parts = [heading(title, path)]
    if path.name == DECODE_FILE:
        parts.append(DECODE_INTRO + "\n")
    if path.name.startswith("sweep"):
        for group_title, group in sweep_groups(runs).items():
            device = group[0].environment.get("device", "?")
            parts += [f"**{group_title}** on {device}, median TFLOP/s\n", sweep_table(group) + "\n"]
    # Runs of one file built by different NVRTC releases (results/nvrtc_13_4.json) say which built each.
    several_builds = len({run.environment.get("nvrtc") for run in runs}) > 1
    for run in runs:
        if several_builds:
            parts.append(f"Chapters built by NVRTC {run.environment.get('nvrtc', '?')}:\n")
        parts.append(ladder_block(run, results) + "\n")
        if run.grid is not None:
            parts.append(f"**{run.grid.title}**\n\n{markdown_grid(run)}\n")
    return [*parts, environment_lines(runs[0]) + "\n"]


def peak_section(path: Path) -> list[str]:
    """results/peak.json: the ceilings and the fastest possible times, as `runner.py peak --markdown` prints them."""
    run = load_peak(path)
    env = run.environment
    return [
        heading("Ceilings: the tensor-core rates, L2 and DRAM", path),
        markdown_tables(run),
        f"- command: `{env.get('command', '?')}`\n- torch {env.get('torch', '?')}, cupy {env.get('cupy', '?')}\n"
        f"- date: {env.get('date', '?')}\n",
    ]


def read_rate_section(path: Path) -> list[str]:
    """results/read_rate.json: how fast each copy mechanism reads a decode KV cache, as `runner.py read_rate
    --markdown` prints it."""
    run = load_read_rate(path)
    env = run.environment
    return [
        heading("Reading a decode KV cache: the TMA, cp.async and 16-byte loads", path),
        read_rate_tables(run),
        f"- command: `{env.get('command', '?')}`\n- GPU: {env.get('device', '?')}; readers compiled by NVRTC "
        f"{env.get('nvrtc', '?')}\n- date: {env.get('date', '?')}\n",
    ]


def decode_splits_section(path: Path) -> list[str]:
    """results/decode_splits.json: a decode kernel's speed with its rule's split count and with more splits."""
    saved = json.loads(path.read_text())
    env = saved["environment"]
    return [
        heading("A decode kernel's splits: its rule's count and 2, 4 and 8 times as many, beside cuDNN", path),
        decode_splits_tables(saved),
        f"- command: `{env.get('command', '?')}`\n- GPU: {env.get('device', '?')}\n- date: {env.get('date', '?')}\n",
    ]


def profile_section(path: Path) -> list[str]:
    """A saved profile: its table as `runner.py profile --markdown` prints it, and the command that measured it."""
    table = load_profile_table(path)
    record = json.loads(path.read_text())
    return [
        heading(f"Nsight Compute: {', '.join(table.heads)}", path),
        table.markdown() + "\n",
        f"- command: `{record.get('command', '?')}`\n- GPU: {record.get('device', '?')}\n",
    ]


def text_line(path: Path) -> str:
    """One line linking a text file, with what it holds."""
    if path.name in TEXT_FILES:
        what = TEXT_FILES[path.name]
    elif path.with_suffix(".json").exists():
        what = f"the table of `results/{path.stem}.json` as the terminal printed it"
    else:
        what = path.read_text().splitlines()[0].lstrip("# ").strip() if path.read_text().strip() else "empty"
    return f"- [`results/{path.name}`](../results/{path.name}): {what}"


# `python -m examples.qwen3_generation --json results/qwen3_generation.json`; --chapter N: qwen3_generation_kNN.json
GENERATION_FILES = "qwen3_generation*.json"


def generation_section(path: Path) -> list[str]:
    """The generation example: attention per decoded token, the op's chapter against torch's SDPA, per batch."""
    record = json.loads(path.read_text())
    model = record["model"]
    lines = [
        [
            row["batch"],
            row["attention"],
            "n/a" if row["ms_per_token"] is None else f"{row['ms_per_token']:.3f}",
            "" if row["error"] is None else f"{row['error']['rel_l2']:.1e}",
            {True: "pass", False: "FAIL", None: ""}[row.get("check")],
        ]
        for row in record["rows"]
    ]
    environment = record["environment"]
    return [
        heading("Generation: Qwen3-8B's attention, decoding on a static KV cache", path),
        f"{model['layers']} layers of {model['n_heads']} query and {model['n_kv_heads']} key/value heads of "
        f"{model['head_dim']}, {record['tokens']} tokens decoded after a {record['prompt']}-token prompt, bf16; "
        f"timed {record['timed']}; the op runs {record['chapter']}. rel L2 is the error against exact float64 "
        "attention at the first and last token.\n",
        markdown(["batch", "attention", "ms / token", "rel L2", "check"], lines) + "\n",
        f"- command: `{environment.get('command', '?')}`\n- GPU: {environment.get('device', '?')}\n",
    ]


def saved_kind(path: Path) -> str | None:
    """What a JSON file that is not a run holds: "profiles" (`runner.py profile --json`), "stalls" (`runner.py stalls
    --json`, its table in the .txt beside it), "timelines" (`runner.py timeline --json`), or None for a run."""
    data = json.loads(path.read_text())
    kinds = ("profiles", "stalls", "timelines")
    return next((kind for kind in kinds if isinstance(data, dict) and kind in data), None)


def stalls_section(path: Path) -> list[str]:
    """Stall samples: what was sampled, where, and the table beside them (the .txt `runner.py stalls` printed)."""
    record = json.loads(path.read_text())
    shape = ", ".join(f"{key} {value}" for key, value in record["shape"].items())
    targets = " and ".join(entry["target"] for entry in record["stalls"])
    table = path.with_suffix(".txt")
    return [
        heading(f"Stall samples: {targets}", path),
        f"{shape}; warp samples by kind of instruction and the instructions sampled most, in "
        f"[`results/{table.name}`](../results/{table.name}).\n",
        f"- command: `{record['command']}`\n- GPU: {record['device']}, chapters compiled by NVRTC {record['nvrtc']}\n",
    ]


def timeline_section(path: Path) -> list[str]:
    """Stamped tile loops: the table `runner.py timeline` printed, and the command that measured it."""
    record, (table, *warps) = load_timelines(path)
    return [
        heading(f"The tile loop, stamped: {', '.join(table.heads)}", path),
        *(each.markdown() + "\n" for each in (table, *warps)),
        f"- command: `{record['command']}`\n- GPU: {record['device']}\n",
    ]


def timeline_snippet(name: str, results: Path, *, warps: bool = False) -> str:
    """The table of results/timeline_NAME.json (or its warp-by-warp tables), with the command that measured it."""
    path = results / f"timeline_{name}.json"
    if not path.exists():
        raise MissingResults(f"no {path.name} in {results}")
    record, (table, *warp_tables) = load_timelines(path)
    shown = "\n\n".join(each.markdown() for each in (warp_tables if warps else [table]))
    return f"{shown}\n\nFrom results/{path.name} (`{record['command']}`)."


def timeline_warps_snippet(name: str, results: Path) -> str:
    """The warp-by-warp tables of results/timeline_NAME.json, with the command that measured them."""
    return timeline_snippet(name, results, warps=True)


def results_page(results: Path) -> str:
    """The whole page: every file in ``results``, each once under a heading naming it, text files as links."""
    files = sorted(path for path in results.iterdir() if path.is_file() and not path.name.startswith("."))
    json_files = [path for path in files if path.suffix == ".json"]
    kinds = {path: saved_kind(path) for path in json_files if path.name != PEAK_FILE}
    profiles = [path for path, kind in kinds.items() if kind == "profiles"]
    stalls = [path for path, kind in kinds.items() if kind == "stalls"]
    timelines = [path for path, kind in kinds.items() if kind == "timelines"]
    order = list(RUN_TITLES)

    def place(path: Path) -> tuple[int, str]:
        """The runs of RUN_TITLES in its order, then other runs by name, then the ablations (runs with a grid)."""
        known = order.index(path.name) if path.name in order else len(order)
        return known + (path.name not in order and load_runs(path)[0].grid is not None), path.name

    generations = sorted(results.glob(GENERATION_FILES))
    special = (PEAK_FILE, READ_RATE_FILE, DECODE_SPLITS_FILE)
    run_files = sorted(
        (
            path
            for path in json_files
            if path.name not in special and path not in profiles + stalls + timelines + generations
        ),
        key=place,
    )
    others = [path for path in files if path.suffix not in (".json", ".txt")]
    parts = [
        "# Results\n",
        "Generated by `python docs/make_results.py` from the files in `results/`, each under a heading that names "
        "it; do not edit by hand. "
        "Each contender is timed once per round, the rounds interleaved; a number is the median over the rounds "
        "and [min–max] its range. TFLOP/s count the two matrix products only (4 · batch · heads · seq² · "
        'head_dim, half of it when causal); "% of FA2" compares times with torch\'s Flash Attention 2 backend '
        'round by round; "% of peak" divides by the ceiling of the tensor-core instruction the chapter uses '
        '(`results/peak.json`); "step" is the speed-up over the previous chapter, round by round, and "~" '
        "marks one whose range includes 1.00; errors are against an exact float64 attention.\n",
        "![the ladder](figures/ladder.png)\n",
    ]
    for path in run_files:
        parts += run_section(path, results)
    if (results / PEAK_FILE).exists():
        parts += peak_section(results / PEAK_FILE)
    if (results / READ_RATE_FILE).exists():
        parts += read_rate_section(results / READ_RATE_FILE)
    if (results / DECODE_SPLITS_FILE).exists():
        parts += decode_splits_section(results / DECODE_SPLITS_FILE)
    for path in profiles:
        parts += profile_section(path)
    for path in stalls:
        parts += stalls_section(path)
    for path in timelines:
        parts += timeline_section(path)
    for path in generations:
        parts += generation_section(path)
    texts = [path for path in files if path.suffix == ".txt"] + others
    if texts:
        parts += ["## Text files\n", "\n".join(text_line(path) for path in texts) + "\n"]
    return "\n".join(parts)


def replace_between(text: str, markers: tuple[str, str], body: str, where: Path) -> str:
    """Swap what lies between the two markers for ``body``; the markers must be there, in order."""
    start, end = markers
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"{where}: missing the markers {start} ... {end}; add them where the table belongs")
    return text[: i + len(start)] + "\n" + body + "\n" + text[j:]


def ratio_text(step: Spread) -> str:
    """A per-round ratio with its range and verdict, e.g. "1.10× [1.08–1.12], faster"."""
    return f"{step.median:.2f}× [{step.low:.2f}–{step.high:.2f}], {verdict(step)}"


def chapter_numbered(number: str, names: list[str]) -> str | None:
    """The chapter NN among a run's row names ("24" finds k24_sleeping_producer), or None."""
    return next((name for name in names if name.startswith(f"k{number}_")), None)


def step_text(run: Run, name: str) -> str:
    """A chapter's step over the previous one with its range and verdict (ratio_text)."""
    step = steps(run).get(name)
    if step is None:
        return ""
    if run.rounds < 2:
        return f"{step.median:.2f}×"
    return ratio_text(step)


def rounds_words(run: Run, *others: Run) -> str:
    """How the numbers of a snippet were summarised: its run's rounds, or each run's where they differ."""
    counts = sorted({r.rounds for r in (run, *others)})
    if len(counts) > 1:
        return f"median over each run's rounds, {', '.join(map(str, counts[:-1]))} or {counts[-1]} [min–max]"
    return f"median over {run.rounds} rounds [min–max]" if run.rounds > 1 else "one round, so no spread"


def chapter_lines(headline: Run) -> str:
    """One line per chapter folder: its page (if written), title and measured step at the headline shape."""
    from kernels.chapters import chapters

    measured = {row.name: row for row in headline.rows if row.kind == "chapter"}
    reference = reference_row(headline)
    lines = [
        "0. [Building blocks](00_building_blocks.md): arithmetic intensity, the online softmax, mma "
        "fragments, thread maps, ldmatrix, banks; and [what bounds the headline shape](roofline.md): the "
        "tensor cores, L2 and DRAM, measured"
    ]
    for chapter in chapters():
        page = DOCS / f"{chapter.number:02d}_{chapter.slug}.md"
        name = f"[{chapter.name}]({page.name})" if page.exists() else f"{chapter.name} (page to come)"
        row = measured.get(chapter.name)
        if row is None:
            numbers = "not in results/headline.json"
        else:
            step = steps(headline).get(row.name)
            numbers = f"{row.tflops:.1f} TFLOP/s"
            if reference is not None:
                numbers += f", {pct_of_reference(row, reference).median:.0f}% of FA2"
            if step is not None:
                noise = " (within noise)" if headline.rounds > 1 and step.within_noise else ""
                numbers += f", {step.median:.2f}× the previous{noise}"
        lines.append(f"{chapter.number}. {name}: {chapter.title} ({numbers})")
    return "\n".join(lines)


# --- the snippets in the chapter pages: one generator per kind -----------------------------------------------


def saved_run(path: Path) -> Run:
    """The first run of a results file, or MissingResults naming it."""
    if not path.exists():
        raise MissingResults(f"no {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} yet")
    return load_runs(path)[0]


def step_snippet(number: str, results: Path) -> str:
    """Chapter N and the chapter before it, headline and causal: median TFLOP/s [min–max], % of FA2, the step."""
    runs = {"headline": saved_run(results / "headline.json"), "causal": saved_run(results / "causal.json")}
    headline_rows = [row.name for row in runs["headline"].rows if row.kind == "chapter"]
    name = chapter_numbered(number, headline_rows)
    if name is None or headline_rows.index(name) == 0:
        raise MissingResults(f"chapter {int(number)} or the one before it is not in results/headline.json")
    names = headline_rows[headline_rows.index(name) - 1 : headline_rows.index(name) + 1]
    lines = []
    for row_name in names:
        cells = [row_name]
        for run in runs.values():
            row = next((r for r in run.rows if r.name == row_name), None)
            if row is None:
                raise MissingResults(f"{row_name} is not in every saved run")
            reference = reference_row(run)
            cells += [
                format_spread(row.tflops_spread, run.rounds),
                "" if reference is None else f"{pct_of_reference(row, reference).median:.1f}%",
                step_text(run, row_name) if row_name == name else "",
            ]
        lines.append(cells)
    headers = ["", "TFLOP/s", "% of FA2", "step", "causal: TFLOP/s", "% of FA2", "step"]
    run = runs["headline"]
    sources = " and ".join(f"`{run.environment.get('command', '?')}`" for run in runs.values())
    return (
        f"{markdown(headers, lines)}\n\n{shape_title(run.shape)} on {run.environment.get('device', '?')}: "
        f"{rounds_words(run)}; % of FA2 and the step are medians of per-round ratios, a step within noise when "
        f"its range includes 1.00. From results/headline.json and results/causal.json ({sources})."
    )


def decode_snippet(number: str, results: Path) -> str:
    """Chapter N and the chapter before it at each decode shape: median GB/s [min–max], the step, and cuDNN's GB/s."""
    # decode.json, or a later run of the chapters after it (decode_kNN.json): the first that holds chapter N.
    for path in [results / DECODE_FILE, *sorted(results.glob(DECODE_LATER_FILES))]:
        runs = load_runs(path)
        rows = [row.name for row in runs[0].rows if row.kind == "chapter"]
        name = chapter_numbered(number, rows)
        if name is not None and rows.index(name) > 0:
            break
    else:
        raise MissingResults(f"chapter {int(number)} or the one before it is in no results/decode*.json")
    before = rows[rows.index(name) - 1]
    lines = []
    for run in runs:
        by_name = {row.name: row for row in run.rows}
        cudnn = by_name.get(CUDNN)
        if before not in by_name or name not in by_name or cudnn is None:
            raise MissingResults(f"a run of results/{path.name} lacks {before}, {name} or {CUDNN}")
        shape = run.shape
        ratio = ratio_spread(cudnn.round_ms, by_name[name].round_ms)
        lines.append(
            [
                f"{shape['batch']} × {shape['kv_len']:,}, {shape['heads']}/{shape['kv_heads']}",
                format_spread(run.gbps_spread(by_name[before]), run.rounds, 0),
                format_spread(run.gbps_spread(by_name[name]), run.rounds, 0),
                step_text(run, name),
                format_spread(run.gbps_spread(cudnn), run.rounds, 0),
                format_spread(ratio, run.rounds, 2, "×"),
            ]
        )
    headers = ["batch × keys, heads/KV heads", f"{before} GB/s", f"{name} GB/s", "step", "cuDNN GB/s", "÷ cuDNN"]
    run = runs[0]
    return (
        f"{markdown(headers, lines)}\n\nOne query row per sequence, head_dim 128, bf16, on "
        f"{run.environment.get('device', '?')}: {rounds_words(run)}; GB/s count the fewest bytes a call must move; the "
        f"step and ÷ cuDNN are medians of per-round ratios. From results/{path.name} "
        f"(`{run.environment.get('command', '?')}`)."
    )


def shape_label(shape: dict) -> str:
    """A row's shape in a snippet across shapes: "16 × 4,096", ", causal" where it is."""
    return f"{shape['batch']} × {shape['seq_len']:,}{', causal' if shape['causal'] else ''}"


def chapter_runs(name: str, results: Path) -> tuple[Path, list[Run], list[str]]:
    """results/NAME.json, its runs and the chapters they time, in order; MissingResults if there is no such file."""
    path = results / f"{name}.json"
    if not path.exists():
        raise MissingResults(f"no results/{path.name} yet")
    runs = load_runs(path)
    return path, runs, [row.name for row in runs[0].rows if row.kind == "chapter"]


def runs_snippet(name: str, results: Path) -> str:
    """Every run of results/NAME.json, one row per shape: each chapter's TFLOP/s [min–max], the step of the shown
    chapter over the one before it, cuDNN's TFLOP/s, and where the runs have FlashAttention-4, its TFLOP/s and the
    shown chapter's rate over its rate. The shown chapter is the last, or chapter NN for NAME-NN (runs-fa4_k26-24)."""
    name, _, number = name.partition("-")
    path, runs, names = chapter_runs(name, results)
    if len(names) < 2:
        raise MissingResults(f"results/{path.name} holds fewer than two chapters")
    shown = chapter_numbered(number, names) if number else names[-1]
    if shown is None or shown == names[0]:
        raise MissingResults(f"results/{path.name} holds no chapter {number} after its first")
    before = names[names.index(shown) - 1]
    # FlashAttention-4's row, where every run has one: its rate, and the shown chapter's per-round ratio to it.
    with_fa4 = all(any(row.name == FA4 for row in run.rows) for run in runs)
    lines = []
    for run in runs:
        by_name = {row.name: row for row in run.rows}
        if any(n not in by_name for n in [*names, CUDNN]):
            raise MissingResults(f"a run of results/{path.name} lacks one of {', '.join(names)} or {CUDNN}")
        cells = [
            shape_label(run.shape),
            *(format_spread(by_name[n].tflops_spread, run.rounds) for n in names),
            step_text(run, shown),
            format_spread(by_name[CUDNN].tflops_spread, run.rounds),
        ]
        if with_fa4:
            ratio = ratio_spread(by_name[FA4].round_ms, by_name[shown].round_ms)
            cells += [format_spread(by_name[FA4].tflops_spread, run.rounds), format_spread(ratio, run.rounds, 2, "×")]
        lines.append(cells)
    headers = ["batch × seq_len", *(f"{n} TFLOP/s" for n in names), "step", "cuDNN TFLOP/s"]
    headers += ["FA4 TFLOP/s", f"{shown} ÷ FA4"] if with_fa4 else []
    run = runs[0]
    fa4_words = f", and so is {shown} ÷ FA4 (FlashAttention-4)" if with_fa4 else ""
    return (
        f"{markdown(headers, lines)}\n\nHeads {run.shape['heads']}, head_dim {run.shape['head_dim']}, "
        f"{run.shape['dtype']}, on {run.environment.get('device', '?')}: {rounds_words(*runs)}; the step is "
        f"{shown} over {before}, the median of per-round ratios{fa4_words}. From results/{path.name} "
        f"(`scripts/record_results.sh {path.name}`, which runs each shape in turn)."
    )


# The four shapes at which chapters are timed beside FlashAttention-4, as shape_label writes them.
FA4_SHAPES = ("16 × 4,096", "16 × 4,096, causal", "64 × 1,024", "4 × 16,384")


def card(run: Run) -> str:
    """The GPU a run ran on, short: "H100 80GB HBM3" for "NVIDIA H100 80GB HBM3 (132 SMs)"."""
    return re.sub(r"^NVIDIA |\s*\(\d+ SMs\)$", "", run.environment.get("device", "?"))


def beside_fa4_snippet(_: str, results: Path) -> str:
    """One row per results file that times chapters beside FlashAttention-4 at the four FA4_SHAPES: its last
    chapter's rate over FlashAttention-4's at each, the median of per-round ratios [min–max], and the GPU."""
    found, shapes = [], []
    for path in sorted(results.glob("*.json")):
        try:
            runs = load_runs(path)
        except ValueError:
            continue  # not runs: a profile, the ceilings
        by_shape = {shape_label(run.shape): run for run in runs}
        if sorted(by_shape) != sorted(FA4_SHAPES) or len(runs) != len(FA4_SHAPES) or runs[0].grid is not None:
            continue
        if not all(any(row.name == FA4 for row in run.rows) for run in runs):
            continue
        shown = [row.name for row in runs[0].rows if row.kind == "chapter"][-1]
        cells = []
        for shape in FA4_SHAPES:
            run = by_shape[shape]
            rows = {row.name: row for row in run.rows}
            cells.append(format_spread(ratio_spread(rows[FA4].round_ms, rows[shown].round_ms), run.rounds, 2, "×"))
        found.append((shown, path.name, [shown, card(runs[0]), *cells, f"`{path.name}`"]))
        shapes += [run.shape for run in runs]
    if not found:
        raise MissingResults("no results file times a chapter beside FlashAttention-4 at the four shapes")
    lines = [cells for _, _, cells in sorted(found, key=lambda item: item[:2])]
    (heads, head_dim, dtype), *others = {(s["heads"], s["head_dim"], s["dtype"]) for s in shapes}
    if others:
        raise MissingResults("the runs beside FlashAttention-4 differ in heads, head_dim or dtype")
    return (
        f"{markdown(['chapter', 'GPU', *FA4_SHAPES, 'file'], lines)}\n\nEach row: the last chapter of one run, its "
        f"rate over FlashAttention-4's at each shape (batch × seq_len; heads {heads}, head_dim {head_dim}, {dtype}), "
        "the median of per-round ratios [min–max], from the results file named (`scripts/record_results.sh FILE` "
        "runs it again)."
    )


def cycles(row: Row) -> list[float]:
    """Each round's time in SM cycles, up to a constant: its ms times the MHz the SM held while it ran."""
    return [ms * reading.sm_mhz for ms, reading in zip(row.round_ms, row.clocks, strict=True)]


def rate_at_clock(row: Row) -> str:
    """ "589.7 at 1680": the row's median TFLOP/s at the median SM clock, in MHz, that it held."""
    return f"{row.tflops_spread.median:.1f} at {median(reading.sm_mhz for reading in row.clocks):.0f}"


def clocks_snippet(name: str, results: Path) -> str:
    """Every run of results/NAME.json, timed with --clocks, one row per shape: each chapter's, cuDNN's and
    FlashAttention-4's TFLOP/s at the SM clock it held, and FlashAttention-4's work per clock cycle over the last
    chapter's (per round: FlashAttention-4's TFLOP/s over the chapter's, times the chapter's MHz over its own)."""
    path, runs, names = chapter_runs(name, results)
    shown = [*names, CUDNN, FA4]
    lines = []
    for run in runs:
        by_name = {row.name: row for row in run.rows}
        if any(n not in by_name or not by_name[n].clocks for n in shown):
            raise MissingResults(f"a run of results/{path.name} lacks clocks for one of {', '.join(shown)}")
        last, fa4 = by_name[names[-1]], by_name[FA4]
        per_cycle = ratio_spread(cycles(last), cycles(fa4))
        lines.append(
            [
                shape_label(run.shape),
                *(rate_at_clock(by_name[n]) for n in shown),
                format_spread(per_cycle, run.rounds, 2, "×"),
            ]
        )
    headers = ["batch × seq_len", *names, "cuDNN", "FA4", f"FA4 ÷ {names[-1]}, per cycle"]
    run = runs[0]
    return (
        f"{markdown(headers, lines)}\n\nTFLOP/s at the SM clock in MHz, medians over {run.rounds} rounds; heads "
        f"{run.shape['heads']}, head_dim {run.shape['head_dim']}, {run.shape['dtype']}, on "
        f"{run.environment.get('device', '?')}. Per cycle: the median of per-round ratios of TFLOP/s per MHz "
        f"[min–max]. From results/{path.name} (`scripts/record_results.sh {path.name}`, which runs each shape in turn)."
    )


def ablation_snippet(name: str, results: Path, *, with_steps: bool = False) -> str:
    """An ablation set's grid of median TFLOP/s [min–max] for each run of its file (``ablation_NAME.json``), the
    shape and the command that measured it; ``with_steps``, each cell's speed-up over its row's chapter too."""
    path = results / f"ablation_{name}.json"
    if not path.exists():
        raise MissingResults(f"no results/{path.name} yet")
    runs, parts = load_runs(path), []
    for run in runs:
        if run.grid is None:
            raise MissingResults(f"{path.name} holds no ablation grid")
        by_name = {row.name: row for row in run.rows}
        grid = run.grid
        # Each cell over the ladder chapter of its row; a row without one, over the grid's first cell.
        speedups = []
        for r in grid.rows if with_steps else ():
            row = [grid.cells[(r, c)] for c in grid.columns]
            chapters = [name for name in row if by_name[name].kind == "chapter"]
            base = chapters[0] if chapters else grid.cells[(grid.rows[0], grid.columns[0])]
            for cell in (name for name in row if name != base):
                speedups.append(
                    f"{cell} ÷ {base} {ratio_text(ratio_spread(by_name[base].round_ms, by_name[cell].round_ms))}"
                )
        parts.append(
            f"{markdown_grid(run)}\n\n{grid.title}: {shape_title(run.shape)}"
            f" on {run.environment.get('device', '?')}, {'GB/s' if memory_bound(run) else 'TFLOP/s'} as the"
            f" {rounds_words(run)}."
            + (f" Speed-ups, the median of per-round ratios: {'; '.join(speedups)}." if speedups else "")
        )
    commands = {run.environment.get("command", "?") for run in runs}
    if len(commands) > 1:
        return (
            "\n\n".join(parts)
            + f"\n\nFrom results/{path.name} (`scripts/record_results.sh {path.name}`, one run per shape)."
        )
    return "\n\n".join(parts) + f" From results/{path.name} (`{commands.pop()}`)."


def ablation_steps_snippet(name: str, results: Path) -> str:
    """An ablation set's grids with each cell's speed-up over its row's chapter."""
    return ablation_snippet(name, results, with_steps=True)


SNIPPETS: dict[re.Pattern, Callable[[str, Path], str]] = {
    re.compile(r"step-(\d\d)"): step_snippet,
    re.compile(r"decode-(\d\d)"): decode_snippet,
    re.compile(r"ablation-(ch\d\d\w*)"): ablation_snippet,
    re.compile(r"ablation-steps-(ch\d\d\w*)"): ablation_steps_snippet,
    re.compile(r"runs-(\w+(?:-\d\d)?)"): runs_snippet,
    re.compile(r"clocks-(\w+)"): clocks_snippet,
    re.compile(r"(beside-fa4)"): beside_fa4_snippet,
    re.compile(r"timeline-warps-(\w+)"): timeline_warps_snippet,
    re.compile(r"timeline-(\w+)"): timeline_snippet,
}


def snippet(name: str, results: Path) -> str:
    """The body of one snippet, by its marker's NAME."""
    for pattern, generator in SNIPPETS.items():
        match = pattern.fullmatch(name)
        if match:
            return generator(match.group(1), results)
    raise MissingResults(f"no generator for a snippet named {name!r}")


def fill_snippets(text: str, results: Path, where: str) -> str:
    """Every results snippet of a page regenerated; one whose results are missing stays, with a warning."""
    for name in SNIPPET.findall(text):
        start, end = f"<!-- results:{name}:start -->", f"<!-- results:{name}:end -->"
        i, j = text.find(start), text.find(end)
        if j < i:
            print(f"warning: {where}: {start} has no {end} after it; left as it was", file=sys.stderr)
            continue
        try:
            body = snippet(name, results)
        except (MissingResults, RunFileError) as why:
            print(f"warning: {where}: {name}: {why}; left as it was", file=sys.stderr)
            continue
        text = text[: i + len(start)] + "\n\n" + body + "\n\n" + text[j:]
    return text


def rewrite(path: Path, edit: Callable[[str], str], stub: str | None = None) -> None:
    """Apply ``edit`` to a file's text (creating it from ``stub`` if it does not exist yet); write it if changed."""
    text = path.read_text() if path.exists() else stub
    if text is None:
        raise SystemExit(f"{path} does not exist")
    edited = edit(text)
    if edited != text or not path.exists():
        path.write_text(edited)
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Regenerate docs/results.md, the tables in the READMEs and the results snippets in the pages."
    )
    parser.add_argument("--results", type=Path, default=ROOT / "results", help="folder with the saved runs")
    args = parser.parse_args()
    try:
        headline = load_runs(args.results / "headline.json")
        page = results_page(args.results)
    except (RunFileError, ValueError) as error:
        raise SystemExit(f"make_results.py: {error}") from None

    rewrite(DOCS / "results.md", lambda _: page, "")
    readme = ROOT / "README.md"
    rewrite(
        readme,
        lambda text: fill_snippets(
            replace_between(text, LADDER_MARKERS, ladder_block(headline[0], args.results), readme),
            args.results,
            readme.name,
        ),
        README_STUB.format(start=LADDER_MARKERS[0], end=LADDER_MARKERS[1]),
    )
    reading = DOCS / "README.md"
    rewrite(reading, lambda text: replace_between(text, CHAPTER_MARKERS, chapter_lines(headline[0]), reading))
    for page in sorted(DOCS.glob("*.md")):
        rewrite(page, lambda text, page=page: fill_snippets(text, args.results, page.name))


if __name__ == "__main__":
    main()
