"""The command line, as a user without a GPU meets it: saved runs, every argument mistake, the ablate command.

Each command runs in this process (``main(argv)``); one test runs ``python runner.py`` itself.
"""

import json
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernels.tools import commands
from kernels.tools.ablations import ABLATIONS_DIR
from kernels.tools.ladder import grid_of
from kernels.tools.runs import Run, load_runs, save_runs
from kernels.tools.stats import rotated
from kernels.tools.tables import grid_cells, markdown_grid, steps
from tests.helpers import assert_one_line_error, hide_gpu, run_command

ROOT = Path(__file__).resolve().parent.parent


# --- saved runs: one shape, three references' worth of rows, the samples of every round ----------------------

SHAPE = {
    "batch": 2,
    "seq_len": 64,
    "heads": 1,
    "kv_heads": 1,
    "kv_len": 64,
    "head_dim": 128,
    "dtype": "bf16",
    "causal": False,
}
DEVICE = "Test GPU (1 SMs)"


def sample_row(name, kind, round_ms, family=None):
    """A row of a new-format file: three repeats per round around the given medians."""
    return {
        "name": name,
        "kind": kind,
        "family": family,
        "max_abs": 1e-3,
        "rel_l2": 2e-3,
        "ok": None if kind == "reference" else True,
        "samples_ms": [[ms * 1.01, ms, ms * 0.98] for ms in round_ms],
    }


def new_run(rows):
    order = [rotated([r["name"] for r in rows], i) for i in range(len(rows[0]["samples_ms"]))]
    return {
        "shape": SHAPE,
        "environment": {"device": DEVICE, "command": "python runner.py --json run.json"},
        "flops": 1e12,
        "order": order,
        "rows": rows,
    }


NEW_RUN = [
    new_run(
        [
            sample_row("torch FA2", "reference", [1.0, 1.1, 1.0]),
            sample_row("k01_naive", "chapter", [4.0, 4.2, 4.0], "mma.sync"),
            sample_row("k02_cp_async", "chapter", [2.0, 2.1, 2.0], "mma.sync"),  # a clear step: 2x in every round
            sample_row("k03_ldmatrix", "chapter", [1.98, 2.3, 2.0], "mma.sync"),  # a step within noise
        ]
    )
]

