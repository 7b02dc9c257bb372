"""docs/make_results.py fills the results snippets of a page from saved runs, and leaves the rest alone."""

import json
import re
import sys
from pathlib import Path

import pytest

from kernels.tools.peak import PeakRun, save_peak
from kernels.tools.stats import rotated

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
import make_results  # noqa: E402

PAGE = """# Chapter 3

Prose before.

<!-- results:step-03:start -->
an old table
<!-- results:step-03:end -->

<!-- outcome -->
Prose between.

<!-- results:ablation-ch03:start -->
<!-- results:ablation-ch03:end -->

Prose after.
"""
GRID = {
    "name": "ch03_ldmatrix",
    "title": "loads against layouts",
    "rows": ["per-lane loads", "ldmatrix"],
    "columns": ["256-byte rows"],
    "cells": [["per-lane loads", "256-byte rows", "k02_cp_async"], ["ldmatrix", "256-byte rows", "k03_ldmatrix"]],
}


def saved(path: Path, causal: bool, round_ms: dict[str, list[float]], grid: dict | None = None) -> None:
    """A new-format file: one run whose rows have these per-round medians (one repeat each)."""
    rows = [
        {
            "name": name,
            "kind": "reference" if name.startswith("torch") else "chapter",
            "family": None,
            "max_abs": 1e-3,
            "rel_l2": 2e-3,
            "ok": None,
            "samples_ms": [[ms] for ms in times],
        }
        for name, times in round_ms.items()
    ]
    rounds = len(next(iter(round_ms.values())))
    shape = {"batch": 1, "seq_len": 64, "heads": 1, "head_dim": 128, "dtype": "bf16", "causal": causal}
    run = {
        "shape": shape,
        "environment": {"device": "Test GPU", "command": f"python runner.py --json {path.name}"},
        "flops": 1e12,
        "order": [rotated(list(round_ms), i) for i in range(rounds)],
        "rows": rows,
    }
    path.write_text(json.dumps([{**run, "grid": grid} if grid else run]))


@pytest.fixture
def results(tmp_path):
    times = {
        "torch FA2": [1.0, 1.0, 1.0],
        "k01_naive": [8.0, 8.0, 8.0],
        "k02_cp_async": [4.0, 4.0, 4.4],
        "k03_ldmatrix": [4.0, 4.2, 4.2],
    }
    saved(tmp_path / "headline.json", False, times)
    saved(tmp_path / "causal.json", True, {**times, "k03_ldmatrix": [3.6, 3.6, 3.8]})
    saved(tmp_path / "ablation_ch03.json", False, times, GRID)
    return tmp_path


def between(text: str, name: str) -> str:
    return text.split(f"<!-- results:{name}:start -->")[1].split(f"<!-- results:{name}:end -->")[0]


def test_step_snippet_has_both_chapters_and_the_verdicts(results):
    body = between(make_results.fill_snippets(PAGE, results, "page.md"), "step-03")
    lines = [line for line in body.splitlines() if line.startswith("| k0")]
    assert [line.split("|")[1].strip() for line in lines] == ["k02_cp_async", "k03_ldmatrix"]
    assert "1.00× [0.95–1.05], within noise" in lines[1]  # headline: per-round 1.00, 0.95, 1.05
    assert "1.11× [1.11–1.16], faster" in lines[1]  # causal: 4.0/3.6, 4.0/3.6, 4.4/3.8
    assert "results/headline.json and results/causal.json" in body and "an old table" not in body


def test_ablation_snippet_is_the_grid_with_its_command(results):
    body = between(make_results.fill_snippets(PAGE, results, "page.md"), "ablation-ch03")
    assert "| per-lane loads | 250.0 [227.3–250.0] (k02_cp_async)" in body
    assert "`python runner.py --json ablation_ch03.json`" in body


def test_the_rest_of_the_page_is_untouched_and_a_second_pass_changes_nothing(results):
    once = make_results.fill_snippets(PAGE, results, "page.md")
    outside = [part.split("-->", 1)[-1] for part in once.split("<!-- results:")]
    assert "Prose before." in once and "<!-- outcome -->\nProse between." in once and once.endswith("Prose after.\n")
    assert len(outside) == len(PAGE.split("<!-- results:"))
    assert make_results.fill_snippets(once, results, "page.md") == once


