"""`runner.py inspect | diff | profile` without a GPU, and each chapter's idea as its SASS shows it."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernels import BuildError, sass, tools
from tests.conftest import CHAPTERS

ROOT = Path(__file__).resolve().parent.parent


def runner(*args, env=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "runner.py"), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


# --- inspect: the structural claim of each chapter, in the instance `runner.py inspect` shows -----------


@pytest.fixture(scope="module")
def inspected():
    return {c.number: tools.inspect_chapter(c, "sm_90").rows for c in CHAPTERS}


def first_chapter_with(inspected, row):
    return min((number for number, rows in inspected.items() if rows[row] > 0), default=None)


def test_kernel2_is_the_first_to_copy_with_cp_async(inspected):
    assert inspected[1]["LDG"] > 0 and inspected[1]["LDGSTS"] == 0
    assert first_chapter_with(inspected, "LDGSTS") == 2


def test_kernel3_is_the_first_with_ldmatrix_plain_and_transposed(inspected):
    assert first_chapter_with(inspected, "LDSM") == 3, "plain ldmatrix for Q and K"
    assert first_chapter_with(inspected, "LDSM.MT88") == 3, "transposed ldmatrix for V"
    assert inspected[3]["LDS"] < inspected[2]["LDS"] / 4


def test_no_chapter_uses_local_memory_or_spills(inspected):
    for number, rows in inspected.items():
        assert rows["LDL"] == rows["STL"] == 0, number
        assert rows["local memory (B)"] == rows["stack (B)"] == 0, number
        assert rows["spill stores (B)"] == rows["spill loads (B)"] == 0, number


def test_resources_are_read_from_the_cubin_and_the_loader(inspected):
    for chapter in CHAPTERS:
        rows = inspected[chapter.number]
        assert 0 < rows["registers / thread"] <= 255
        assert rows["dynamic smem (B)"] == chapter.kernel.smem_bytes
        assert rows["HMMA"] + rows["HGMMA"] > 0 and rows["total"] > sum(rows[r] for r in tools.SASS_ROWS) / 2


@pytest.mark.parametrize(
    ("opcode", "row"),
    [
        ("LDSM.16.M88.4", "LDSM"),
        ("LDSM.16.MT88.4", "LDSM.MT88"),
        ("LDGSTS.E.BYPASS.128", "LDGSTS"),
        ("LDGDEPBAR", None),
        ("LDG.E.128", "LDG"),
        ("LDS.128", "LDS"),
        ("MUFU.EX2", "MUFU.EX2"),
        ("MUFU.RCP", None),
        ("BAR.SYNC.DEFER_BLOCKING", "BAR"),
        ("HMMA.16816.F32.BF16", "HMMA"),
        ("HGMMA.64x128x16.F32.BF16", "HGMMA"),
        ("IMAD.MOV.U32", "integer ALU"),
        ("NOP", None),
    ],
)
def test_opcodes_fold_into_rows(opcode, row):
    assert tools.sass_row(opcode) == row


def test_parse_resource_usage():
    text = textwrap.dedent("""
        Resource usage:
         Common:
          GLOBAL:28 CONSTANT[4]:56
         Function _Z15flash_attentionI6__halfLb0EEvPKT_S3_S3_PS1_iif:
          REG:218 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:572 TEXTURE:0 SURFACE:0 SAMPLER:0
    """)
    usage = sass.parse_resource_usage(text)
    assert usage == {
        "_Z15flash_attentionI6__halfLb0EEvPKT_S3_S3_PS1_iif": {
            "REG": 218, "STACK": 0, "SHARED": 1024, "LOCAL": 0, "CONSTANT[0]": 572, "TEXTURE": 0, "SURFACE": 0,
            "SAMPLER": 0,
        }
    }  # fmt: skip


def test_inspect_prints_every_chapter_and_the_hmma_row():
    result = runner("inspect")
    assert result.returncode == 0, result.stderr
    for chapter in CHAPTERS:
        assert chapter.name in result.stdout
    columns = set(re.findall(r"\bk\d\d_\w+", result.stdout))  # chapters added since this test started count too
    hmma = [line for line in result.stdout.splitlines() if re.search(r"\bHMMA\b", line)]
    assert len(hmma) == 1 and len(re.findall(r"\b\d+\b", hmma[0])) == len(columns)


def test_inspect_for_sm_80_leaves_out_the_hopper_only_chapter():
    result = runner("inspect", "8,9", "--arch", "sm_80")
    assert result.returncode == 0, result.stderr
    assert "k08_kv128" in result.stdout and "k09_wgmma" not in result.stdout
    assert "k09_wgmma left out: it is built for sm_90a only" in result.stderr
    result = runner("inspect", "9", "--arch", "sm_80")
    assert result.returncode == 2 and "none of the chosen chapters builds for sm_80" in result.stderr


def test_inspect_markdown_and_instance_options():
    result = runner("inspect", "1", "ldmatrix", "--markdown", "--causal", "--dtype", "fp16")
    assert result.returncode == 0, result.stderr
    assert "flash_attention<__half, true>" in result.stdout
    assert re.search(r"^\| LDSM\.MT88 +\| +0 \| +\*\*\d+\*\* \|$", result.stdout, flags=re.MULTILINE), result.stdout


def test_a_missing_tool_is_one_line_and_exit_1(monkeypatch, capsys):
    def missing(name):
        raise BuildError(f"{name} not found: install the CUDA toolkit or `pip install nvidia-cuda-{name}`")

    monkeypatch.setattr(sass, "find_tool", missing)
    assert tools.main(["inspect", "1"]) == 1
    err = capsys.readouterr().err
    assert "cuobjdump not found" in err and len(err.strip().splitlines()) == 1


# --- diff ---------------------------------------------------------------------------------------------


def test_diff_3_4_shows_the_swizzle():
    result = runner("diff", "3", "4")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("+") and "^ (row % 8)" in line for line in lines)
    assert "--- k03_ldmatrix/flash_attention.cu" in lines and "+++ k04_swizzle/loader.py" in lines
    assert "\x1b[" not in result.stdout  # not a terminal: no colour codes


def test_diff_takes_slugs_and_plain_output():
    by_slug = runner("diff", "ldmatrix", "k04_swizzle", "--no-color")
    assert by_slug.returncode == 0 and by_slug.stdout == runner("diff", "3", "4").stdout


def test_unknown_chapter_is_reported_without_traceback():
    result = runner("diff", "3", "99")
    assert result.returncode == 2
    assert "no chapter '99'" in result.stderr and "Traceback" not in result.stderr


# --- profile ------------------------------------------------------------------------------------------


def test_profile_without_ncu_says_so(tmp_path):
    result = runner("profile", "1", env={**os.environ, "PATH": str(tmp_path)})
    assert result.returncode == 1
    assert "ncu" in result.stderr and "Traceback" not in result.stderr + result.stdout


HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)
PREFIX = (
    '"0","1","python3","host","void flash_attention<__nv_bfloat16, 0>(const T1 *, const T1 *, const T1 *, T1 *, '
    'int, int, float)","1","7","(128, 1, 1)","(64, 16, 16)","0","9.0","Command line profiler metrics"'
)
DETAILS = [
    HEADER,
    f'{PREFIX},"gpu__time_duration.sum","nsecond","2,621,150"',
    f'{PREFIX},"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","109,975,893"',
    f'{PREFIX},"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum","","n/a"',
    f'{PREFIX},"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","%","41.37"',
    f'{PREFIX},"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","","3.2"',
    f'{PREFIX},"smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio","","n/a"',
    f'{PREFIX},"smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio","","7.25"',
]


def test_ncu_details_page_is_parsed_tolerantly():
    readings = tools.parse_ncu_csv("\n".join(["==PROF== Connected to process 1", "ran k01_naive", *DETAILS]))
    assert tools.format_reading(readings["gpu__time_duration.sum"]) == "2.621 ms"
    assert tools.format_reading(readings["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]) == "109,975,893"
    assert tools.format_reading(readings["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"]) == "n/a"
    assert tools.format_reading(readings.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")) == "n/a"
    assert [reason for reason, _ in tools.top_stalls(readings)] == ["short_scoreboard", "barrier"]


def test_ncu_raw_page_is_parsed_too():
    raw = [
        '"ID","Kernel Name","gpu__time_duration.sum","sm__warps_active.avg.pct_of_peak_sustained_active"',
        '"","","nsecond","%"',
        '"0","flash_attention","1,000,000","n/a"',
    ]
    readings = tools.parse_ncu_csv("\n".join(raw))
    assert tools.format_reading(readings["gpu__time_duration.sum"]) == "1.000 ms"
    assert tools.format_reading(readings["sm__warps_active.avg.pct_of_peak_sustained_active"]) == "n/a"
    assert tools.parse_ncu_csv("==ERROR== something went wrong") == {}


def fake_ncu(folder: Path, output: list[str], *, unknown: str | None = None) -> dict:
    """An `ncu` on PATH that prints ``output``; it fails unless told --clock-control none, and on ``unknown``."""
    script = folder / "ncu"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "args = ' '.join(sys.argv[1:])\n"
        "if '--clock-control none' not in args:\n"
        "    sys.exit('clocks would be locked')\n"
        f"if {unknown!r} and {unknown!r} in args:\n"
        f"    sys.exit('==ERROR== Failed to find metric ' + {unknown!r})\n"
        f"print({chr(10).join(output)!r})\n"
    )
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_profile_prints_what_ncu_measured(tmp_path):
    result = runner("profile", "1", "--seq-len", "128", env=fake_ncu(tmp_path, DETAILS))
    assert result.returncode == 0, result.stderr
    for text in ("2.621 ms", "109,975,893", "41.4%", "n/a", "short scoreboard", "clocks not locked"):
        assert text in result.stdout


def test_profile_drops_metrics_this_ncu_lacks(tmp_path):
    unknown = tools.STALL_METRIC.format("misc")
    result = runner("profile", "1", env=fake_ncu(tmp_path, DETAILS, unknown=unknown))
    assert result.returncode == 0, result.stderr
    assert "2.621 ms" in result.stdout


def test_profile_without_counter_permission_says_so(tmp_path):
    output = ["==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
              "Counters on the target device 0."]
    result = runner("profile", "1", env=fake_ncu(tmp_path, output))
    assert result.returncode == 1
    assert "ERR_NVGPUCTRPERM" in result.stderr and "Traceback" not in result.stderr


def test_profile_with_no_kernel_profiled_shows_why(tmp_path):
    output = ["==PROF== Connected to process 1", "No CUDA GPU found: profiling needs one"]
    output += ["==WARNING== No kernels were profiled."]
    result = runner("profile", "1", env=fake_ncu(tmp_path, output))
    assert result.returncode == 1
    assert "profiled no flash_attention kernel" in result.stderr and "No CUDA GPU found" in result.stderr
