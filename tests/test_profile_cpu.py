"""`runner.py profile` without a GPU: ncu's output parsed, tables built, every failure one line on stderr.

A fake `ncu` on PATH prints what Nsight Compute prints with --csv --page raw --print-metric-instances details.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.tools import profiling
from kernels.tools.run_once import targets
from tests.helpers import CHAPTERS, run_cli

ROOT = Path(__file__).resolve().parent.parent


def one_line_error(result, code: int, *messages: str) -> None:
    """The command failed with ``code`` and said why in one line, no traceback."""
    assert result.returncode == code, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for message in messages:
        assert message in result.stderr


# --- ncu's output ---------------------------------------------------------------------------------------

OPCODES = "163,254,272 (HMMA.16816.F32.BF16: 100,000,000; LDSM.16.M88.4: 33,554,432; MUFU.EX2: 4,000,000; "
OPCODES += "IMAD.MOV.U32: 25,000,000; EXIT: 699,840)"
COLUMNS = {  # ncu name -> (unit, value)
    "gpu__time_duration.sum": ("nsecond", "2,621,150"),
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": ("", "109,975,893"),
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": ("", "n/a"),
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": ("%", "41.37"),
    "lts__t_bytes.sum": ("byte", "3,221,225,472"),
    "dram__bytes.sum": ("byte", "805,306,368"),
    profiling.PER_OPCODE: ("", OPCODES),
    profiling.STALL_METRIC.format("barrier"): ("", "3.2"),
    profiling.STALL_METRIC.format("mio_throttle"): ("", "n/a"),
    profiling.STALL_METRIC.format("short_scoreboard"): ("", "7.25"),
}
LAUNCH = {
    "ID": "0", "Process ID": "1", "Process Name": "python3", "Host Name": "host",
    "Kernel Name": "void flash_attention<__nv_bfloat16, 0>(const T1 *, const T1 *, const T1 *, T1 *, int, int, float)",
    "Context": "1", "Stream": "7", "Block Size": "(128, 1, 1)", "Grid Size": "(64, 16, 16)", "Device": "0", "CC": "9.0",
}  # fmt: skip


def csv_line(cells: list[str]) -> str:
    return ",".join(f'"{cell}"' for cell in cells)


def raw_page(columns: dict[str, tuple[str, str]] = COLUMNS) -> list[str]:
    """ncu's raw page: the header, a row of units (no ID), one row per kernel."""
    return [
        csv_line([*LAUNCH, *columns]),
        csv_line(["" for _ in LAUNCH] + [unit for unit, _ in columns.values()]),
        csv_line([*LAUNCH.values(), *(value for _, value in columns.values())]),
    ]


@pytest.mark.parametrize(
    "cell",
    [
        "6,000 (HMMA.16816.F32.BF16: 4,096; MUFU.EX2: 1,904)",
        "6,000 (HMMA.16816.F32.BF16: 4,096, MUFU.EX2: 1,904)",
        "6000 (HMMA.16816.F32.BF16: 4096,MUFU.EX2: 1904)",
        "6000 (HMMA.16816.F32.BF16:4096;MUFU.EX2:1904.0)",
    ],
)
def test_instance_pairs_are_parsed_in_either_form(cell):
    assert profiling.parse_instances(cell) == {"HMMA.16816.F32.BF16": 4096, "MUFU.EX2": 1904}


def test_instance_values_without_names_give_nothing():
    assert profiling.parse_instances("163,254,272 (44,023,808; 33,554,432; 86,000,032)") == {}
    assert profiling.parse_instances("n/a") == {}


