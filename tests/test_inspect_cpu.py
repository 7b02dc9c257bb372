"""`runner.py inspect` and `runner.py diff` without a GPU, and each chapter's idea as its SASS shows it."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernels import BuildError, build
from kernels.build import compile_nvrtc, name_expression, nvrtc_version
from kernels.tools import inspection, sass
from kernels.tools.chapter_diff import DIFF_BUDGET, unified_diff
from kernels.tools.opcodes import group_counts, mnemonic
from kernels.tools.side_by_side import PIPE_WIDTH
from tests.helpers import CHAPTERS, ROOT, assert_one_line_error, changed, run_command

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


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


def test_the_tma_chapters_copy_with_utmaldg_instead_of_cp_async(inspected):
    """From chapter 11 on, TMA brings every tile into shared memory: UTMALDG there, no LDGSTS; none before."""
    for number, rows in inspected.items():
        assert (rows["UTMALDG"] > 0) == (number >= 11), number
        assert rows["UTMALDG"] == 0 or rows["LDGSTS"] == 0, number


def test_hopper_synchronisation_shows_where_the_chapters_introduce_it(inspected):
    """wgmma's fences and waits from chapter 9, mbarriers with TMA (chapter 11), register budgets with the
    warpgroups' specialisation (chapter 12); each chapter keeps what the one before introduced."""
    for row, first in (("WARPGROUP", 9), ("SYNCS", 11), ("USETMAXREG", 12)):
        assert [number for number, rows in inspected.items() if rows[row] > 0] == list(range(first, len(CHAPTERS) + 1))
    for number, rows in inspected.items():
        assert rows["UTMALDG"] == 0 or rows["SYNCS"] > 0, f"k{number:02d}: a TMA copy completes on an mbarrier"


def sass_lines(sass_text: str, name: str) -> list[str]:
    """The disassembled instructions whose opcode is ``name`` with any modifiers, e.g. SYNCS.EXCH.64 for SYNCS."""
    return re.findall(rf"/\*[0-9a-f]{{4,}}\*/\s+(?:@!?U?P[T0-9]+\s+)?({name}(?:\.[A-Z0-9_]+)*)\b", sass_text)


def test_the_hopper_rows_count_what_the_disassembly_of_chapter_12_holds(inspected):
    """Read from cuobjdump's text of the instance inspect shows: each row counts every instruction of its opcode,
    and the producer's and the consumers' setmaxnreg are both there (one gives registers back, one takes them)."""
    chapter = next(chapter for chapter in CHAPTERS if chapter.number == 12)
    cubin = compile_nvrtc(chapter.source, chapter.kernel.build_arch("sm_90"))
    text = sass.disassemble(cubin)[cubin.lowered_names[name_expression(torch.bfloat16, False)]]
    for row in ("UTMALDG", "UTMASTG", "STSM", "SYNCS", "WARPGROUP", "USETMAXREG"):
        assert inspected[chapter.number][row] == len(sass_lines(text, row)), row
    assert {opcode.split(".")[1] for opcode in sass_lines(text, "USETMAXREG")} == {"DEALLOC", "TRY_ALLOC"}
    assert {opcode.split(".")[1] for opcode in sass_lines(text, "SYNCS")} >= {"EXCH", "ARRIVE", "PHASECHK"}


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
        ("UTMALDG.4D", "UTMALDG"),
        ("UTMASTG.2D", "UTMASTG"),
        ("STSM.16.M88.4", "STSM"),
        ("SYNCS.EXCH.64", "SYNCS"),
        ("SYNCS.ARRIVE.TRANS64.RED.A1T0", "SYNCS"),
        ("SYNCS.PHASECHK.TRANS64.TRYWAIT", "SYNCS"),
        ("WARPGROUP.ARRIVE", "WARPGROUP"),
        ("WARPGROUP.DEPBAR.LE", "WARPGROUP"),
        ("USETMAXREG.DEALLOC.CTAPOOL", "USETMAXREG"),
        ("USETMAXREG.TRY_ALLOC.CTAPOOL", "USETMAXREG"),
        ("FADD.FTZ", "FADD"),
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
    """What an instance compiled to is kept on disk (kernels.build.disk_cached), keyed by its compile and instance."""
    monkeypatch.setattr(build, "CACHE_DIR", tmp_path)
    first = inspection.inspect_chapter(CHAPTERS[0], "sm_90")
    assert len(list((tmp_path / "inspect").glob("*.json"))) == 1

    def no_nvrtc(*args):
        raise AssertionError("NVRTC was called for a kernel in the cache")

    monkeypatch.setattr(inspection, "compile_nvrtc", no_nvrtc)
    assert inspection.inspect_chapter(CHAPTERS[0], "sm_90").rows == first.rows
    with pytest.raises(AssertionError, match="NVRTC was called"):
        inspection.inspect_chapter(CHAPTERS[0], "sm_90", causal=True)  # another instance: not in the cache yet


