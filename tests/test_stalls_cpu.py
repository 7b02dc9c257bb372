"""`runner.py stalls` without a GPU: ncu's source page parsed, samples summed by kind of instruction, the readings
saved and shown again, every failure one line on stderr.

A fake `ncu` on PATH writes nothing for the profiling run and prints a source page for `ncu -i REPORT --page source`.
"""

import json
import os
import sys
from pathlib import Path

import pytest

from kernels.tools import profiling
from kernels.tools.stalls import OTHER, Instruction, kind, parse_source_csv, shares
from tests.helpers import assert_one_line_error, hide_gpu, run_command

HEADER = [
    "Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)", "# Samples",
    "Instructions Executed", "stall_barrier", "stall_long_sb", "stall_wait", "stall_barrier (Not Issued)",
]  # fmt: skip
ROWS = [  # address, SASS, all samples, not issued, executed, barrier, long scoreboard, wait
    ("0x7f0000001000", "      HGMMA.64x128x16.F32.BF16 R24, R180, gdesc[UR8].tnspB, R24", 30, 5, 2048, 0, 0, 25),
    ("0x7f0000001010", "      WARPGROUP.DEPBAR.LE gsb0, 0x1", 50, 40, 2048, 40, 0, 0),
    ("0x7f0000001020", "@!P0  BRA 0x7f0000001000", 15, 15, 256, 0, 15, 0),
    ("0x7f0000001030", "      UIADD3 UR18, UR42, UR13, URZ", 5, 1, 2048, 0, 0, 1),
    ("0x7f0000001040", "      IMAD.MOV.U32 R1, RZ, RZ, R2", 0, 0, 0, 0, 0, 0),
]


def source_page(kernel: str = "void flash_attention<__nv_bfloat16, (bool)0>(TensorMap)") -> str:
    """ncu's source page as --page source --csv --print-source sass prints it."""
    lines = [f'"Kernel Name","{kernel}",', ",".join(f'"{h}"' for h in HEADER)]
    for address, sass, *counts in ROWS:
        cells = [address, sass, *(str(n) for n in counts[:2]), str(counts[0]), *(str(n) for n in counts[2:]), "0"]
        lines.append(",".join(f'"{cell}"' for cell in cells))
    return "\n".join(lines) + "\n"


def test_the_source_page_reads_as_instructions_at_offsets():
    stalls = parse_source_csv(source_page(), "k19_dynamic_schedule")
    assert stalls.kernel.startswith("void flash_attention<__nv_bfloat16")
    assert [i.offset for i in stalls.instructions] == [0, 0x10, 0x20, 0x30, 0x40]
    depbar, branch = stalls.instructions[1], stalls.instructions[2]
    assert (depbar.samples, depbar.not_issued, depbar.executed, depbar.reasons) == (50, 40, 2048, {"barrier": 40})
    assert branch.opcode == "BRA" and branch.reasons == {"long_sb": 15}  # past its predicate; zeros left out


def test_each_instruction_counts_under_its_kind():
    kinds = [kind(i) for i in parse_source_csv(source_page(), "k").instructions]
    assert kinds[:4] == [
        "HGMMA (issuing products)",
        "wgmma waits (WARPGROUP.DEPBAR)",
        "branches (BRA)",
        "uniform datapath (U*, R2UR)",
    ]
    assert kinds[4] == OTHER
    assert kind(Instruction(0, "MUFU.EX2 R1, R1", 1, 1, 1)) == "exponentials (MUFU.EX2)"
    assert kind(Instruction(0, "WARPGROUP.ARRIVE", 1, 1, 1)) == "other WARPGROUP (fences, arrives)"
    assert kind(Instruction(0, "NANOSLEEP.SYNCS 0x989680", 1, 1, 1)) == "retries (YIELD, NANOSLEEP)"


def test_the_shares_add_up_to_every_sample():
    table = shares(parse_source_csv(source_page(), "k"))
    assert sum(all_samples for all_samples, _, _ in table.values()) == pytest.approx(100)
    assert table["wgmma waits (WARPGROUP.DEPBAR)"][:2] == pytest.approx((50, 40))
    assert table["HGMMA (issuing products)"][2] == pytest.approx(2048 / 1e6)


def test_a_page_without_instructions_reads_as_none():
    assert parse_source_csv('"==PROF== Disconnected"\n', "k") is None


@pytest.fixture
def hopper(monkeypatch):
    monkeypatch.setattr(profiling, "this_gpu", lambda: "sm_90")


def fake_ncu(folder: Path, monkeypatch, page: str) -> None:
    """An `ncu` first on PATH: the profiling run must sample with the source counters, clocks left alone, into a
    report; the import of that report prints ``page``. Each call's arguments go to ncu.log."""
    script = folder / "ncu"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "args = sys.argv[1:]\n"
        f"open({str(folder / 'ncu.log')!r}, 'a').write(' '.join(args) + '\\n')\n"
        "joined = ' '.join(args)\n"
        "if '-i' in args:\n"
        "    if '--page source --csv --print-source sass' not in joined:\n"
        "        sys.exit('fake ncu: not the source page')\n"
        f"    print({page!r})\n"
        "elif '--section SourceCounters' not in joined or '--clock-control none' not in joined or '-o' not in args:\n"
        "    sys.exit('fake ncu: not a source-counter run into a report')\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_stalls_shows_saves_and_shows_again(tmp_path, monkeypatch, capsys, hopper):
    fake_ncu(tmp_path, monkeypatch, source_page())
    saved = tmp_path / "stalls.json"
    ran = run_command(capsys, "stalls", "19", "--seq-len", "256", "--markdown", "--json", saved)
    assert ran.code == 0, ran.err
    assert "| wgmma waits (WARPGROUP.DEPBAR)" in ran.out and "50.0% [40.0%], 0.0 M" in ran.out
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ran.out  # the instruction with the most samples is listed
    record = json.loads(saved.read_text())
    assert record["shape"]["seq_len"] == 256 and list(record["sources"]) == ["k19_dynamic_schedule/flash_attention.cu"]
    assert record["command"].startswith("python runner.py stalls 19")
    assert len(record["stalls"][0]["instructions"]) == 4  # the instruction never reached is left out
    calls = (tmp_path / "ncu.log").read_text().splitlines()
    assert "kernels.tools.run_once k19_dynamic_schedule --batch 16 --seq-len 256" in calls[0]
    again = run_command(capsys, "stalls", "--from-json", saved, "--markdown")
    assert again.code == 0 and again.out == ran.out


def test_stalls_without_a_gpu_is_one_line(monkeypatch, capsys):
    hide_gpu(monkeypatch)
    assert_one_line_error(run_command(capsys, "stalls", "19", "fa4"), 1, "No CUDA GPU found: profiling k19")


def test_stalls_from_a_file_it_did_not_save_is_one_line(tmp_path, capsys):
    bad = tmp_path / "run.json"
    bad.write_text("[]")
    assert_one_line_error(run_command(capsys, "stalls", "--from-json", bad), 2, "not stalls saved by")


def test_stalls_names_why_ncu_sampled_nothing(tmp_path, monkeypatch, capsys, hopper):
    fake_ncu(tmp_path, monkeypatch, "==WARNING== No kernels were profiled.")
    ran = run_command(capsys, "stalls", "19")
    assert ran.code == 1 and "ncu sampled no instruction of k19_dynamic_schedule" in ran.err.splitlines()[-1]