def test_missing_results_leave_a_snippet_with_a_warning(results, capsys):
    (results / "causal.json").unlink()
    text = make_results.fill_snippets(PAGE, results, "page.md")
    assert between(text, "step-03") == between(PAGE, "step-03")
    assert "page.md: step-03: no " in capsys.readouterr().err
    assert "(k03_ldmatrix)" in between(text, "ablation-ch03")  # the other snippet is still filled


def test_an_unknown_snippet_is_left_with_a_warning(results, capsys):
    page = "<!-- results:chart-03:start -->\nkeep\n<!-- results:chart-03:end -->\n"
    assert make_results.fill_snippets(page, results, "page.md") == page
    assert "no generator for a snippet named 'chart-03'" in capsys.readouterr().err


def test_a_single_round_file_shows_no_spread(results):
    saved(results / "headline.json", False, {"torch FA2": [1.0], "k02_cp_async": [4.0], "k03_ldmatrix": [3.8]})
    body = between(make_results.fill_snippets(PAGE, results, "page.md"), "step-03")
    assert "| 1.05×" in body and "one round, so no spread" in body


# --- the decode section: results/decode.json when it exists ---------------------------------------------------

DECODE_SHAPE = {
    "batch": 4,
    "seq_len": 1,
    "heads": 8,
    "kv_heads": 2,
    "kv_len": 1024,
    "head_dim": 128,
    "dtype": "bf16",
    "causal": False,
}
DECODE_BYTES = 2 * (4 * 1 * 8 * 128) * 2 + 2 * (4 * 1024 * 2 * 128) * 2  # Q and O, then K and V, bf16


def decode_file(results: Path, device: str = "Test GPU") -> None:
    """results/decode.json: two decode shapes, each timed in two rounds (FA2 at 0.01 and 0.02 ms)."""
    from kernels.tools.runs import Row, Run, save_runs
    from reference import attention_flops

    runs = []
    for kv_len in (1024, 2048):
        shape = {**DECODE_SHAPE, "kv_len": kv_len}
        flops = attention_flops(4, 1, 8, 128, seq_len_k=kv_len)
        rows = [
            Row("torch FA2", "reference", [[0.01], [0.02]], 1e-4, 2e-3, flops),
            Row("k08_kv128", "chapter", [[0.04], [0.04]], 1e-4, 2e-3, flops, ok=True, family="mma.sync"),
        ]
        environment = {"device": device, "command": "python runner.py decode --json results/decode.json"}
        runs.append(Run(shape, environment, flops, rows, [["torch FA2", "k08_kv128"]] * 2))
    save_runs(runs, results / "decode.json")


def page(results: Path) -> str:
    return make_results.results_page(results)


def test_without_decode_json_the_page_has_no_decode_section(results):
    assert "Decoding" not in page(results) and "GB/s" not in page(results)


def test_decode_json_is_its_own_section_in_gb_per_s(results):
    decode_file(results)
    peak = PeakRun(
        {"device": "Test GPU", "command": "python runner.py peak"}, {"mma.sync": [500.0], "dram copy": [2.0]}
    )
    save_peak(peak, results / "peak.json")
    text = page(results)
    section = text.split("## Decoding: one query row against a KV cache (`results/decode.json`)\n")[1].split("\n## ")[0]
    assert "bottom-right causal mask hides no key" in section
    assert "**batch 4, seq_len 1, heads 8, kv_heads 2, kv_len 1024, head_dim 128, bf16** on Test GPU" in section
    assert "kv_len 2048" in section
    fa2 = next(line for line in section.splitlines() if line.startswith("| torch FA2"))
    gbps = [DECODE_BYTES / (ms * 1e-3) / 1e9 for ms in (0.01, 0.02)]  # each round's bytes over its time
    median = (gbps[0] + gbps[1]) / 2
    assert f"| {median:.0f} [{gbps[1]:.0f}–{gbps[0]:.0f}]" in fa2 and f"| {median / 2000 * 100:.1f}%" in fa2
    assert section.count("- command: `python runner.py decode --json results/decode.json`") == 1
    assert text.index("## Decoding") > text.index("## Causal")
    ceilings = text.split("## Ceilings: the tensor-core rates, L2 and DRAM (`results/peak.json`)\n")[1]
    assert "| dram copy | 2.00     | 2.00 - 2.00" in ceilings and "- command: `python runner.py peak`" in ceilings


