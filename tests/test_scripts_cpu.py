"""The GPU machine's scripts without a GPU: each failure says which step failed and exits non-zero.

device_check.sh is run as the shell script it is; sanitize.py's main in this process."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import hide_gpu

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


def test_sanitize_without_a_gpu_is_one_line_naming_the_chapters(capsys, monkeypatch):
    hide_gpu(monkeypatch)
    spec = importlib.util.spec_from_file_location("sanitize", ROOT / "scripts" / "sanitize.py")
    sanitize = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sanitize)
    capsys.readouterr()
    assert sanitize.main(["5", "7"]) == 1
    error = "No CUDA GPU found: running k05_pipelining and k07_addressing needs an NVIDIA GPU"
    assert capsys.readouterr().err == f"sanitize.py: error: {error}\n"
