"""The command line, as a user without a GPU meets it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def runner(*args, env=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "runner.py"), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


def test_help_lists_the_options():
    result = runner("--help")
    assert result.returncode == 0
    for option in ("--seq-len", "--dtype", "--causal", "--kernels", "--markdown", "--json", "--plot"):
        assert option in result.stdout


def test_without_a_gpu_says_so_and_fails():
    result = runner("--kernels", "1", env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 1
    assert "No CUDA GPU found" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seq-len", "abc"], "--seq-len"),
        (["--kernels", "99"], "no chapter '99'"),
        (["--head-dim", "64"], "--head-dim"),
    ],
)
def test_bad_arguments_are_reported(args, message):
    result = runner(*args)
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.stderr


SAVED_RUN = [
    {
        "shape": {"batch": 2, "seq_len": 64, "heads": 1, "head_dim": 128, "dtype": "bf16", "causal": False},
        "environment": {"device": "Test GPU (1 SMs)"},
        "rows": [
            {"name": "torch FA2", "kind": "reference", "ms": 1.0, "tflops": 100.0, "max_abs": 1e-3, "rel_l2": 2e-3},
            {
                "name": "k01_naive",
                "kind": "chapter",
                "ms": 2.0,
                "tflops": 50.0,
                "max_abs": 1e-3,
                "rel_l2": 2e-3,
                "ok": True,
                "pct_of_reference": 50.0,
                "speedup": None,
            },
        ],
    }
]


def test_shows_a_saved_run_as_markdown(tmp_path):
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(SAVED_RUN))
    result = runner("--from-json", str(saved), "--markdown")
    assert result.returncode == 0, result.stderr
    assert "| k01_naive" in result.stdout and "50.0%" in result.stdout


def test_plots_a_saved_run(tmp_path):
    pytest.importorskip("matplotlib")
    saved, plot = tmp_path / "run.json", tmp_path / "ladder.png"
    saved.write_text(json.dumps(SAVED_RUN))
    result = runner("--from-json", str(saved), "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