# --- inspect: the command ------------------------------------------------------------------------------


def hmma_cells(text: str) -> list[int]:
    """The numbers of every HMMA row in the printed table(s), left to right, table after table."""
    return [int(n) for line in text.splitlines() if re.match(r"│ HMMA +│", line) for n in re.findall(r"\d+", line)]


def test_inspect_fits_a_pipe_without_colour_or_its_legend(inspected, capsys):
    """A pipe or a log gets tables no wider than PIPE_WIDTH, every number, and no words about colours it lacks."""
    ran = run_command(capsys, "inspect")
    assert ran.code == 0, ran.err
    assert max(len(line) for line in ran.out.splitlines()) <= PIPE_WIDTH
    assert "…" not in ran.out and "\x1b[" not in ran.out
    assert hmma_cells(ran.out) == [rows["HMMA"] for rows in inspected.values()]
    for chapter in CHAPTERS:
        assert f"k{chapter.number:02d}" in ran.out
    assert "green" not in ran.out and "red:" not in ran.out
    assert "SASS counts are instructions in the code" in " ".join(ran.out.split())


def test_inspect_fits_an_80_column_terminal_without_clipping_a_number(inspected, capsys, monkeypatch):
    """rich takes COLUMNS as the terminal's width and FORCE_COLOR as a terminal: the table must split to fit."""
    for name, value in {"COLUMNS": "80", "FORCE_COLOR": "1", "NO_COLOR": "1"}.items():
        monkeypatch.setenv(name, value)
    ran = run_command(capsys, "inspect")
    assert ran.code == 0, ran.err
    text = ANSI.sub("", ran.out)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    assert hmma_cells(text) == [rows["HMMA"] for rows in inspected.values()]
    for chapter in CHAPTERS:
        assert f"k{chapter.number:02d}" in text
    assert "green" not in text  # NO_COLOR: the legend of the colours goes with them