def test_the_raw_page_is_parsed_tolerantly():
    text = "\n".join(["==PROF== Connected to process 1", "ran k01_naive", *raw_page()])
    parsed = profiling.parse_ncu_csv(text, "k01_naive")
    assert parsed.block == "(128, 1, 1)" and parsed.kernel.startswith("void flash_attention")
    readings = parsed.readings
    assert profiling.format_reading(readings["gpu__time_duration.sum"]) == "2.621 ms"
    loads = readings["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
    assert profiling.format_reading(loads) == "109,975,893"
    assert profiling.format_reading(readings["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"]) == "n/a"
    assert profiling.format_reading(readings["lts__t_bytes.sum"]) == "3.22 GB"
    assert profiling.format_reading(readings["dram__bytes.sum"]) == "805.3 MB"
    assert profiling.format_reading(readings.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")) == "n/a"
    assert list(profiling.top_stalls(readings)) == ["short_scoreboard", "barrier"]
    assert parsed.executed["LDSM.16.M88.4"] == 33_554_432 and sum(parsed.executed.values()) == 163_254_272
    assert profiling.parse_ncu_csv("==ERROR== something went wrong", "k01_naive") is None


def test_executed_instructions_fold_into_groups():
    parsed = profiling.parse_ncu_csv("\n".join(raw_page()), "k01_naive")
    rows = dict(profiling.executed_rows([parsed]))
    assert rows["HMMA / HGMMA"][0].text == "100,000,000"
    assert rows["integer ALU"][0].text == "25,000,000"
    assert rows["other"][0].text == "699,840"  # EXIT
    assert rows["total"][0].text == "163,254,272"


def test_the_targets_are_chapters_and_torchs_kernels():
    chosen = targets(["8", "FA2,cudnn", "kv128"])
    assert [t.name for t in chosen] == ["k08_kv128", "torch FA2", "torch cuDNN"]
    assert [t.kernel for t in chosen] == ["flash_attention", "flash_fwd", "cudnn.*sdpa|fprop"]
    assert [t.token for t in targets([])] == [*(chapter.name for chapter in CHAPTERS), "fa2", "cudnn"]


# --- the command, with a fake ncu -----------------------------------------------------------------------


def fake_ncu(folder: Path, output: list[str], *, unknown: str | None = None, run_child: bool = False) -> dict:
    """An `ncu` on PATH that prints ``output`` and logs its arguments to ncu.log; it fails unless the clocks are left
    alone and the raw page is asked for with instance names, and on the metric ``unknown``. With ``run_child`` it
    runs the profiled program first, as ncu does."""
    script = folder / "ncu"
    script.write_text(
        f"#!{sys.executable}\n"
        "import subprocess, sys\n"
        "args = sys.argv[1:]\n"
        f"open({str(folder / 'ncu.log')!r}, 'a').write(' '.join(args) + '\\n')\n"
        "joined = ' '.join(args)\n"
        "for option in ('--clock-control none', '--page raw', '--print-metric-instances details'):\n"
        "    if option not in joined:\n"
        "        sys.exit('fake ncu: missing ' + option)\n"
        f"if {unknown!r} and {unknown!r} in joined:\n"
        f"    sys.exit('==ERROR== Failed to find metric ' + {unknown!r})\n"
        f"if {run_child}:\n"
        "    subprocess.run(args[args.index(sys.executable):])\n"
        f"print({chr(10).join(output)!r})\n"
    )
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_profile_shows_targets_side_by_side(tmp_path):
    result = run_cli("profile", "1", "fa2", "--seq-len", "128", env=fake_ncu(tmp_path, raw_page()))
    assert result.returncode == 0, result.stderr
    for text in ("k01_naive", "torch FA2", "2.621 ms", "109,975,893", "41.4%", "3.22 GB", "100,000,000", "699,840",
                 "short scoreboard", "clocks not locked"):  # fmt: skip
        assert text in " ".join(result.stdout.split())  # the title wraps over the table
    calls = (tmp_path / "ncu.log").read_text().splitlines()
    assert "-k regex:flash_attention" in calls[0] and "kernels.tools.run_once k01_naive" in calls[0]
    assert "-k regex:flash_fwd" in calls[1] and "kernels.tools.run_once fa2 --batch 16 --seq-len 128" in calls[1]


def test_profile_saves_json_and_prints_markdown(tmp_path):
    saved = tmp_path / "profiling.json"
    result = run_cli("profile", "1", "--markdown", "--json", str(saved), env=fake_ncu(tmp_path, raw_page()))
    assert result.returncode == 0, result.stderr
    assert re.search(r"^\| HMMA / HGMMA +\| +100,000,000 \|$", result.stdout, flags=re.MULTILINE), result.stdout
    record = json.loads(saved.read_text())
    assert record["shape"] == {"batch": 16, "seq_len": 4096, "heads": 16, "dtype": "bf16", "causal": False}
    (only,) = record["profiles"]
    assert only["target"] == "k01_naive" and only["executed"]["MUFU.EX2"] == 4_000_000
    assert only["readings"]["gpu__time_duration.sum"] == {"value": 2621150.0, "unit": "nsecond"}


def test_profile_drops_metrics_this_ncu_lacks(tmp_path):
    unknown = profiling.STALL_METRIC.format("misc")
    result = run_cli("profile", "1", "2", env=fake_ncu(tmp_path, raw_page(), unknown=unknown))
    assert result.returncode == 0, result.stderr
    assert "2.621 ms" in result.stdout
    assert len((tmp_path / "ncu.log").read_text().splitlines()) == 3  # once more for the first chapter only


def test_profile_says_when_ncu_prints_no_opcode_names(tmp_path):
    columns = COLUMNS | {profiling.PER_OPCODE: ("", "163,254,272 (100,000,000; 63,254,272)")}
    result = run_cli("profile", "1", env=fake_ncu(tmp_path, raw_page(columns)))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == profiling.NO_OPCODE_NAMES
    assert "2.621 ms" in result.stdout


def test_profile_without_ncu_is_one_line(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}
    one_line_error(run_cli("profile", env=env), 1, "ncu")
    one_line_error(run_cli("profile", "1", "cudnn", env=env), 1, "ncu")


def test_profile_without_counter_permission_is_one_line(tmp_path):
    output = ["==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
              "Counters on the target device 0."]  # fmt: skip
    one_line_error(run_cli("profile", "1", env=fake_ncu(tmp_path, output)), 1, "ERR_NVGPUCTRPERM")


def test_profile_without_a_gpu_is_one_line(tmp_path):
    """ncu runs the child, which finds no GPU: its reason is the one line."""
    env = fake_ncu(tmp_path, ["==WARNING== No kernels were profiled."], run_child=True) | {"CUDA_VISIBLE_DEVICES": ""}
    one_line_error(run_cli("profile", "1", env=env), 1, "profiled no kernel of k01_naive", "No CUDA GPU found")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["profile", "99"], "or fa2 or cudnn"),
        (["profile", "1", "--seq-len", "0"], "must be at least 1"),
        (["profile", "1", "--json"], "expected one argument"),
    ],
)
def test_profile_bad_arguments_are_one_line(args, message):
    one_line_error(run_cli(*args), 2, message)


# --- the child: run once ---------------------------------------------------


@pytest.mark.parametrize(
    ("command", "code", "message"),
    [
        ([sys.executable, "-m", "kernels.tools.run_once", "1", "fa2"], 1, "No CUDA GPU found"),
        ([sys.executable, "-m", "kernels.tools.run_once", "nope"], 2, "no chapter 'nope'"),
    ],
)
def test_running_once_without_a_gpu_is_one_line(command, code, message):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    one_line_error(result, code, message)
