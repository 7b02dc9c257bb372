"""The roofline with two memory levels (roofline.png, page 0): the ceilings measured in results/peak.json, and each
chapter of results/headline.json at its arithmetic intensity against L2 and against DRAM."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt

from kernels import chapters
from reference import attention_bytes, attention_flops

from .runs import first_run
from .style import save


def l2_bytes(shape: dict, block_q: int) -> int:
    """Bytes all blocks ask of L2: each reads its Q tile and all of its head's K and V, and writes its O tile."""
    tensor_row = shape["head_dim"] * 2  # one 16-bit row of Q, K, V or O
    blocks = shape["batch"] * shape["heads"] * ((shape["seq_len"] + block_q - 1) // block_q)
    return blocks * (2 * block_q * tensor_row + 2 * shape["seq_len"] * tensor_row)


def dram_bytes(shape: dict) -> float:
    """The compulsory bytes: Q, K and V read once, O written once (16-bit elements)."""
    return attention_bytes(shape["batch"], shape["seq_len"], shape["heads"], shape["head_dim"], element_bytes=2)


def figure_roofline(path: Path, peak_file: Path, run_file: Path) -> None:
    """Each chapter at its L2 arithmetic intensity against the L2, DRAM and tensor-core ceilings; needs peak.json."""
    if not peak_file.exists():
        print(f"skipped {path}: no {peak_file} yet (python runner.py peak --json results/peak.json writes it)")
        return
    peak, run = json.loads(peak_file.read_text()), first_run(run_file)
    if peak["environment"]["device"] != run.environment["device"]:
        print(
            f"skipped {path}: {peak_file} is from {peak['environment']['device']}, {run_file} from "
            f"{run.environment['device']}"
        )
        return
    shape = run.shape
    flops = attention_flops(shape["batch"], shape["seq_len"], shape["heads"], shape["head_dim"])
    ceilings = {family: ceiling["tflops"] for family, ceiling in peak["ceilings"].items()}
    dram_tbps, l2_tbps = peak["memory"]["dram copy"]["tbps"], peak["memory"]["l2 read"]["tbps"]

    fig, ax = plt.subplots(figsize=(13.5, 7.4), layout="constrained")
    intensity = [2 ** (i / 8) for i in range(4 * 8, 13 * 8 + 1)]  # 16 ... 8192 FLOP per byte
    ax.plot(intensity, [l2_tbps * x for x in intensity], color="#4c72b0", label=f"L2: {l2_tbps:.2f} TB/s")
    ax.plot(intensity, [dram_tbps * x for x in intensity], color="#8c8c8c", label=f"DRAM: {dram_tbps:.2f} TB/s")
    for (family, tflops), style in zip(ceilings.items(), ("--", "-."), strict=False):
        ax.axhline(tflops, color="black", linestyle=style, linewidth=1.2, label=f"{family}: {tflops:.0f} TFLOP/s")
    dram_intensity = flops / dram_bytes(shape)
    ax.axvline(dram_intensity, color="#8c8c8c", linestyle=":", linewidth=1.2)
    ax.text(
        dram_intensity * 0.93,
        1.5 * max(ceilings.values()),
        f"against DRAM every chapter does\n{dram_intensity:.0f} FLOP per byte (hollow)",
        ha="right",
        va="top",
        fontsize=9,
        color="#555555",
    )

    by_name = {chapter.name: chapter for chapter in chapters()}
    bounds: dict[tuple[str, int], list[str]] = {}
    for index, row in enumerate(r for r in run.rows if r.kind == "chapter"):
        chapter = by_name[row.name]
        block_q = chapter.kernel.block_q
        family = "wgmma" if "wgmma.mma_async" in chapter.source.read_text() else "mma.sync"
        style = {
            "marker": "os^vD<>ph"[index % 9],
            "markersize": 8,
            "linestyle": "none",
            "color": plt.get_cmap("tab10")(index % 10),
        }
        ax.plot(flops / l2_bytes(shape, block_q), row.tflops, label=f"{row.name}: {row.tflops:.0f}", **style)
        ax.plot(dram_intensity, row.tflops, markerfacecolor="none", **style)
        bounds.setdefault((family, block_q), []).append(row.name[:3])

    lines = ["fastest possible time at this shape (ms): max(math, L2, DRAM)"]
    for (family, block_q), names in bounds.items():
        if family not in ceilings:
            continue
        terms = (
            flops / ceilings[family] / 1e9,
            l2_bytes(shape, block_q) / l2_tbps / 1e9,
            dram_bytes(shape) / dram_tbps / 1e9,
        )
        lines.append(
            f"{family}, BLOCK_Q {block_q} ({', '.join(names)}): math {terms[0]:.2f}, L2 {terms[1]:.2f}, "
            f"DRAM {terms[2]:.2f} -> {max(terms):.2f}"
        )
    ax.text(
        0.99,
        0.02,
        "\n".join(lines),
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        fontsize=9,
        bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9, "edgecolor": "#cccccc"},
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(intensity[0], intensity[-1])
    ax.set_xticks([2**i for i in range(4, 14)], [str(2**i) for i in range(4, 14)])
    ax.set_ylim(10, 2 * max(ceilings.values()))
    ax.set_xlabel("FLOP per byte moved; filled: per byte the blocks ask of L2 (BLOCK_Q, almost exactly)")
    ax.set_ylabel("TFLOP/s")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, borderaxespad=0)  # beside: over no marker
    ax.set_title(
        f"Roofline with two memory levels, {shape['batch']} x {shape['seq_len']} x {shape['heads']} heads x "
        f"{shape['head_dim']}, {shape['dtype']} on {run.environment['device']}\n"
        f"ceilings from {peak_file.name}, chapters from {run_file.name}",
        fontsize=11,
    )
    save(fig, path)
