"""`runner.py profile` without a GPU: ncu's output parsed, tables built, every failure one line on stderr.

A fake `ncu` on PATH prints what Nsight Compute prints with --csv --page raw --print-metric-instances details.
"""

import json
import os
import re
import sys
from pathlib import Path

import pytest

from kernels.build import nvrtc_version
from kernels.tools import inspection, profiling, run_once
from kernels.tools.cli import UsageError
from kernels.tools.run_once import CHAPTER_KERNEL, targets
from tests.helpers import CHAPTERS, assert_one_line_error, hide_gpu, run_command

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


@pytest.mark.parametrize(
    ("opcode", "row"),
    [
        ("UTMALDG.4D", "LDGSTS / UTMALDG"),
        ("UTMASTG.2D", "LDG / STG / UTMASTG"),
        ("STSM.16.M88.4", "LDS / STS / STSM"),
        ("SYNCS.PHASECHK.TRANS64.TRYWAIT", "BAR / SYNCS"),
        ("SYNCS.ARRIVE.TRANS64.RED.A1T0", "BAR / SYNCS"),
        ("WARPGROUP.DEPBAR.LE", "WARPGROUP"),
        ("USETMAXREG.DEALLOC.CTAPOOL", "other"),
    ],
)
def test_hopper_instructions_fold_into_groups(opcode, row):
    """TMA's copies, stmatrix, mbarriers and wgmma's waits land in their groups; setmaxnreg in "other", with EXIT."""
    profile = profiling.Profile("k12", "flash_attention", "", "", {}, {opcode: 7, "EXIT": 1})
    counted = {label: cells[0].text for label, cells in profiling.executed_rows([profile]) if cells[0].text != "0"}
    assert counted == ({row: "7", "other": "1"} if row != "other" else {"other": "8"}) | {"total": "8"}


def test_each_executed_group_is_a_sum_of_inspects_rows():
    """profile and inspect name instructions alike: a group adds up whole rows of inspect, and what inspect counts
    that profile leaves to "other" is local memory (there should be none) and setmaxnreg (once per warp)."""
    rows = {name: row for row, names in inspection.SASS_ROWS.items() for name in names}
    grouped = {name for names in profiling.EXECUTED_ROWS.values() for name in names}
    assert grouped <= set(rows)
    for names in profiling.EXECUTED_ROWS.values():
        assert all(set(inspection.SASS_ROWS[rows[name]]) <= set(names) for name in names), names
    assert set(rows) - grouped == {"LDL", "STL", "USETMAXREG"}


def test_the_targets_are_chapters_and_torchs_kernels():
    chosen = targets(["8", "FA2,cudnn", "kv128"])
    assert [t.name for t in chosen] == ["k08_kv128", "torch FA2", "torch cuDNN"]
    assert [t.kernel for t in chosen] == [CHAPTER_KERNEL, "flash_fwd", "cudnn.*sdpa|fprop"]
    assert [t.token for t in targets([])] == [*(chapter.name for chapter in CHAPTERS), "fa2", "cudnn"]


def test_an_ablation_variant_is_a_target_by_its_folder_name():
    """Beside its chapter, headed by its own name; a name that is neither a chapter nor a variant is refused."""
    chapter, variant = targets(["29", "k29_tail_split"])
    assert (variant.name, variant.short_name, variant.kernel) == ("k29_tail_split", "k29_tail_split", CHAPTER_KERNEL)
    assert variant.chapter.source.parent.name == "k29_tail_split" and chapter.short_name == "k29"
    with pytest.raises(UsageError, match="no chapter 'k29_nothing'.*an ablation variant"):
        targets(["k29_nothing"])


def test_flash_attention_4_is_a_target_by_name_only():
    """Named, it runs FlashAttention-4's forward (where it is not installed, the call names the package); by default
    only torch's kernels stand beside the chapters."""
    [fa4] = targets(["fa4"])
    assert (fa4.name, fa4.short_name, fa4.chapter) == ("flash-attn-4", "FA4", None)
    assert re.search(
        fa4.kernel,
        "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_object_at__tensor0000o11101213",
    )
    assert "fa4" not in [t.token for t in targets([])]


# --- the command, with a fake ncu -----------------------------------------------------------------------


@pytest.fixture
def hopper(monkeypatch):
    """The profiler sees an sm_90 GPU: what ncu would profile on, its children being the fake ncu's business."""
    monkeypatch.setattr(profiling, "this_gpu", lambda: "sm_90")


