"""The ladder and ablate on the GPU, at a small shape: the rounds are all recorded and a saved run shows the same."""

import json
from pathlib import Path

import pytest

from tests.helpers import requires_gpu, run_cli

pytestmark = requires_gpu
ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--batch", "1", "--heads", "2", "--seq-len", "128", "--rounds", "3", "--repeats", "2", "--warmup", "1"]


def run_ok(*args):
    """`runner.py ARGS`, which must succeed."""
    result = run_cli(*args, timeout=600)
    assert result.returncode == 0, result.stderr
    return result


def test_every_round_and_repeat_is_saved_and_shown_again_the_same(tmp_path):
    saved = tmp_path / "run.json"
    live = run_ok("--kernels", "1,2", "--markdown", "--json", saved, *SMALL)
    run = json.loads(saved.read_text())[0]
    names = [row["name"] for row in run["rows"]]
    assert names[-2:] == ["k01_naive", "k02_cp_async"] and "torch FA2" in names
    assert run["order"] == [names[i:] + names[:i] for i in range(3)]  # the order rotates
    for row in run["rows"]:
        assert len(row["samples_ms"]) == 3 and all(len(r) == 2 and min(r) > 0 for r in row["samples_ms"])
    assert all(row["ok"] for row in run["rows"] if row["kind"] == "chapter")
    assert {row["family"] for row in run["rows"] if row["kind"] == "chapter"} == {"mma.sync"}
    assert run_ok("--from-json", saved, "--markdown").stdout == live.stdout


def test_longer_keys_and_fewer_kv_heads_are_recorded(tmp_path):
    saved = tmp_path / "run.json"
    run_ok("--kernels", "4", "--kv-heads", "1", "--kv-len", "256", "--json", saved, *SMALL)
    run = json.loads(saved.read_text())[0]
    assert run["shape"]["kv_heads"] == 1 and run["shape"]["kv_len"] == 256
    assert run["flops"] == pytest.approx(4 * 1 * 2 * 128 * 256 * 128)


def test_ablate_measures_every_cell_of_its_grid(tmp_path):
    pytest.importorskip("kernels.tools.ablations")
    saved = tmp_path / "ablation.json"
    result = run_ok("ablate", "3", "--markdown", "--json", saved, *SMALL)
    run = json.loads(saved.read_text())[0]
    measured = {row["name"] for row in run["rows"]}
    assert {name for _, _, name in run["grid"]["cells"]} <= measured
    assert f"**{run['grid']['title']}**" in result.stdout


def test_decode_measures_its_three_shapes_in_gb_per_s(tmp_path):
    """The preset at full size (a few GB of K and V per shape), one chapter, few repeats: each output checked."""
    from kernels.tools.commands import DECODE_SHAPES

    saved = tmp_path / "decode.json"
    live = run_cli(
        "decode", "--kernels", "8", "--rounds", "2", "--repeats", "2", "--warmup", "1", "--markdown", "--json", saved
    )
    runs = json.loads(saved.read_text())
    assert [run["shape"] for run in runs] == list(DECODE_SHAPES)
    for run in runs:
        assert all(row["ok"] for row in run["rows"] if row["kind"] == "chapter")
        assert {"torch FA2", "k08_kv128"} <= {row["name"] for row in run["rows"]}
    assert live.stdout.count("| GB/s") == 3 and "TFLOP/s" not in live.stdout
    assert run_cli("--from-json", saved, "--markdown").stdout == live.stdout


def test_warm_up_lasts_its_calls_and_at_least_its_time():
    """time_ms keeps warming up until the GPU has been busy for warmup_ms, then times the next calls, in order."""
    import torch

    from kernels.tools.timing import time_ms

    calls = []

    def spin(i: int) -> None:
        calls.append(i)
        torch.cuda._sleep(100_000)  # about 50 us of one SM spinning

    # Loaded before it is timed: a first launch loads its module while the warm-up's start event already ticks.
    spin(0)
    torch.cuda.synchronize()
    calls.clear()
    times = time_ms(spin, warmup=2, repeats=3, warmup_ms=20.0)
    assert len(times) == 3 and min(times) > 0
    assert calls == list(range(len(calls)))
    assert len(calls) - 3 > 20.0 / 0.2  # a call is far shorter than 0.2 ms, so 20 ms took many more than 2
    calls.clear()
    time_ms(spin, warmup=2, repeats=3, warmup_ms=0.0)
    assert len(calls) == 2 + 3
