"""The ceilings without a GPU: their kernels compile and hold what they claim, the command, the JSON format."""

import json
import re

import pytest

from kernels.tools import peak
from kernels.tools.peak import (
    DRAM_COPY,
    L2_READ,
    L2_READ_CU,
    MATMUL,
    MMA_SYNC,
    MMA_SYNC_CU,
    SOURCES,
    WGMMA,
    WGMMA_CU,
    WGMMA_RS,
    WGMMA_SS,
    PeakRun,
    load_peak,
    save_peak,
)
from kernels.tools.sass import disassemble, opcodes, resource_usage
from tests.helpers import addressed, assert_one_line_error, hide_gpu, run_command

BUILDS = [(source, arch) for source in SOURCES for arch in source.build_archs()]
BRANCH_TARGET = re.compile(r"\bBRA\s+(?:\S+\s+)?0x([0-9a-f]+)")


def sass_of(source, arch):
    """SASS by entry name (the C++ name, not the mangled one)."""
    cubin = source.compile(arch)
    by_mangled = disassemble(cubin)
    return {entry: by_mangled[mangled] for entry, mangled in cubin.lowered_names.items()}


def loops(sass):
    """The instructions of each loop: from a backward branch's target up to that branch."""
    lines = addressed(sass)
    found = []
    for address, line in lines:
        branch = BRANCH_TARGET.search(line)
        if branch and int(branch.group(1), 16) < address:  # the final `BRA` to itself is no loop
            target = int(branch.group(1), 16)
            found.append(opcodes("\n".join(text for at, text in lines if target <= at <= address)))
    return found


def count(counts, mnemonic):
    return sum(n for opcode, n in counts.items() if opcode.split(".")[0] == mnemonic)


@pytest.mark.parametrize(("source", "arch"), BUILDS, ids=[f"{s.file}-{a}" for s, a in BUILDS])
def test_compiles_with_nvrtc_without_local_memory(source, arch):
    cubin = source.compile(arch)
    assert set(cubin.lowered_names) == set(source.entries)
    usage = resource_usage(cubin)
    assert set(usage) == set(cubin.lowered_names.values())
    for name, used in usage.items():
        assert used["STACK"] == used["LOCAL"] == 0, f"{name} uses local memory at {arch}: {used}"


@pytest.mark.parametrize("arch", MMA_SYNC_CU.build_archs())
def test_mma_sync_loop_is_every_chain_unrolled(arch):
    """One loop of CHAINS * UNROLL HMMA, and no HMMA anywhere else: the count behind every FLOP counted."""
    sass = sass_of(MMA_SYNC_CU, arch)["mma_sync_peak"]
    (loop,) = loops(sass)
    assert count(loop, "HMMA") == peak.MMA_CHAINS * peak.MMA_UNROLL
    assert count(opcodes(sass), "HMMA") == count(loop, "HMMA")


@pytest.mark.parametrize("entry", WGMMA_CU.entries)
def test_wgmma_loop_is_one_batch(entry):
    """One loop: a batch of BATCH HGMMA and its wait, and no HGMMA anywhere else."""
    sass = sass_of(WGMMA_CU, "sm_90a")[entry]
    (loop,) = loops(sass)
    assert count(loop, "HGMMA") == count(opcodes(sass), "HGMMA") == peak.WGMMA_BATCH
    assert count(loop, "WARPGROUP") >= 2, "the fence and the wait of each batch belong in the loop"


@pytest.mark.parametrize("arch", L2_READ_CU.build_archs())
def test_l2_read_loads_every_pass(arch):
    """Every load sits in a loop (none hoisted), in whole passes, 16 bytes wide and not served by L1."""
    sass = sass_of(L2_READ_CU, arch)["l2_read"]
    loads = {opcode: n for opcode, n in opcodes(sass).items() if opcode.startswith("LDG")}
    assert set(loads) == {"LDG.E.128.STRONG.GPU"}
    in_loops = [count(loop, "LDG") for loop in loops(sass)]
    assert in_loops and all(n > 0 and n % peak.L2_LOADS == 0 for n in in_loops)
    assert sum(in_loops) == sum(loads.values())


def constants(source):
    return {name: int(value) for name, value in re.findall(r"constexpr int (\w+) = (\d+);", source.source.read_text())}


def test_launches_agree_with_the_kernels():
    mma, wgmma, l2 = (constants(source) for source in SOURCES)
    assert (mma["N_WARPS"], mma["CHAINS"], mma["UNROLL"]) == (peak.MMA_N_WARPS, peak.MMA_CHAINS, peak.MMA_UNROLL)
    assert (mma["MMA_M"], mma["MMA_N"], mma["MMA_K"]) == (peak.MMA_M, peak.MMA_N, peak.MMA_K)
    assert wgmma["N_WARPS"] * 32 == peak.WGMMA_THREADS
    assert (wgmma["BLOCKS_PER_SM"], wgmma["TILE"]) == (peak.WGMMA_BLOCKS_PER_SM, peak.WGMMA_TILE)
    assert (wgmma["GROUP_ROWS"], wgmma["WGMMA_K"]) == (peak.WGMMA_M, peak.WGMMA_K)
    assert wgmma["TILE"] // wgmma["WGMMA_K"] == peak.WGMMA_BATCH
    assert (l2["N_THREADS"], l2["LOADS"]) == (peak.L2_THREADS, peak.L2_LOADS)