def fake_ncu(folder: Path, monkeypatch, output: list[str], *, unknown: str | None = None, run_child: bool = False):
    """An `ncu` first on PATH that prints ``output`` and logs its arguments to ncu.log; it fails unless the clocks are
    left alone and the raw page is asked for with instance names, and on the metric ``unknown``. With ``run_child``
    it runs the profiled program first, as ncu does."""
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
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_profile_shows_targets_side_by_side(tmp_path, monkeypatch, capsys, hopper):
    fake_ncu(tmp_path, monkeypatch, raw_page())
    ran = run_command(capsys, "profile", "1", "fa2", "--seq-len", "128")
    assert ran.code == 0, ran.err
    for text in ("k01_naive", "torch FA2", "2.621 ms", "109,975,893", "41.4%", "3.22 GB", "100,000,000", "699,840",
                 "short scoreboard", "clocks not locked"):  # fmt: skip
        assert text in " ".join(ran.out.split())  # the title wraps over the table
    assert ran.err.splitlines() == [f"profiling {name} under Nsight Compute ..." for name in ("k01_naive", "torch FA2")]
    calls = (tmp_path / "ncu.log").read_text().splitlines()
    assert "-k regex:flash_attention" in calls[0] and "kernels.tools.run_once k01_naive" in calls[0]
    assert "-k regex:flash_fwd" in calls[1] and "kernels.tools.run_once fa2 --batch 16 --seq-len 128" in calls[1]


def test_profile_saves_json_and_prints_markdown(tmp_path, monkeypatch, capsys, hopper):
    fake_ncu(tmp_path, monkeypatch, raw_page())
    saved = tmp_path / "profiling.json"
    ran = run_command(capsys, "profile", "1", "--markdown", "--json", saved)
    assert ran.code == 0, ran.err
    assert re.search(r"^\| HMMA / HGMMA +\| +100,000,000 \|$", ran.out, flags=re.MULTILINE), ran.out
    assert f"chapters compiled by NVRTC {nvrtc_version()})**" in ran.out.splitlines()[0]
    assert ran.err.splitlines()[-1] == f"wrote {saved}"
    record = json.loads(saved.read_text())
    assert record["nvrtc"] == nvrtc_version()
    assert record["shape"] == {"batch": 16, "seq_len": 4096, "heads": 16, "dtype": "bf16", "causal": False}
    assert record["command"] == f"python runner.py profile 1 --markdown --json {saved}"
    (only,) = record["profiles"]
    assert only["target"] == "k01_naive" and only["executed"]["MUFU.EX2"] == 4_000_000
    assert only["readings"]["gpu__time_duration.sum"] == {"value": 2621150.0, "unit": "nsecond"}


def test_a_saved_profile_renders_as_the_command_printed_it(tmp_path, monkeypatch, capsys, hopper):
    fake_ncu(tmp_path, monkeypatch, raw_page())
    saved = tmp_path / "profiling.json"
    ran = run_command(capsys, "profile", "1", "fa2", "--markdown", "--json", saved)
    assert ran.code == 0, ran.err
    table = profiling.load_profile_table(saved)
    assert table.markdown() == ran.out.rstrip("\n") and table.short_heads == ["k01", "FA2"]


def test_a_file_that_is_not_a_saved_profile_is_named(tmp_path):
    saved = tmp_path / "run.json"
    saved.write_text("[]")
    with pytest.raises(ValueError, match=f"{saved}: not profiles saved by"):
        profiling.load_profile_table(saved)


def test_a_profile_of_torchs_kernels_alone_names_no_nvrtc(tmp_path, monkeypatch, capsys, hopper):
    fake_ncu(tmp_path, monkeypatch, raw_page())
    saved = tmp_path / "profiling.json"
    ran = run_command(capsys, "profile", "fa2", "--markdown", "--json", saved)
    assert ran.code == 0, ran.err
    assert "NVRTC" not in ran.out and "clocks not locked)**" in ran.out.splitlines()[0]
    assert json.loads(saved.read_text())["nvrtc"] is None