OLD_RUN = [  # as results/*.json were written before rounds: one median per row, derived columns stored
    {
        "shape": {"batch": 2, "seq_len": 64, "heads": 1, "head_dim": 128, "dtype": "bf16", "causal": False},
        "environment": {"device": DEVICE},
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


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(NEW_RUN))
    return path


def test_help_lists_the_options(capsys):
    ran = run_command(capsys, "--help")
    assert ran.code == 0
    for option in (
        "--seq-len",
        "--dtype",
        "--causal",
        "--kernels",
        "--markdown",
        "--json",
        "--plot",
        "--rounds",
        "--repeats",
        "--warmup",
        "--kv-heads",
        "--kv-len",
        "--from-json",
        "ablate",
    ):
        assert option in ran.out


def test_without_a_gpu_says_so_naming_what_was_asked(capsys, monkeypatch):
    hide_gpu(monkeypatch)
    assert_one_line_error(
        run_command(capsys, "--kernels", "1,3"),
        1,
        "No CUDA GPU found: timing k01_naive and k03_ldmatrix needs an NVIDIA GPU",
    )
    assert_one_line_error(run_command(capsys), 1, "No CUDA GPU found: timing the ladder")


def test_python_runner_py_runs_as_a_program(saved):
    """The entry point itself, in a process of its own: a saved run shown as Markdown."""
    command = [sys.executable, str(ROOT / "runner.py"), "--from-json", str(saved), "--markdown"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "| k02_cp_async" in result.stdout and result.stderr == ""


def test_a_new_file_round_trips(saved, tmp_path):
    runs = load_runs(saved)
    again = tmp_path / "again.json"
    save_runs(runs, again)
    assert json.loads(again.read_text()) == json.loads(saved.read_text())
    assert runs[0].rounds == 3 and runs[0].order[1] == ["k01_naive", "k02_cp_async", "k03_ldmatrix", "torch FA2"]
    assert runs[0].rows[1].samples_ms == NEW_RUN[0]["rows"][1]["samples_ms"]


def test_an_old_file_reads_as_one_round(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(OLD_RUN))
    run = load_runs(path)[0]
    assert run.rounds == 1 and run.rows[1].samples_ms == [[2.0]]
    assert run.rows[1].tflops == pytest.approx(50.0) and run.shape["kv_heads"] == 1 and run.shape["kv_len"] == 64


def test_shows_an_old_file_as_markdown(tmp_path, capsys):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(OLD_RUN))
    ran = run_command(capsys, "--from-json", path, "--markdown")
    assert ran.code == 0, ran.err
    assert "| k01_naive" in ran.out and "50.0%" in ran.out and "one round" in ran.out


def test_shows_spreads_and_marks_a_step_within_noise(saved, capsys):
    ran = run_command(capsys, "--from-json", saved, "--markdown")
    assert ran.code == 0, ran.err
    lines = {line.split("|")[1].strip(): line for line in ran.out.splitlines() if line.startswith("| k0")}
    assert "2.00× [" in lines["k02_cp_async"] and "~" not in lines["k02_cp_async"]
    assert "× ~ [" in lines["k03_ldmatrix"]
    assert "~: the step's min–max includes 1.00" in ran.out


def test_a_pipe_gets_the_rich_table_whole_within_the_pipe_width(saved, capsys):
    from kernels.tools.side_by_side import PIPE_WIDTH

    ran = run_command(capsys, "--from-json", saved)
    assert ran.code == 0, ran.err
    assert "k03_ldmatrix" in ran.out and "…" not in ran.out and "\x1b[" not in ran.out
    assert max(len(line) for line in ran.out.splitlines()) <= PIPE_WIDTH


def test_from_json_with_kernels_keeps_those_rows_and_steps_between_them(saved, capsys):
    ran = run_command(capsys, "--from-json", saved, "--markdown", "--kernels", "1,3")
    assert ran.code == 0, ran.err
    assert "k02_cp_async" not in ran.out and "| torch FA2" in ran.out
    k03 = next(line for line in ran.out.splitlines() if line.startswith("| k03_ldmatrix"))
    assert "2.00×" in k03  # now over k01, the chapter before it in what is shown


def test_from_json_can_be_saved_again_in_the_new_format(tmp_path, capsys):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(OLD_RUN))
    ran = run_command(capsys, "--from-json", old, "--json", new)
    assert ran.code == 0 and ran.err == f"wrote {new}\n"
    assert ran.out == ""  # the saved run's table was printed when it was measured
    assert json.loads(new.read_text())[0]["rows"][1]["samples_ms"] == [[2.0]]


def write_peak(tmp_path, device):
    peak = tmp_path / "peak.json"
    peak.write_text(
        json.dumps(
            {"environment": {"device": device}, "ceilings": {"mma.sync": {"tflops": 500.0, "spread": [490.0, 510.0]}}}
        )
    )
    return peak


def test_percent_of_peak_from_the_ceiling_of_the_same_device(saved, tmp_path, capsys):
    ran = run_command(capsys, "--from-json", saved, "--markdown", "--peak", write_peak(tmp_path, DEVICE))
    k01 = next(line for line in ran.out.splitlines() if line.startswith("| k01_naive"))
    assert "| 25.0%      | 50.0%" in k01  # of FA2, then 1e12 FLOP in 4 ms: 250 TFLOP/s of a 500 TFLOP/s ceiling
    assert "% of peak: empty" not in ran.out