def test_inspect_on_a_colour_terminal_says_what_the_colours_mean(capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    ran = run_command(capsys, "inspect", "3", "4")
    assert ran.code == 0, ran.err
    assert "\x1b[" in ran.out and "green: fewer than the chapter to the left" in " ".join(ANSI.sub("", ran.out).split())


def test_inspect_says_what_it_compiles_on_stderr_in_a_pipe(tmp_path, capsys, monkeypatch):
    """A first inspect compiles for a while: a pipe or a log hears of each chapter; a second one compiles nothing."""
    monkeypatch.setattr(build, "CACHE_DIR", tmp_path)
    ran = run_command(capsys, "inspect", "1", "--markdown")
    assert ran.code == 0, ran.err
    assert ran.err == "compiling k01_naive for sm_90 ...\n"
    again = run_command(capsys, "inspect", "1", "--markdown")
    assert again.code == 0 and again.err == "" and again.out == ran.out


def test_inspect_names_the_nvrtc_that_compiled_the_chapters(tmp_path, capsys, monkeypatch):
    """Another NVRTC emits other SASS and registers: the title says which one built what the table counts, in a
    pipe and in Markdown (what a page quotes)."""
    ran = run_command(capsys, "inspect", "1", "2", "--markdown")
    assert ran.code == 0, ran.err
    title = ran.out.splitlines()[0]
    assert title == f"**flash_attention<__nv_bfloat16, false> for sm_90, NVRTC {nvrtc_version()}**"
    piped = run_command(capsys, "inspect", "1")
    assert f"NVRTC {nvrtc_version()}" in " ".join(piped.out.split()[:12])
    monkeypatch.setattr(build, "CACHE_DIR", tmp_path)  # another version compiles anew: keep it out of the cache
    monkeypatch.setattr(inspection, "nvrtc_version", lambda: "13.99")
    assert run_command(capsys, "inspect", "1", "--markdown").out.splitlines()[0].endswith("NVRTC 13.99**")


def test_inspect_for_sm_80_leaves_out_the_hopper_only_chapter(capsys):
    ran = run_command(capsys, "inspect", "8,9", "--arch", "sm_80")
    assert ran.code == 0, ran.err
    assert "k08" in ran.out and "k09" not in ran.out
    assert "k09_wgmma left out: it is built for sm_90a only" in ran.err
    assert_one_line_error(
        run_command(capsys, "inspect", "9", "--arch", "sm_80"), 2, "none of the chosen chapters builds for sm_80"
    )


@pytest.mark.parametrize("arch", ["sm_75", "sm_70"])
def test_inspect_for_a_gpu_older_than_sm_80_is_one_line(arch, capsys):
    """Not a thousand lines of ptxas errors: the architecture asked for, and what the chapters compile for."""
    ran = run_command(capsys, "inspect", "--arch", arch)
    assert_one_line_error(ran, 2, f"{arch} is older than the chapters support", "sm_80 and newer", "sm_90")
    assert ran.out == ""


def test_inspect_markdown_and_instance_options(capsys):
    ran = run_command(capsys, "inspect", "1", "ldmatrix", "--markdown", "--causal", "--dtype", "fp16")
    assert ran.code == 0, ran.err
    assert "flash_attention<__half, true>" in ran.out
    assert re.search(r"^\| LDSM\.MT88 +\| +0 \| +\*\*\d+\*\* \|$", ran.out, flags=re.MULTILINE), ran.out


def test_a_missing_tool_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    def missing(name):
        raise BuildError(f"{name} not found: install the CUDA toolkit or `pip install nvidia-cuda-{name}`")

    monkeypatch.setattr(build, "CACHE_DIR", tmp_path)  # nothing cached: the chapter is disassembled
    monkeypatch.setattr(sass, "find_tool", missing)
    ran = run_command(capsys, "inspect", "1", "--markdown")
    assert ran.code == 1 and ran.err.startswith("compiling k01_naive for sm_90 ...\n")
    error = ran.err.splitlines()[1:]
    assert len(error) == 1 and "runner.py inspect: error: cuobjdump not found" in error[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "99"], "no chapter '99'"),
        (["inspect", "--arch"], "expected one argument"),
        (["inspect", "--arch", "ampere"], "expected a GPU architecture such as sm_80 or sm_90, got 'ampere'"),
        (["inspect", "--dtype", "fp8"], "invalid choice"),
        (["diff", "3"], "the following arguments are required: b"),
        (["diff", "3", "99"], "no chapter '99'"),
        (["diff", "3", "4", "-U", "-1"], "must be 0 or more"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args, message, capsys):
    ran = run_command(capsys, *args)
    assert_one_line_error(ran, 2, message)
    assert ran.err.startswith(f"runner.py {args[0]}: error:")


# --- diff ---------------------------------------------------------------------------------------------