def test_the_instructions_named_are_the_ones_issued():
    assert peak.INSTRUCTIONS[MMA_SYNC] in MMA_SYNC_CU.source.read_text()
    assert peak.INSTRUCTIONS[WGMMA] in WGMMA_CU.source.read_text()
    assert f"m{peak.WGMMA_M}n{peak.WGMMA_N}k{peak.WGMMA_K}" in peak.INSTRUCTIONS[WGMMA]


def test_wgmma_runs_on_hopper_alone():
    assert WGMMA_CU.build_arch("sm_90") == "sm_90a"
    with pytest.raises(ValueError, match="runs on sm_90 GPUs only; this is sm_80"):
        WGMMA_CU.build_arch("sm_80")
    assert MMA_SYNC_CU.build_arch("sm_80") == "sm_80" and L2_READ_CU.build_arch("sm_90") == "sm_90"


def test_headline_flops_are_the_ladders():
    assert peak.HEADLINE_FLOPS == 4 * 16 * 16 * 4096**2 * 128


# ---------------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------------


def test_without_a_gpu_one_line_and_exit_1(capsys, monkeypatch):
    hide_gpu(monkeypatch)
    ran = run_command(capsys, "peak", "--rounds", "3")
    assert_one_line_error(ran, 1)
    assert ran.err.strip() == f"runner.py peak: error: {peak.NO_GPU}" and ran.out == ""


def test_help_lists_the_options(capsys):
    ran = run_command(capsys, "peak", "--help")
    assert ran.code == 0
    for option in ("--rounds", "--json", "--markdown"):
        assert option in ran.out
    assert "(default 50)" in ran.out


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--rounds", "0"], "--rounds: must be at least 1"), (["--json", "no/such/peak.json"], "no/such does not exist")],
)
def test_mistakes_are_one_line_before_any_gpu_work(args, message, capsys, monkeypatch):
    hide_gpu(monkeypatch)
    assert_one_line_error(run_command(capsys, "peak", *args), 2, message)


# ---------------------------------------------------------------------------------------------------
# The JSON file and the tables, on made-up samples
# ---------------------------------------------------------------------------------------------------


def made_up_run(hopper=True):
    """Five rounds per benchmark around a made-up rate; the register form of wgmma the slower one."""
    rates = {MMA_SYNC: 600.0, MATMUL: 650.0, DRAM_COPY: 4.0, L2_READ: 10.0}
    if hopper:
        rates |= {WGMMA_SS: 700.0, WGMMA_RS: 680.0}
    samples = {name: [rate * (1 + 0.01 * k) for k in (2, -1, 0, 3, -2)] for name, rate in rates.items()}
    return PeakRun({"device": "Test GPU (2 SMs)", "command": "python runner.py peak"}, samples)


def test_json_has_the_format_and_reads_back(tmp_path):
    run = made_up_run()
    path = tmp_path / "peak.json"
    save_peak(run, path)
    assert load_peak(path) == run
    data = json.loads(path.read_text())
    assert list(data) == ["environment", "ceilings", "details", "memory"]
    assert list(data["ceilings"]) == [MMA_SYNC, WGMMA]
    assert list(data["details"]) == [WGMMA_SS, WGMMA_RS, MATMUL]
    assert list(data["memory"]) == [DRAM_COPY, L2_READ]
    for entry in data["ceilings"].values():
        assert set(entry) == {"tflops", "spread", "samples", "instruction"}
    for name, entry in data["memory"].items():
        assert set(entry) == {"tbps", "spread", "samples"}
        assert entry["spread"] == [min(run.samples[name]), max(run.samples[name])]
    mma = data["ceilings"][MMA_SYNC]
    assert mma["tflops"] == sorted(run.samples[MMA_SYNC])[2] and mma["samples"] == run.samples[MMA_SYNC]


def test_wgmma_ceiling_is_the_slower_form():
    run = made_up_run()
    slower = min(run.median(WGMMA_SS), run.median(WGMMA_RS))
    assert run.ceiling(WGMMA) == slower == run.median(WGMMA_RS)
    assert run.to_json()["ceilings"][WGMMA]["samples"] == run.samples[WGMMA_RS]
    assert run.fastest_ms(WGMMA) == pytest.approx(peak.HEADLINE_FLOPS / (slower * 1e12) * 1e3)
    assert run.fastest_ms(MMA_SYNC) > run.fastest_ms(WGMMA)


def test_off_hopper_the_wgmma_rows_are_left_out(tmp_path):
    run = made_up_run(hopper=False)
    data = run.to_json()
    assert list(data["ceilings"]) == [MMA_SYNC] and list(data["details"]) == [MATMUL]
    with pytest.raises(KeyError, match="no wgmma ceiling"):
        run.ceiling(WGMMA)
    save_peak(run, tmp_path / "peak.json")
    assert load_peak(tmp_path / "peak.json") == run


def test_load_peak_names_a_file_of_another_kind(tmp_path):
    ladder = tmp_path / "headline.json"
    ladder.write_text(json.dumps([{"shape": {}, "environment": {}, "rows": []}]))
    with pytest.raises(ValueError, match="headline.json: not a run saved by `runner.py peak --json`"):
        load_peak(ladder)


def test_markdown_tables_show_ceilings_and_fastest_times(capsys):
    run = made_up_run()
    peak.print_run(run, markdown=True)
    out = capsys.readouterr().out
    for name in (MMA_SYNC, WGMMA_SS, WGMMA_RS, MATMUL, DRAM_COPY, L2_READ):
        assert f"| {name} " in out
    assert f"| {WGMMA} " in out and "the slower of the two forms" in out
    assert f"| {WGMMA}    | {run.fastest_ms(WGMMA):.3f} |" in out
    assert "fastest possible time at the headline shape" in out and "2.20 TFLOP" in out