@pytest.mark.parametrize("device", [None, "Another GPU (2 SMs)"])
def test_percent_of_peak_is_empty_with_a_reason(saved, tmp_path, device, capsys):
    peak = tmp_path / "none.json" if device is None else write_peak(tmp_path, device)
    ran = run_command(capsys, "--from-json", saved, "--markdown", "--peak", peak)
    k01 = next(line for line in ran.out.splitlines() if line.startswith("| k01_naive"))
    assert "50.0%" not in k01
    reason = "no " if device is None else "was measured on Another GPU"
    assert next(line for line in ran.out.splitlines() if line.startswith("% of peak: empty")).count(reason)


def test_plot_has_error_bars_and_bands_from_a_saved_run(saved, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    from matplotlib.container import BarContainer

    from kernels.tools.plot import plot_ladder

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    run = load_runs(saved)[0]
    plot_ladder(run, tmp_path / "ladder.png")
    assert (tmp_path / "ladder.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    axes = figures[0].axes  # one row of bars per eight kernels
    bars = [next(c for c in ax.containers if isinstance(c, BarContainer)) for ax in axes]
    segments = [segment for row_bars in bars for segment in row_bars.errorbar.lines[2][0].get_segments()]
    kernels = [row for row in run.rows if row.kind != "reference"]
    for segment, row in zip(segments, kernels, strict=True):
        assert sorted(segment[:, 1]) == pytest.approx([row.tflops_spread.low, row.tflops_spread.high])
    band = run.rows[0].tflops_spread
    for ax, row_bars in zip(axes, bars, strict=True):
        assert any(patch.get_y() == pytest.approx(band.low) for patch in ax.patches if patch not in row_bars.patches)


def test_plots_a_saved_run_from_the_command_line_and_says_where(saved, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "ladder.svg"
    ran = run_command(capsys, "--from-json", saved, "--plot", plot)
    assert ran.code == 0, ran.err
    assert plot.read_text().lstrip().startswith("<?xml")
    assert ran.err == f"wrote {plot}\n" and ran.out == ""  # the table is not printed again
    ran = run_command(capsys, "--from-json", saved, "--plot", plot, "--markdown")  # unless asked for
    assert ran.out.count("| k01_naive") == 1 and ran.err == f"wrote {plot}\n"


# --- every mistake: one line, a non-zero exit, before any GPU work -------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seq-len", "abc"], "--seq-len"),
        (["--seq-len", "64,0"], "--seq-len must be at least 1"),
        (["--kernels", "99"], "no chapter '99'"),
        (["--head-dim", "64"], "--head-dim"),
        (["--repeats", "0"], "--repeats: must be at least 1"),
        (["--warmup", "0"], "--warmup: must be at least 1"),
        (["--rounds", "-2"], "--rounds: must be at least 1"),
        (["--batch", "0"], "--batch: must be at least 1"),
        (["--kv-heads", "0"], "--kv-heads: must be at least 1"),
        (["--heads", "16", "--kv-heads", "5"], "--heads 16 is not a multiple of --kv-heads 5"),
        (["--kv-len", "0"], "--kv-len: must be at least 1"),
        (["--json", "no/such/folder/run.json"], "--json: the folder no/such/folder does not exist"),
        (["--plot", "no/such/folder/ladder.png"], "--plot: the folder no/such/folder does not exist"),
        (["--plot", "ladder.xyz"], "matplotlib cannot write 'ladder.xyz'"),
        (["--from-json", "no/such/run.json"], "no/such/run.json: no such file"),
    ],
)
def test_bad_arguments_are_one_line_before_any_gpu_work(args, message, capsys, monkeypatch):
    hide_gpu(monkeypatch)  # a GPU check that came first would say "No CUDA GPU found", exit 1
    assert_one_line_error(run_command(capsys, *args), 2, message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("{not json", "is not JSON"),
        ("[]", "expected a list of runs"),
        ('{"rows": []}', "expected a list of runs"),
        ('[{"shape": {}, "environment": {}}]', "no field 'rows'"),
        ('[{"shape": {}, "environment": {}, "rows": [{"name": "x"}]}]', "no field"),
        (json.dumps([{**NEW_RUN[0], "order": [["torch FA2"]]}]), "one sample list per round"),
        (json.dumps([new_run([sample_row("torch FA2", "reference", [-1.0])])]), "positive times"),
        (json.dumps([{**NEW_RUN[0], "shape": {"heads": 1, "seq_len": 64}}]), "the shape has no batch, head_dim"),
        (json.dumps([new_run([{**sample_row("k01_naive", "chapter", [1.0]), "ok": "yes"}])]), "ok must be"),
    ],
)
def test_a_file_that_is_not_a_saved_run_is_one_line(tmp_path, text, message, capsys):
    path = tmp_path / "run.json"
    path.write_text(text)
    assert_one_line_error(run_command(capsys, "--from-json", path), 2, message)


