"""The read rates without a GPU: the readers compile for Hopper and copy the way they claim, the command refuses
what it cannot do in one line, and a run's tables and JSON (and its section of docs/results.md) come out whole."""

import json
import sys
from pathlib import Path

import pytest

from kernels.tools import read_rate
from kernels.tools.read_rate import (
    CP_ASYNC,
    CP_ASYNC_ITEMS,
    LOADS,
    READERS,
    SOURCE,
    TMA_PLANES,
    TMA_ROWS,
    ReadRateRun,
    ShapeRates,
    load_read_rate,
    save_read_rate,
)
from kernels.tools.sass import disassemble, opcodes, resource_usage
from tests.helpers import assert_one_line_error, hide_gpu, run_command, total

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = [(reader, checksum) for reader in READERS for checksum in (False, True)]
IDS = [reader.entry(checksum) for reader, checksum in INSTANCES]
STAGED = [TMA_PLANES, TMA_ROWS, CP_ASYNC, CP_ASYNC_ITEMS]  # the readers that copy through shared memory


@pytest.fixture(scope="module")
def sass():
    """Each instance's opcode counts, by its C++ name, compiled for sm_90a as `runner.py read_rate` runs it."""
    cubin = SOURCE.compile("sm_90a")
    by_mangled = disassemble(cubin)
    return {entry: opcodes(by_mangled[mangled]) for entry, mangled in cubin.lowered_names.items()}


def test_every_reader_compiles_for_hopper_without_local_memory():
    cubin = SOURCE.compile(SOURCE.build_arch("sm_90"))
    assert cubin.arch == "sm_90a"
    assert set(cubin.lowered_names) == {reader.entry(checksum) for reader, checksum in INSTANCES}
    for name, used in resource_usage(cubin).items():
        assert used["STACK"] == used["LOCAL"] == 0, f"{name} uses local memory: {used}"
    with pytest.raises(ValueError, match="runs on sm_90 GPUs only; this is sm_80"):
        SOURCE.build_arch("sm_80")


@pytest.mark.parametrize(("reader", "checksum"), INSTANCES, ids=IDS)
def test_each_reader_copies_by_its_mechanism_alone(reader, checksum, sass):
    """The TMA readers issue bulk tensor copies and no cp.async; the cp.async readers the reverse, each thread's
    completion counted on the stage's mbarrier; the loads neither, but 128-bit global loads."""
    counts = sass[reader.entry(checksum)]
    tma, cp_async, arrives = total(counts, "UTMALDG"), total(counts, "LDGSTS"), total(counts, "ARRIVES")
    wide_loads = sum(n for opcode, n in counts.items() if opcode.startswith("LDG.") and ".128" in opcode)
    if reader in (TMA_PLANES, TMA_ROWS):
        assert tma > 0 and cp_async == 0 and wide_loads == 0
    elif reader in (CP_ASYNC, CP_ASYNC_ITEMS):
        assert cp_async > 0 and total(counts, "ARRIVES.LDGSTSBAR") == arrives > 0 and tma == 0 and wide_loads == 0
    else:
        assert reader is LOADS and wide_loads > 0 and tma == cp_async == 0


def test_one_box_per_row_is_half_the_copies_of_one_per_plane(sass):
    """Per tile of K and of V, the plane reader issues two TMA copies and the row reader one."""
    planes, rows = (total(sass[reader.entry(False)], "UTMALDG") for reader in (TMA_PLANES, TMA_ROWS))
    assert planes == 2 * rows == 4


@pytest.mark.parametrize("reader", STAGED, ids=[reader.entry(False) for reader in STAGED])
def test_only_the_checksum_instances_read_shared_memory(reader, sass):
    """The timed consumers wait and free each stage and read none of it; under CHECKSUM they read every tile."""
    timed, checked = sass[reader.entry(False)], sass[reader.entry(True)]
    assert total(timed, "LDS.128") == 0 and total(checked, "LDS.128") > 0
    assert total(timed, "REDG") == 0 and total(checked, "REDG") > 0


def test_the_loads_fit_every_block_an_sm_is_given():
    """LOAD_BLOCKS_PER_SM blocks of LOAD_THREADS fill an SM's 2,048 thread slots only within 32 registers each."""
    cubin = SOURCE.compile("sm_90a")
    used = resource_usage(cubin)[cubin.lowered_names[LOADS.entry(False)]]
    assert read_rate.LOAD_THREADS * read_rate.LOAD_BLOCKS_PER_SM == 2048
    assert used["REG"] <= 65536 // 2048


# ---------------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------------


def test_help_lists_the_options_and_the_ladder_names_the_command(capsys):
    ran = run_command(capsys, "read_rate", "--help")
    assert ran.code == 0
    for option in ("--rounds", "--json", "--markdown"):
        assert option in ran.out
    assert "(default 5)" in ran.out
    assert "runner.py read_rate" in run_command(capsys, "--help").out


