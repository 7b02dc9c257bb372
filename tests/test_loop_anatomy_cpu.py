"""The loop anatomy tool (`python -m kernels.tools.loop_anatomy`) on chapters' SASS, without a GPU."""

import pytest

from kernels.tools.loop_anatomy import (
    PRODUCTS_PER_TILE,
    event_order,
    main,
    steady_lines,
    tile_counts,
    tile_loop_lines,
)
from tests.helpers import CHAPTERS, sass_text

HOPPER = {c.number: c for c in CHAPTERS if c.number >= 14}


@pytest.fixture(scope="module")
def loop19():
    return tile_loop_lines(sass_text(HOPPER[19]), PRODUCTS_PER_TILE)


def test_the_steady_path_leaves_out_the_mask_a_full_tile_jumps_over(loop19):
    """The masking block (an FSEL per score of the thread's 64) is in the loop, under a branch a tile that needs
    no mask takes; the steady path keeps both products and every exponential."""
    loop, steady = tile_counts(loop19), tile_counts(steady_lines(loop19))
    assert loop["FSEL / ISETP (masks)"] >= 64 > steady["FSEL / ISETP (masks)"]
    for row in ("HGMMA (wgmma)", "MUFU.EX2 (exp2)", "FFMA", "F2FP (to bf16)"):
        assert steady[row] == loop[row] > 0, row
    assert steady["total"] < loop["total"]
    assert sum(n for row, n in loop.items() if row != "total") == loop["total"]


def test_the_order_shows_both_products_before_the_waits_and_the_exponentials_after(loop19):
    """Chapter 19 issues S of the next tile and P V of this one together (16 wgmma), waits for S with P V in
    flight, then for P V; its exponentials come after the second wait but a few (ptxas hoists that wait)."""
    order = event_order(steady_lines(loop19))
    assert order.startswith("mbarrier wait×2 → HGMMA×16 → wait(≤1)")
    after_second_wait = order.split("wait(≤0)", 1)[1]
    assert after_second_wait.count("MUFU.EX2") >= 1 and "HGMMA" not in after_second_wait


def test_the_command_prints_the_table_and_the_order(capsys):
    main(["19"])
    out = capsys.readouterr().out
    assert "# sources: " in out and "k19_dynamic_schedule: steady" in out
    assert "k19_dynamic_schedule, steady path: mbarrier wait" in out


def test_the_command_takes_an_ablation_variant_by_name(capsys):
    """A variant is named as its folder is (k19_lean); its source is recorded under its path in docs/ablations."""
    main(["k19_lean"])
    out = capsys.readouterr().out
    assert '"docs/ablations/ch19_dynamic_schedule/k19_lean/flash_attention.cu": "sha256:' in out
    assert "k19_lean: steady" in out