@pytest.mark.parametrize("option", [["--causal"], ["--seq-len", "128"], ["--batch=4"], ["--rounds", "3"]])
def test_from_json_refuses_the_options_that_shape_a_run(saved, option, capsys):
    ran = run_command(capsys, "--from-json", saved, *option)
    assert_one_line_error(ran, 2, f"leave out {option[0].split('=')[0]}")


def test_from_json_with_a_chapter_the_file_lacks(saved, capsys):
    assert_one_line_error(run_command(capsys, "--from-json", saved, "--kernels", "4"), 2, "holds no k04_swizzle")


def test_plot_without_matplotlib_is_one_line(tmp_path, capsys, monkeypatch):
    hide_gpu(monkeypatch)
    monkeypatch.setitem(sys.modules, "matplotlib.backend_bases", None)  # as if it were not installed
    ran = run_command(capsys, "--plot", tmp_path / "ladder.png")
    assert_one_line_error(ran, 2, "--plot needs matplotlib")


# --- ablate, against a fake kernels.tools.ablations -----------------------------------------------------------------


@dataclass(frozen=True)
class FakeAblation:
    name: str
    number: int
    title: str
    rows: tuple
    columns: tuple
    cells: dict
    contenders: list


FAKE = FakeAblation(
    name="ch03_fake",
    number=3,
    title="loads against layouts",
    rows=("per-lane loads", "ldmatrix"),
    columns=("256-byte rows", "swizzled rows"),
    cells={
        ("per-lane loads", "256-byte rows"): "k02_cp_async",
        ("per-lane loads", "swizzled rows"): "k02_swizzled",
        ("ldmatrix", "256-byte rows"): "k03_ldmatrix",
        ("ldmatrix", "swizzled rows"): "k04_swizzle",
    },
    contenders=[
        types.SimpleNamespace(name=name) for name in ("k02_cp_async", "k02_swizzled", "k03_ldmatrix", "k04_swizzle")
    ],
)


def test_ablate_parses_its_set_and_options():
    args = commands.ablate_parser().parse_args(["3", "--rounds", "2", "--seq-len", "1024", "--causal", "--markdown"])
    assert args.set == "3" and args.rounds == 2 and args.seq_lens == [1024] and args.causal and args.markdown
    # what the ladder's engine reads, and an ablation has no say in
    assert args.kv_heads is None and args.kv_len is None and args.plot is None and args.from_json is None


def test_ablate_help_names_each_set_as_typed_and_its_folder(capsys):
    ran = run_command(capsys, "ablate", "--help")
    assert ran.code == 0
    text = " ".join(ran.out.split())
    folders = sorted(ABLATIONS_DIR.glob("ch[0-9][0-9]_*"))
    assert folders and f"one of {', '.join(str(int(f.name[2:4])) for f in folders)}" in text
    for folder in folders:
        assert f"{int(folder.name[2:4])} (docs/ablations/{folder.name}/)" in text