def test_without_a_gpu_one_line_and_exit_1(capsys, monkeypatch):
    hide_gpu(monkeypatch)
    ran = run_command(capsys, "read_rate", "--rounds", "2")
    assert_one_line_error(ran, 1)
    assert ran.err.strip() == f"runner.py read_rate: error: {read_rate.NO_GPU}" and ran.out == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds", "0"], "--rounds: must be at least 1, got 0"),
        (["--rounds", "two"], "--rounds: expected an integer, got 'two'"),
        (["--json", "no/such/read_rate.json"], "--json: the folder no/such does not exist"),
        (["--seq-len", "8"], "unrecognized arguments: --seq-len 8"),
    ],
)
def test_mistakes_are_one_line_before_any_gpu_work(args, message, capsys, monkeypatch):
    hide_gpu(monkeypatch)
    assert_one_line_error(run_command(capsys, "read_rate", *args), 2, message, "runner.py read_rate --help")


# ---------------------------------------------------------------------------------------------------
# A run's tables and JSON, on made-up samples
# ---------------------------------------------------------------------------------------------------


def made_up_run(rounds=5):
    """Two shapes; every reader's GB/s a made-up rate around its own level, the loads the fastest."""
    levels = {reader.name: 4000.0 - 200.0 * i for i, reader in enumerate(reversed(READERS))}
    shapes = [
        ShapeRates(
            {**shape, "head_dim": 128, "dtype": "bf16"},
            4 * shape["batch"] * shape["kv_len"] * shape["kv_heads"] * 128,
            {name: [level * (1 + 0.01 * k) for k in (2, -1, 0, 3, -2)[:rounds]] for name, level in levels.items()},
        )
        for shape in ({"batch": 64, "kv_len": 8192, "kv_heads": 8}, {"batch": 8, "kv_len": 32768, "kv_heads": 8})
    ]
    environment = {"device": "Test GPU (2 SMs)", "command": "python runner.py read_rate", "nvrtc": "13.0"}
    return ReadRateRun(environment, {"rounds": rounds, "repeats": 10, "warmup": 3}, shapes)


def test_json_has_the_format_and_reads_back(tmp_path):
    run = made_up_run()
    path = tmp_path / "read_rate.json"
    save_read_rate(run, path)
    assert load_read_rate(path) == run
    data = json.loads(path.read_text())
    assert list(data) == ["environment", "timing", "readers", "shapes"]
    assert list(data["readers"]) == [reader.name for reader in READERS]
    first = data["shapes"][0]
    assert first["shape"] == {"batch": 64, "kv_len": 8192, "kv_heads": 8, "head_dim": 128, "dtype": "bf16"}
    assert first["bytes"] == 2 * 2 * 64 * 8192 * 8 * 128
    for name, rate in first["rates"].items():
        samples = run.shapes[0].samples[name]
        assert rate == {"gbps": sorted(samples)[2], "spread": [min(samples), max(samples)], "samples": samples}


def test_load_names_a_file_of_another_kind(tmp_path):
    ladder = tmp_path / "headline.json"
    ladder.write_text(json.dumps([{"shape": {}, "environment": {}, "rows": []}]))
    with pytest.raises(ValueError, match="headline.json: not a run saved by `runner.py read_rate --json`"):
        load_read_rate(ladder)


def test_markdown_tables_show_every_reader_at_every_shape(capsys):
    run = made_up_run()
    read_rate.print_run(run, markdown=True)
    out = capsys.readouterr().out
    assert out.count("| reader ") == 2 and "**batch 64, kv_len 8192, kv_heads 8, head_dim 128, bf16: 2.15 GB" in out
    loads = run.shapes[0].samples[LOADS.name]
    assert f"| {LOADS.name} " in out and f"{sorted(loads)[2]:.0f} [{min(loads):.0f}–{max(loads):.0f}]" in out
    assert "| 100% " in out  # the loads over themselves
    tma = run.shapes[0].samples[TMA_PLANES.name]
    assert f"| {100 * sorted(a / b for a, b in zip(tma, loads, strict=True))[2]:.0f}% " in out
    for reader in READERS:
        assert out.count(f"| {reader.name} ") == 2 and f"- {reader.name}: {reader.what}" in out
    assert "the median [min–max] over 5 rounds" in out and "mean of 10 launches" in out


def test_rich_tables_print_every_reader_and_one_round_has_no_spread(capsys):
    run = made_up_run(rounds=1)
    read_rate.print_run(run)
    out = capsys.readouterr().out
    assert all(out.count(reader.name) == 3 for reader in READERS)  # two tables and the list of readers
    assert "[" not in out.split("GB/s:")[0] and "one round, so no spread" in out


def test_the_results_page_shows_a_saved_run_and_links_its_text(tmp_path):
    sys.path.insert(0, str(ROOT / "docs"))
    import make_results

    save_read_rate(made_up_run(), tmp_path / "read_rate.json")
    (tmp_path / "read_rate.txt").write_text("the tables\n")
    page = make_results.results_page(tmp_path)
    assert "## Reading a decode KV cache: the TMA, cp.async and 16-byte loads (`results/read_rate.json`)" in page
    assert f"| {CP_ASYNC_ITEMS.name} " in page and "- command: `python runner.py read_rate`" in page
    assert "- [`results/read_rate.txt`](../results/read_rate.txt): the tables of `results/read_rate.json`" in page