def test_profile_drops_metrics_this_ncu_lacks(tmp_path, monkeypatch, capsys, hopper):
    fake_ncu(tmp_path, monkeypatch, raw_page(), unknown=profiling.STALL_METRIC.format("misc"))
    ran = run_command(capsys, "profile", "1", "2")
    assert ran.code == 0, ran.err
    assert "2.621 ms" in ran.out
    assert len((tmp_path / "ncu.log").read_text().splitlines()) == 3  # once more for the first chapter only


def test_profile_says_when_ncu_prints_no_opcode_names(tmp_path, monkeypatch, capsys, hopper):
    columns = COLUMNS | {profiling.PER_OPCODE: ("", "163,254,272 (100,000,000; 63,254,272)")}
    fake_ncu(tmp_path, monkeypatch, raw_page(columns))
    ran = run_command(capsys, "profile", "1")
    assert ran.code == 0, ran.err
    assert ran.err.splitlines()[-1] == profiling.NO_OPCODE_NAMES
    assert "2.621 ms" in ran.out


def test_profile_without_ncu_is_one_line_naming_the_targets(tmp_path, monkeypatch, capsys, hopper):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert_one_line_error(run_command(capsys, "profile"), 1, "ncu", "profiling k01_naive, ")
    assert_one_line_error(run_command(capsys, "profile", "1", "cudnn"), 1, "ncu", "profiling k01_naive and torch cuDNN")


def test_profile_on_a_gpu_none_of_the_targets_runs_on_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(profiling, "this_gpu", lambda: "sm_80")
    ran = run_command(capsys, "profile", "9", "10")
    assert_one_line_error(
        ran,
        2,
        "none of the chosen kernels runs on this sm_80 GPU (k09_wgmma for sm_90a only, k10_wgmma_pv for sm_90a only)",
    )


def test_profile_without_a_gpu_says_so_before_looking_for_ncu(tmp_path, monkeypatch, capsys):
    hide_gpu(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu either: the GPU is what to say first
    ran = run_command(capsys, "profile", "8", "fa2")
    assert_one_line_error(ran, 1, "No CUDA GPU found: profiling k08_kv128 and torch FA2 needs an NVIDIA GPU")
    assert "ncu" not in ran.err


def test_profile_without_counter_permission_is_one_line(tmp_path, monkeypatch, capsys, hopper):
    output = ["==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
              "Counters on the target device 0."]  # fmt: skip
    fake_ncu(tmp_path, monkeypatch, output)
    ran = run_command(capsys, "profile", "1", "--markdown")
    assert ran.code == 1 and ran.err.splitlines()[-1].startswith("runner.py profile: error: ncu may not read")
    assert "ERR_NVGPUCTRPERM" in ran.err


def test_profile_names_why_a_child_profiled_nothing(tmp_path, monkeypatch, capsys, hopper):
    """ncu runs the child, a process of its own, which finds no GPU: its last words are the one line."""
    fake_ncu(tmp_path, monkeypatch, ["==WARNING== No kernels were profiled."], run_child=True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    ran = run_command(capsys, "profile", "1")
    assert ran.code == 1
    error = ran.err.splitlines()[-1]
    assert error.startswith("runner.py profile: error: ncu profiled no kernel of k01_naive")
    assert "No CUDA GPU found: running k01_naive needs an NVIDIA GPU" in error


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["profile", "99"], "or fa2, cudnn, fa4 for the reference kernels"),
        (["profile", "1", "--seq-len", "0"], "must be at least 1"),
        (["profile", "1", "--json"], "expected one argument"),
        (["profile", "1", "--json", "no/such/folder/profile.json"], "--json: the folder no/such/folder does not exist"),
    ],
)
def test_profile_bad_arguments_are_one_line_before_any_gpu_work(args, message, capsys, monkeypatch):
    hide_gpu(monkeypatch)
    assert_one_line_error(run_command(capsys, *args), 2, message)


# --- the child: run once ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["1", "fa2"], 1, "No CUDA GPU found: running k01_naive and torch FA2 needs an NVIDIA GPU"),
        (["nope"], 2, "no chapter 'nope'"),
        (["1", "--heads", "0"], 2, "--heads: must be at least 1"),
    ],
)
def test_running_once_without_a_gpu_is_one_line(args, code, message, capsys, monkeypatch):
    hide_gpu(monkeypatch)
    capsys.readouterr()
    assert run_once.main(args) == code
    err = capsys.readouterr().err
    assert err.startswith("python -m kernels.tools.run_once: error:") and len(err.strip().splitlines()) == 1
    assert message in err
