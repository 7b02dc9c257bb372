"""docs/make_results.py fills the results snippets of a page from saved runs, and leaves the rest alone."""

import json
import sys
from pathlib import Path

import pytest

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
GRID = {"name": "ch03_ldmatrix", "title": "loads against layouts", "rows": ["per-lane loads", "ldmatrix"],
        "columns": ["256-byte rows"], "cells": [["per-lane loads", "256-byte rows", "k02_cp_async"],
                                                ["ldmatrix", "256-byte rows", "k03_ldmatrix"]]}


def saved(path: Path, causal: bool, round_ms: dict[str, list[float]], grid: dict | None = None) -> None:
    """A new-format file: one run whose rows have these per-round medians (one repeat each)."""
    rows = [{"name": name, "kind": "reference" if name.startswith("torch") else "chapter", "family": None,
             "max_abs": 1e-3, "rel_l2": 2e-3, "ok": None, "samples_ms": [[ms] for ms in times]}
            for name, times in round_ms.items()]
    rounds = len(next(iter(round_ms.values())))
    shape = {"batch": 1, "seq_len": 64, "heads": 1, "head_dim": 128, "dtype": "bf16", "causal": causal}
    run = {"shape": shape, "environment": {"device": "Test GPU", "command": f"python runner.py --json {path.name}"},
           "flops": 1e12, "order": [rotated(list(round_ms), i) for i in range(rounds)], "rows": rows}
    path.write_text(json.dumps([{**run, "grid": grid} if grid else run]))


@pytest.fixture
def results(tmp_path):
    times = {"torch FA2": [1.0, 1.0, 1.0], "k01_naive": [8.0, 8.0, 8.0], "k02_cp_async": [4.0, 4.0, 4.4],
             "k03_ldmatrix": [4.0, 4.2, 4.2]}
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