def test_decode_section_without_a_dram_ceiling_says_why(results):
    decode_file(results, device="Another GPU")
    section = page(results).split("## Decoding")[1].split("\n## ")[0]
    headers = [line for line in section.splitlines() if line.startswith("|  ")]
    assert len(headers) == 2 and all("| GB/s" in line and "% of DRAM" not in line for line in headers)
    assert f"% of DRAM: left out, no {results / 'peak.json'}" in section


# --- every file in results/ on the page, once ---------------------------------------------------------------


def sections(text: str, name: str) -> list[str]:
    """The page's headings and link lines that name results/NAME."""
    return [
        line
        for line in text.splitlines()
        if (line.startswith("## ") and line.endswith(f"(`results/{name}`)"))
        or line.startswith(f"- [`results/{name}`](../results/{name}):")
    ]


def test_every_file_in_results_is_rendered_or_linked_by_the_results_page():
    text = (ROOT / "docs" / "results.md").read_text()
    for path in sorted((ROOT / "results").iterdir()):
        assert len(sections(text, path.name)) == 1, f"docs/results.md does not show results/{path.name} once"


def profile_file(results: Path) -> None:
    """results/profile_k03_fa2.json as `runner.py profile --json` saves it: two targets, a duration each."""
    readings = {"gpu__time_duration.sum": {"value": 2_000_000.0, "unit": "nsecond"}}
    profiles = [
        {
            "target": name,
            "kernel": "k",
            "block": "(128, 1, 1)",
            "grid": "(1, 1, 1)",
            "readings": readings,
            "executed": {},
        }
        for name in ("k03_ldmatrix", "torch FA2")
    ]
    shape = {"batch": 1, "seq_len": 64, "heads": 1, "dtype": "bf16", "causal": False}
    record = {"shape": shape, "device": "Test GPU", "nvrtc": None, "command": "python runner.py profile 3 fa2"}
    (results / "profile_k03_fa2.json").write_text(json.dumps(record | {"profiles": profiles}))


def test_each_kind_of_file_is_on_the_page_once_in_order(results):
    profile_file(results)
    saved(results / "sweep_other.json", False, {"torch FA2": [1.0], "k03_ldmatrix": [2.0]})
    (results / "notes.txt").write_text("# what the notes hold\nmore\n")
    (results / "profile_k03_fa2.txt").write_text("the table\n")
    text = page(results)
    names = ["headline.json", "causal.json", "sweep_other.json", "ablation_ch03.json", "profile_k03_fa2.json"]
    names += ["notes.txt", "profile_k03_fa2.txt"]
    found = [sections(text, name) for name in names]
    assert all(len(lines) == 1 for lines in found), found
    assert [text.index(lines[0]) for lines in found] == sorted(text.index(lines[0]) for lines in found)
    assert "## Ablation: loads against layouts (`results/ablation_ch03.json`)" in text
    assert "**loads against layouts**" in text and "| per-lane loads | 250.0 [227.3–250.0] (k02_cp_async)" in text
    assert re.search(r"^\| duration +\| +2\.000 ms \| +2\.000 ms \|$", text, flags=re.MULTILINE)
    assert "## Nsight Compute: k03_ldmatrix, torch FA2 (`results/profile_k03_fa2.json`)" in text
    assert "- command: `python runner.py profile 3 fa2`" in text
    assert "](../results/notes.txt): what the notes hold" in text
    assert "](../results/profile_k03_fa2.txt): the table of `results/profile_k03_fa2.json`" in text


