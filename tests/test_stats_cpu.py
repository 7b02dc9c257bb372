"""The statistics of a run, on synthetic samples: rounds, per-round ratios, spreads and noise verdicts."""

import pytest

from kernels.tools.runs import Row, Run
from kernels.tools.stats import Spread, ratio_spread, rotated, round_medians, spread, verdict
from kernels.tools.tables import pct_of_reference, steps

FLOPS = 1e12  # 1 TFLOP per call: TFLOP/s is 1000 / ms


def row(name: str, kind: str, round_ms: list[float]) -> Row:
    """A row whose rounds have three repeats each, their median the given time."""
    return Row(name, kind, [[ms * 1.02, ms, ms * 0.99] for ms in round_ms], 1e-3, 2e-3, FLOPS)


def run_of(*rows: Row) -> Run:
    rounds = len(rows[0].samples_ms)
    order = [rotated([r.name for r in rows], i) for i in range(rounds)]
    return Run(
        {"batch": 1, "seq_len": 64, "heads": 1, "head_dim": 128, "dtype": "bf16", "causal": False},
        {"device": "Test GPU"},
        FLOPS,
        list(rows),
        order,
    )


def test_a_round_is_the_median_of_its_repeats():
    assert round_medians([[3.0, 1.0, 2.0], [5.0, 9.0, 4.0, 6.0]]) == [2.0, 5.5]


def test_spread_is_median_min_and_max():
    assert spread([4.0, 1.0, 3.0, 2.0, 10.0]) == Spread(3.0, 1.0, 10.0)
    with pytest.raises(ValueError):
        spread([])


def test_ratios_are_taken_round_by_round_before_the_median():
    # Both contenders slow down together in round 2; per round the ratio stays 2, the ratio of medians would not.
    fast, slow = [1.0, 3.0, 1.1], [2.0, 6.0, 2.2]
    assert ratio_spread(slow, fast) == Spread(2.0, 2.0, 2.0)
    with pytest.raises(ValueError, match="rounds"):
        ratio_spread([1.0, 2.0], [1.0])


def test_a_step_whose_range_includes_one_is_noise():
    assert Spread(1.01, 0.99, 1.03).within_noise and verdict(Spread(1.01, 0.99, 1.03)) == "within noise"
    assert not Spread(1.06, 1.04, 1.08).within_noise and verdict(Spread(1.06, 1.04, 1.08)) == "faster"
    assert verdict(Spread(0.95, 0.93, 0.98)) == "slower"


def test_the_order_rotates_so_every_contender_leads_once():
    names = ["a", "b", "c"]
    orders = [rotated(names, i) for i in range(4)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert rotated([], 3) == []


def test_tflops_per_round_then_the_median():
    chapter = row("k01_naive", "chapter", [2.0, 4.0, 5.0])
    assert chapter.round_ms == [2.0, 4.0, 5.0]
    assert chapter.tflops_spread == Spread(250.0, 200.0, 500.0)
    assert chapter.tflops == 250.0 and chapter.ms == 4.0


def test_steps_are_over_the_previous_chapter_and_skip_references_and_variants():
    run = run_of(
        row("torch FA2", "reference", [1.0, 1.0, 1.0]),
        row("k01_naive", "chapter", [4.0, 4.0, 4.4]),
        row("k01_variant", "variant", [1.0, 1.0, 1.0]),
        row("k02_cp_async", "chapter", [2.0, 4.4, 4.0]),
    )
    found = steps(run)
    assert list(found) == ["k02_cp_async"]
    assert found["k02_cp_async"] == Spread(1.1, 4.0 / 4.4, 2.0)
    assert found["k02_cp_async"].within_noise


def test_percent_of_reference_is_a_median_of_per_round_ratios():
    reference = row("torch FA2", "reference", [1.0, 2.0, 1.0])
    chapter = row("k01_naive", "chapter", [2.0, 2.0, 4.0])
    assert pct_of_reference(chapter, reference) == Spread(50.0, 25.0, 100.0)