def test_diff_3_4_shows_the_swizzle(capsys):
    ran = run_command(capsys, "diff", "3", "4")
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert any(line.startswith("+") and "^ (row % 8)" in line for line in lines)
    assert "--- k03_ldmatrix/flash_attention.cu" in lines and "+++ k04_swizzle/loader.py" in lines
    assert "\x1b[" not in ran.out  # not a terminal: no colour codes


def test_diff_colours_a_terminal_unless_asked_not_to(capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured, plain = run_command(capsys, "diff", "3", "4"), run_command(capsys, "diff", "3", "4", "--no-color")
    assert "\x1b[" in coloured.out and "\x1b[" not in plain.out
    assert ANSI.sub("", coloured.out) == plain.out


def test_diff_takes_slugs_and_plain_output(capsys):
    by_slug = run_command(capsys, "diff", "ldmatrix", "k04_swizzle", "--no-color")
    assert by_slug.code == 0 and by_slug.out == run_command(capsys, "diff", "3", "4").out


def test_diff_takes_an_ablation_variant_by_name(capsys):
    """A variant against its chapter: the idea it changes, here the next K tile's barrier asked under the softmax."""
    ran = run_command(capsys, "diff", "21", "k21_peeked", "--no-color")
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert "+++ k21_peeked/flash_attention.cu" in lines and "--- k21_maxima_first/flash_attention.cu" in lines
    assert any(line.startswith("+") and "mbarrier_test(&k_filled[(count + 1) % STAGES]" in line for line in lines)


def test_a_reader_who_stops_reading_the_pipe_gets_no_traceback():
    """`runner.py diff 3 4 | head -1`: the diff is longer than one line; the runner stops quietly, exit status 0."""
    runner = Path(__file__).resolve().parent.parent / "runner.py"
    ran = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f'"{sys.executable}" "{runner}" diff 3 4 --no-color | head -1'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0 and ran.stdout.startswith("--- k03_ldmatrix/flash_attention.cu"), ran.stderr
    assert "Traceback" not in ran.stderr and "BrokenPipe" not in ran.stderr, ran.stderr


def test_diff_w_shows_code_moved_into_a_block_as_the_block_alone(capsys):
    plain, ignoring = run_command(capsys, "diff", "11", "12"), run_command(capsys, "diff", "11", "12", "-w")
    assert plain.code == ignoring.code == 0, plain.err + ignoring.err
    plain, ignoring = changed(plain.out.splitlines()), changed(ignoring.out.splitlines())
    # Kernel 12's producer asks for Q as kernel 11's thread 0 did: the line moves one level in, nothing more.
    moved = "load_tile<BLOCK_Q>(q_smem, q_map, head, q0, batch, q_barrier);"
    assert any(moved in line for line in plain) and not any(moved in line for line in ignoring)
    assert any(line.startswith("+") and "if (threadIdx.x == N_WARPS * 32) {" in line for line in ignoring)
    assert len(ignoring) < len(plain)


# A chapter whose idea is a whole second kernel beside the one before: its budget, and why.
WHOLE_KERNELS = {"k20_decode_kernel": 380}  # decode_attention, with the mma.sync and ldmatrix helpers it brings


@pytest.mark.parametrize("before, after", list(zip(CHAPTERS[:-1], CHAPTERS[1:], strict=True)), ids=lambda c: c.name)
def test_neighbouring_kernels_differ_by_a_short_diff(before, after):
    """Each chapter is the one before plus one idea: its kernel's diff, as `runner.py diff` prints it without -w,
    changes no more lines than the project's budget (a chapter that adds a second kernel, its own)."""
    diff = unified_diff(before.source, after.source, context=0)
    assert 0 < len(changed(diff)) <= WHOLE_KERNELS.get(after.name, DIFF_BUDGET)


def test_the_readme_states_the_diff_budget():
    """The number the README gives is the one the test above holds the chapters to."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"at most {DIFF_BUDGET} changed lines of kernel (`DIFF_BUDGET`" in readme