def test_runs_snippet_has_a_row_per_shape_with_the_last_step(tmp_path):
    """Each run of the file is one row: every chapter's TFLOP/s, the last chapter's step, cuDNN's TFLOP/s."""
    times = {"torch cuDNN": [2.0, 2.0, 2.0], "k02_cp_async": [4.0, 4.0, 4.0], "k03_ldmatrix": [2.0, 2.0, 4.0]}
    saved(tmp_path / "full.json", False, times)
    saved(tmp_path / "causal.json", True, {**times, "k03_ldmatrix": [8.0, 8.0, 8.0]})
    runs = [json.loads((tmp_path / name).read_text())[0] for name in ("full.json", "causal.json")]
    (tmp_path / "pair.json").write_text(json.dumps(runs))
    page = "<!-- results:runs-pair:start -->\n<!-- results:runs-pair:end -->\n"
    body = between(make_results.fill_snippets(page, tmp_path, "page.md"), "runs-pair")
    lines = [line for line in body.splitlines() if line.startswith("| 1 × 64")]
    assert len(lines) == 2 and ", causal" in lines[1] and ", causal" not in lines[0]
    assert "2.00× [1.00–2.00], within noise" in lines[0]  # per round 4/2, 4/2, 4/4: one round level
    assert "0.50× [0.50–0.50], slower" in lines[1]
    assert "k02_cp_async TFLOP/s" in body and "results/pair.json" in body


def test_runs_snippet_adds_flashattention4_and_the_ratio_to_it(tmp_path):
    """Where every run has FlashAttention-4, the snippet shows its rate and the last chapter's per-round ratio."""
    times = {
        "torch cuDNN": [2.0, 2.0],
        "flash-attn-4": [1.0, 2.0],
        "k02_cp_async": [4.0, 4.0],
        "k03_ldmatrix": [2.0, 2.0],
    }
    saved(tmp_path / "with_fa4.json", False, times)
    page = "<!-- results:runs-with_fa4:start -->\n<!-- results:runs-with_fa4:end -->\n"
    body = between(make_results.fill_snippets(page, tmp_path, "page.md"), "runs-with_fa4")
    assert "| FA4 TFLOP/s" in body and "k03_ldmatrix ÷ FA4" in body
    [line] = [line for line in body.splitlines() if line.startswith("| 1 × 64")]
    assert line.rstrip(" |").endswith("0.75× [0.50–1.00]")  # per round 1/2, 2/2


def four_shapes(path: Path, round_ms: dict[str, list[float]], shapes=make_results.FA4_SHAPES) -> None:
    """A file of one run per shape, each with these per-round medians: the shapes as shape_label names them."""
    runs = []
    for label in shapes:
        saved(path, "causal" in label, round_ms)
        [run] = json.loads(path.read_text())
        batch, seq_len = re.match(r"(\d+) × ([\d,]+\d)", label).groups()
        run["shape"].update(batch=int(batch), seq_len=int(seq_len.replace(",", "")), heads=16)
        runs.append(run)
    path.write_text(json.dumps(runs))


def test_beside_fa4_has_a_row_per_file_timed_at_the_four_shapes(tmp_path):
    """One row per file whose runs are the four shapes, each with FlashAttention-4: its last chapter's per-round
    ratio at each shape, ordered by chapter; a file at other shapes or without FlashAttention-4 is left out."""
    fa4 = {"torch cuDNN": [2.0, 2.0], "flash-attn-4": [1.0, 2.0]}
    four_shapes(tmp_path / "late.json", {**fa4, "k02_cp_async": [4.0, 4.0], "k03_ldmatrix": [2.0, 2.0]})
    four_shapes(tmp_path / "early.json", {**fa4, "k02_cp_async": [1.0, 1.0]})
    four_shapes(tmp_path / "no_fa4.json", {"torch cuDNN": [2.0, 2.0], "k03_ldmatrix": [2.0, 2.0]})
    four_shapes(tmp_path / "three.json", {**fa4, "k03_ldmatrix": [2.0, 2.0]}, make_results.FA4_SHAPES[:3])
    page = "<!-- results:beside-fa4:start -->\n<!-- results:beside-fa4:end -->\n"
    body = between(make_results.fill_snippets(page, tmp_path, "README.md"), "beside-fa4")
    rows = [line for line in body.splitlines() if line.startswith("| k0")]
    assert [row.split("|")[-2].strip() for row in rows] == ["`early.json`", "`late.json`"]
    assert rows[0].count("1.50× [1.00–2.00]") == 4  # per round 1/1, 2/1
    assert rows[1].count("0.75× [0.50–1.00]") == 4 and "| Test GPU " in rows[1]  # per round 1/2, 2/2
    assert "heads 16, head_dim 128, bf16" in body


