"""The measurement records in results/: which kernel sources each measured (their sha256 must match today's
files), and scripts/record_results.sh, which re-records every one of them with the command it records."""

import argparse
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from kernels.tools.profiling import save_profiles
from kernels.tools.run_once import targets
from kernels.tools.sources import changed_sources, recorded_in_text, source_hash, source_hashes, sources_line

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
RECORD = ROOT / "scripts" / "record_results.sh"
JSON_FILES = sorted(RESULTS.glob("*.json"))


def records(path: Path) -> list[dict]:
    """Each measurement a file holds with what it ran on: a run's environment, a profile or peak's own record."""
    data = json.loads(path.read_text())
    if isinstance(data, list):  # runner.py --json: a list of runs
        return [run["environment"] for run in data]
    return [data.get("environment", data)]  # runner.py peak --json keeps an environment; profile --json does not


def recorded_sources(path: Path) -> list[dict[str, str]]:
    """The sources of each measurement in the file that saved them."""
    return [record["sources"] for record in records(path) if "sources" in record]


@pytest.mark.parametrize("path", JSON_FILES, ids=[path.name for path in JSON_FILES])
def test_recorded_sources_are_todays(path):
    """A file that saved the sha256 of the kernels it measured still describes the kernels in the tree."""
    saved = recorded_sources(path)
    assert saved and len(saved) == len(records(path)), f"{path.name} does not record the sources it measured"
    for sources in saved:
        assert sources, f"{path.name}: a measurement with no kernel source"
        assert not changed_sources(sources), f"{path.name} is stale: {changed_sources(sources)}; re-record it"


TEXT_FILES = sorted(RESULTS.glob("*.txt"))


@pytest.mark.parametrize("path", TEXT_FILES, ids=[path.name for path in TEXT_FILES])
def test_a_text_result_records_todays_sources(path):
    """A text file in results/ records, in a "# sources:" line, the kernels it ran, and they are today's; a profile's
    table beside its .json is covered by the .json, which the same command wrote."""
    if path.with_suffix(".json").exists():
        return
    recorded = recorded_in_text(path.read_text())
    assert recorded, f"{path.name} records no sources: its recipe prints python -m kernels.tools.sources first"
    assert not changed_sources(recorded), f"{path.name} is stale: {changed_sources(recorded)}; re-record it"


def test_a_sources_line_reads_back_and_catches_a_changed_kernel(tmp_path):
    """The line the recipes print parses back to each chapter's sha256, as test_a_changed_kernel_is_caught checks."""
    line = sources_line(["7", "split_kv", "k28_one_head"])
    recorded = recorded_in_text(f"a header\n{line}\nthe tool's output\n")
    variant = "docs/ablations/ch28_single_tiles/k28_one_head/flash_attention.cu"
    assert list(recorded) == ["k07_addressing/flash_attention.cu", "k18_split_kv/flash_attention.cu", variant]
    assert not changed_sources(recorded)
    assert recorded_in_text("no such line\n") is None


def test_every_text_recipe_records_its_sources():
    """Each recipe that writes a text file without a .json beside it prints a sources line into it, or runs a tool
    that does (the sanitizer's driver, the loop anatomy)."""
    recorders = ("kernels.tools.sources", "sanitize ", "kernels.tools.loop_anatomy")
    for name, body in recipes().items():
        if name.endswith(".txt"):
            assert any(recorder in body for recorder in recorders), f"{name}'s recipe records no sources"
    assert "python -m kernels.tools.sources" in RECORD.read_text().split("sanitize() {")[1].split("}")[0]


def test_a_changed_kernel_is_caught(tmp_path):
    """A source that changed or went away after it was measured is named; an unchanged one is not."""
    kernel = tmp_path / "k99_test" / "flash_attention.cu"
    kernel.parent.mkdir()
    kernel.write_text("__global__ void k() {}\n")
    recorded = {"k99_test/flash_attention.cu": source_hash(kernel), "k98_gone/flash_attention.cu": "sha256:00"}
    assert changed_sources(recorded, root=tmp_path) == ["k98_gone/flash_attention.cu (no such file)"]
    kernel.write_text("__global__ void k() { return; }\n")
    assert "k99_test/flash_attention.cu (changed since it was measured)" in changed_sources(recorded, root=tmp_path)


def test_hashes_are_keyed_by_path_in_the_project():
    """A chapter's source is recorded under its path in the project, with the file's sha256."""
    source = ROOT / "k01_naive" / "flash_attention.cu"
    digest = "sha256:" + hashlib.sha256(source.read_bytes()).hexdigest()
    assert source_hashes([source]) == {"k01_naive/flash_attention.cu": digest}


def test_a_saved_profile_records_its_chapters_sources(tmp_path):
    """`runner.py profile --json` saves the sha256 of each chapter it profiled, and none for torch's kernels."""
    chosen = targets(["16", "fa2"])
    args = argparse.Namespace(batch=1, seq_len=128, heads=1, dtype="bf16", causal=False, command_line="test")
    save_profiles([], args, tmp_path / "profile.json", None, chosen)
    record = json.loads((tmp_path / "profile.json").read_text())
    assert list(record["sources"]) == ["k16_softmax_chains/flash_attention.cu"]
    assert not changed_sources(record["sources"])


# --- scripts/record_results.sh ----------------------------------------------------------------------------------


def recipes() -> dict[str, str]:
    """The script's recipe for each file: the lines of its case branch."""
    text = RECORD.read_text()
    found = re.findall(r"^    ([\w.]+)\)(.*?);;$", text, flags=re.M | re.S)
    return {name: body for name, body in found}


def normalised(command: str) -> str:
    """A command with its --json path as the file's name alone and python3 as python, as the script writes it."""
    command = re.sub(r"--json \"?\S*?([\w.]+\.json)\"?", r"--json \1", command)
    return re.sub(r"\bpython3\b", "python", " ".join(command.replace("\\\n", " ").split()))


def test_every_results_file_has_a_recipe():
    """A person with a GPU can re-record every file in results/: each is named by a recipe or written by one."""
    found = recipes()
    script = RECORD.read_text()
    for path in sorted(RESULTS.iterdir()):
        assert path.name in found or f"results/{path.name}" in script, f"no recipe writes results/{path.name}"


@pytest.mark.parametrize("path", JSON_FILES, ids=[path.name for path in JSON_FILES])
def test_a_recipe_reruns_the_recorded_command(path):
    """The file's recipe runs the very command(s) the file says measured it, options and all."""
    body = " ".join(normalised(line) for line in recipes()[path.name].splitlines())
    for record in records(path):
        assert normalised(record["command"]) in body, f"{path.name}: {record['command']!r} is not its recipe"


def test_the_script_refuses_a_file_it_has_no_recipe_for():
    """A file name with no recipe stops the script before anything is measured, naming the file."""
    result = subprocess.run(
        ["bash", str(RECORD), "nothing.json"], capture_output=True, text=True, timeout=60, env=os.environ
    )
    assert result.returncode == 2 and "no recipe for results/nothing.json" in result.stderr
