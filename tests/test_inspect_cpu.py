"""`runner.py inspect` and `runner.py diff` without a GPU, and each chapter's idea as its SASS shows it."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernels import BuildError
from kernels.tools import inspection, sass
from kernels.tools.chapter_diff import unified_diff
from kernels.tools.opcodes import group_counts, mnemonic
from tests.conftest import CHAPTERS, changed

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def runner(*args, env=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "runner.py"), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


# --- inspect: the structural claim of each chapter, in the instance `runner.py inspect` shows -----------


@pytest.fixture(scope="module")
def inspected():
    return {c.number: inspection.inspect_chapter(c, "sm_90").rows for c in CHAPTERS}


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
        assert rows["HMMA"] + rows["HGMMA"] > 0 and rows["total"] > sum(rows[r] for r in inspection.SASS_ROWS) / 2


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
    counts = group_counts({opcode: 3}, inspection.SASS_ROWS)
    assert {name for name, n in counts.items() if n} == ({row} if row else set()), mnemonic(opcode)


def test_the_total_leaves_nop_padding_out():
    assert inspection.sass_counts({"HMMA.16816.F32.BF16": 4, "IMAD": 2, "EXIT": 1, "NOP": 9})["total"] == 7


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


# --- inspect: the disk cache --------------------------------------------------------------------------


def test_a_second_inspect_compiles_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(inspection, "CACHE_DIR", tmp_path)
    first = inspection.inspect_chapter(CHAPTERS[0], "sm_90")
    assert len(list((tmp_path / "inspect").glob("*.json"))) == 1

    def no_nvrtc(*args):
        raise AssertionError("NVRTC was called for a kernel in the cache")

    monkeypatch.setattr(inspection, "compile_nvrtc", no_nvrtc)
    assert inspection.inspect_chapter(CHAPTERS[0], "sm_90").rows == first.rows
    with pytest.raises(AssertionError, match="NVRTC was called"):
        inspection.inspect_chapter(CHAPTERS[0], "sm_90", causal=True)  # another instance: not in the cache yet


def test_the_cache_key_changes_with_source_arch_instance_and_nvrtc():
    parts = ("source text", "sm_90", "flash_attention<__half, true>", "13.0")
    changed = [parts[:i] + ("something else",) + parts[i + 1 :] for i in range(len(parts))]
    assert len({inspection.cache_key(*key) for key in [parts, *changed]}) == len(parts) + 1


# --- inspect: the command ------------------------------------------------------------------------------


def hmma_cells(text: str) -> list[int]:
    """The numbers of every HMMA row in the printed table(s), left to right, table after table."""
    return [int(n) for line in text.splitlines() if re.match(r"│ HMMA +│", line) for n in re.findall(r"\d+", line)]


def test_inspect_prints_every_chapter_in_one_table_to_a_pipe(inspected):
    result = runner("inspect")
    assert result.returncode == 0, result.stderr
    for chapter in CHAPTERS:
        assert chapter.name in result.stdout
    assert hmma_cells(result.stdout) == [rows["HMMA"] for rows in inspected.values()]


def test_inspect_fits_an_80_column_terminal_without_clipping_a_number(inspected):
    """rich takes COLUMNS as the terminal's width and FORCE_COLOR as a terminal: the table must split to fit."""
    env = {**os.environ, "COLUMNS": "80", "FORCE_COLOR": "1", "NO_COLOR": "1"}
    result = runner("inspect", env=env)
    assert result.returncode == 0, result.stderr
    text = ANSI.sub("", result.stdout)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    assert hmma_cells(text) == [rows["HMMA"] for rows in inspected.values()]
    for chapter in CHAPTERS:
        assert f"k{chapter.number:02d}" in text


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


def test_a_missing_tool_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    def missing(name):
        raise BuildError(f"{name} not found: install the CUDA toolkit or `pip install nvidia-cuda-{name}`")

    monkeypatch.setattr(inspection, "CACHE_DIR", tmp_path)  # nothing cached: the chapter is disassembled
    monkeypatch.setattr(sass, "find_tool", missing)
    assert inspection.main(["1"]) == 1
    err = capsys.readouterr().err
    assert "cuobjdump not found" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "99"], "no chapter '99'"),
        (["inspect", "--arch"], "expected one argument"),
        (["inspect", "--dtype", "fp8"], "invalid choice"),
        (["diff", "3"], "the following arguments are required: b"),
        (["diff", "3", "99"], "no chapter '99'"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args, message):
    result = runner(*args)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"runner.py {args[0]}: error:")


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


def test_diff_w_shows_code_moved_into_a_block_as_the_block_alone():
    plain, ignoring = runner("diff", "11", "12"), runner("diff", "11", "12", "-w")
    assert plain.returncode == ignoring.returncode == 0, plain.stderr + ignoring.stderr
    plain, ignoring = changed(plain.stdout.splitlines()), changed(ignoring.stdout.splitlines())
    # Kernel 12's producer asks for Q as kernel 11's thread 0 did: the line moves one level in, nothing more.
    moved = "load_tile<BLOCK_Q>(q_smem, q_map, head, q0, batch, q_barrier);"
    assert any(moved in line for line in plain) and not any(moved in line for line in ignoring)
    assert any(line.startswith("+") and "if (threadIdx.x == N_WARPS * 32) {" in line for line in ignoring)
    assert len(ignoring) < len(plain)


@pytest.mark.parametrize("before, after", list(zip(CHAPTERS[:-1], CHAPTERS[1:], strict=True)), ids=lambda c: c.name)
def test_neighbouring_kernels_differ_by_a_short_diff(before, after):
    """Each chapter is the one before plus one idea: ignoring indentation, its kernel's diff stays short."""
    diff = unified_diff(before.source, after.source, context=0, ignore_indent=True)
    assert 0 < len(changed(diff)) <= 175