def test_clocks_snippet_shows_each_rate_at_its_clock_and_the_work_per_cycle(tmp_path):
    """Each contender's TFLOP/s at the SM clock it held, and FlashAttention-4's work per cycle over the last
    chapter's, round by round: its time times its clock against the chapter's."""
    times = {
        "torch cuDNN": [2.0, 2.0],
        "flash-attn-4": [1.0, 1.0],
        "k02_cp_async": [4.0, 4.0],
        "k03_ldmatrix": [2.0, 2.0],
    }
    clocks = {"torch cuDNN": 1500.0, "flash-attn-4": 1500.0, "k02_cp_async": 1800.0, "k03_ldmatrix": [1800.0, 1500.0]}
    saved(tmp_path / "clocked.json", False, times)
    run = json.loads((tmp_path / "clocked.json").read_text())
    for row in run[0]["rows"]:
        mhz = clocks[row["name"]]
        row["clocks"] = [{"sm_mhz": m, "watts": 690.0} for m in (mhz if isinstance(mhz, list) else [mhz, mhz])]
    (tmp_path / "clocked.json").write_text(json.dumps(run))
    page = "<!-- results:clocks-clocked:start -->\n<!-- results:clocks-clocked:end -->\n"
    body = between(make_results.fill_snippets(page, tmp_path, "page.md"), "clocks-clocked")
    [line] = [line for line in body.splitlines() if line.startswith("| 1 × 64")]
    assert "| 500.0 at 1650 " in line and "| 1000.0 at 1500 " in line  # k03: 1 TFLOP in 2 ms; FA4 in 1 ms
    # Per round, k03's cycles over FA4's: 2 x 1800 / (1 x 1500) = 2.4, then 2 x 1500 / 1500 = 2.0.
    assert line.rstrip(" |").endswith("2.20× [2.00–2.40]") and "FA4 ÷ k03_ldmatrix, per cycle" in body


def test_clocks_snippet_without_clocks_is_left_with_a_warning(tmp_path, capsys):
    saved(tmp_path / "unclocked.json", False, {"torch cuDNN": [2.0], "flash-attn-4": [1.0], "k02_cp_async": [4.0]})
    page = "<!-- results:clocks-unclocked:start -->\nas it was\n<!-- results:clocks-unclocked:end -->\n"
    assert make_results.fill_snippets(page, tmp_path, "page.md") == page
    assert "lacks clocks" in capsys.readouterr().err


def timeline_file(path: Path) -> None:
    """results/timeline_x.json as `runner.py timeline --json` saves it: one kernel's summary."""
    summary = {
        "tiles": 10,
        "period": 2000.0,
        "phases": dict.fromkeys(
            [
                "waiting for K and V (and the turn)",
                "issuing S and P V",
                "until S has landed",
                "from S to the end of the softmax",
                "of which until P V has landed",
                "of which after P V has landed",
            ],
            100.0,
        ),
        "issue_spread": 12.0,
        "issue_lag": [0.0, 12.0, 3.0, 1.0],
        "in_flight": {"neither warpgroup": 0.125, "one warpgroup": 0.5, "both warpgroups": 0.375},
    }
    entry = {"name": "k03_ldmatrix", "summary": summary, "ms": 1.5, "stamped_ms": 1.6, "exponentials_between": [0, 0]}
    entry["landing_stamped"] = True
    shape = {"batch": 1, "seq_len": 64, "heads": 1, "dtype": "bf16", "causal": False}
    record = {"command": "python runner.py timeline 3", "device": "Test GPU", "sources": {}, "shape": shape}
    path.write_text(json.dumps(record | {"window": {}, "timelines": [entry]}))


def test_a_timeline_is_its_own_section_and_snippet(results):
    timeline_file(results / "timeline_x.json")
    text = page(results)
    assert len(sections(text, "timeline_x.json")) == 1
    assert "## The tile loop, stamped: k03_ldmatrix (`results/timeline_x.json`)" in text
    assert re.search(r"^\| products in flight: both warpgroups +\| +37\.5% \|$", text, flags=re.MULTILINE)
    snippet = make_results.snippet("timeline-x", results)
    assert "From results/timeline_x.json (`python runner.py timeline 3`)." in snippet and "2,000" in snippet
