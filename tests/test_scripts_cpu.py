"""The GPU machine's scripts without a GPU: each failure says which step failed and exits non-zero."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NO_GPU = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def device_check(*stages, out: Path):
    env = NO_GPU | {"OUT": str(out), "PYTHON": sys.executable}
    command = ["bash", str(ROOT / "scripts" / "device_check.sh"), *stages]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def test_device_check_stops_at_the_failing_step(tmp_path):
    result = device_check("ladder", "profile", out=tmp_path)
    assert result.returncode == 1
    assert "step 'ladder' failed" in result.stderr and "No CUDA GPU found" in result.stderr
    assert not (tmp_path / "profile.txt").exists()  # the run stopped there
    assert "No CUDA GPU found" in (tmp_path / "ladder.txt").read_text()


def test_device_check_names_an_unknown_stage(tmp_path):
    result = device_check("ladders", out=tmp_path)
    assert result.returncode == 2 and "no stage 'ladders'" in result.stderr


def test_sanitize_without_a_gpu_is_one_line():
    command = [sys.executable, str(ROOT / "scripts" / "sanitize.py"), "5"]
    result = subprocess.run(command, capture_output=True, text=True, env=NO_GPU, timeout=300)
    assert result.returncode == 1
    assert result.stderr.strip() == "sanitize.py: error: No CUDA GPU found: running a kernel needs one"