def test_ablate_decode_takes_the_decode_shapes():
    args = commands.ablate_parser().parse_args(["19", "--decode", "--rounds", "2"])
    assert args.decode and args.shapes == [dict(shape) for shape in commands.DECODE_SHAPES]
    assert all(shape["seq_len"] == 1 for shape in args.shapes)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["4"], "no ablation set '4'"),
        (["3", "--repeats", "0"], "--repeats"),
        (["3", "--decode", "--batch", "4"], "--decode times the decode shapes; it takes no --batch"),
        (["3", "--decode", "--causal"], "it takes no --causal"),
    ],
)
def test_ablate_mistakes_are_one_line_before_any_gpu_work(capsys, monkeypatch, args, message):
    hide_gpu(monkeypatch)
    assert_one_line_error(run_command(capsys, "ablate", *args), 2, message)


def test_ablate_without_a_gpu_names_the_set(capsys, monkeypatch):
    hide_gpu(monkeypatch)
    ran = run_command(capsys, "ablate", "5")
    assert_one_line_error(ran, 1, "No CUDA GPU found: timing ablation set 5 (docs/ablations/ch05_pipelining)")
    assert "the ladder" not in ran.err


def test_ablate_builds_the_grid_of_median_tflops():
    grid = grid_of(FAKE)
    rows = [
        sample_row("torch FA2", "reference", [1.0, 1.0]),
        sample_row("k02_cp_async", "chapter", [4.0, 4.4]),
        sample_row("k02_swizzled", "variant", [2.0, 2.0]),
        sample_row("k03_ldmatrix", "chapter", [4.0, 4.0]),
        sample_row("k04_swizzle", "chapter", [1.0, 1.0]),
    ]
    run = Run.from_json({**new_run(rows), "grid": grid.to_json()})
    assert run.grid == grid
    headers, lines = grid_cells(run)
    assert headers == ["TFLOP/s", "256-byte rows", "swizzled rows"]
    assert lines[0] == ["per-lane loads", "238.6 [227.3–250.0] (k02_cp_async)", "500.0 [500.0–500.0] (k02_swizzled)"]
    assert lines[1][2] == "1000.0 [1000.0–1000.0] (k04_swizzle)"
    assert "| ldmatrix" in markdown_grid(run)
    assert list(steps(run)) == ["k03_ldmatrix", "k04_swizzle"]  # variants take no step


def test_a_decode_ablation_grid_is_in_gb_per_s():
    """At a memory-bound shape the grid shows GB/s, as the run's table does."""
    rows = [
        sample_row("torch FA2", "reference", [1.0, 1.0]),
        sample_row("k02_cp_async", "chapter", [1.0, 1.0]),
        sample_row("k02_swizzled", "variant", [2.0, 2.0]),
        sample_row("k03_ldmatrix", "chapter", [1.0, 1.0]),
        sample_row("k04_swizzle", "chapter", [1.0, 1.0]),
    ]
    decode = {**SHAPE, "batch": 8, "seq_len": 1, "heads": 32, "kv_heads": 8, "kv_len": 32768, "causal": False}
    run = Run.from_json(
        {**new_run(rows), "shape": decode, "flops": 4 * 8 * 32 * 32768 * 128, "grid": grid_of(FAKE).to_json()}
    )
    headers, lines = grid_cells(run)
    assert headers[0] == "GB/s"
    rate = f"{run.bytes_moved / 2.0 / 1e6:.0f}"  # bytes over 2 ms, in GB/s
    assert lines[0][2] == f"{rate} [{rate}–{rate}] (k02_swizzled)"


def test_a_saved_ablation_shows_its_grid(tmp_path, capsys):
    rows = [
        sample_row("torch FA2", "reference", [1.0]),
        sample_row("k02_cp_async", "chapter", [2.0]),
        sample_row("k02_swizzled", "variant", [1.5]),
        sample_row("k03_ldmatrix", "chapter", [2.0]),
        sample_row("k04_swizzle", "chapter", [1.0]),
    ]
    path = tmp_path / "ablation.json"
    path.write_text(json.dumps([{**new_run(rows), "grid": grid_of(FAKE).to_json()}]))
    ran = run_command(capsys, "--from-json", path, "--markdown")
    assert ran.code == 0, ran.err
    assert "**loads against layouts**" in ran.out and "| per-lane loads" in ran.out
