"""`runner.py --clocks`: the SM clock and power read while each contender's calls are timed, kept with the run and
shown as two columns. NVML itself needs a GPU; here a stand-in for it, and saved runs."""

import json
import time

import pytest

from kernels.tools import clocks
from kernels.tools.ceilings import Ceilings
from kernels.tools.clocks import ClockSampler, ClocksUnavailable, Reading, median_reading
from kernels.tools.runs import load_runs, save_runs
from kernels.tools.tables import CLOCK_COLUMNS, columns, table_cells
from tests.helpers import run_command
from tests.test_runner_cpu import NEW_RUN


def with_clocks(mhz_per_row):
    """NEW_RUN, each row with one reading per round: (MHz, W) as given, the same in each round."""
    run = json.loads(json.dumps(NEW_RUN))
    for row, (mhz, watts) in zip(run[0]["rows"], mhz_per_row, strict=True):
        row["clocks"] = [{"sm_mhz": mhz + i, "watts": watts} for i in range(len(row["samples_ms"]))]
    return run


READINGS = [(1980.0, 300.0), (1755.0, 690.0), (1700.0, 700.0), (1650.0, 699.0)]


def test_a_run_keeps_its_clocks_through_a_file(tmp_path):
    path, again = tmp_path / "run.json", tmp_path / "again.json"
    path.write_text(json.dumps(with_clocks(READINGS)))
    runs = load_runs(path)
    assert runs[0].rows[1].clocks == [Reading(1755.0, 690.0), Reading(1756.0, 690.0), Reading(1757.0, 690.0)]
    save_runs(runs, again)
    assert json.loads(again.read_text()) == json.loads(path.read_text())


def test_a_run_without_clocks_has_no_clock_columns_and_writes_none(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(NEW_RUN))
    run = load_runs(path)[0]
    assert not set(CLOCK_COLUMNS) & set(columns(run, Ceilings()))
    save_runs([run], path)
    assert "clocks" not in path.read_text()


def test_the_clock_columns_come_after_the_step_with_the_median_and_spread(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(with_clocks(READINGS)))
    run = load_runs(path)[0]
    shown = columns(run, Ceilings())
    assert shown[shown.index("step") + 1 : shown.index("step") + 3] == CLOCK_COLUMNS and shown[-1] == "check"
    cells = dict(zip(shown, table_cells(run, Ceilings())[2], strict=True))
    assert cells["SM MHz"] == "1701 [1700–1702]" and cells["W"] == "700 [700–700]"


def test_a_row_with_a_reading_missing_for_a_round_is_refused(tmp_path):
    run = with_clocks(READINGS)
    run[0]["rows"][2]["clocks"].pop()
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    with pytest.raises(ValueError, match="one reading per round"):
        load_runs(path)


def test_the_legend_says_what_the_columns_read(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(with_clocks(READINGS)))
    ran = run_command(capsys, "--from-json", path, "--markdown")
    assert ran.code == 0, ran.err
    assert "| SM MHz" in ran.out and "the SM clock and the board's power, read by NVML" in ran.out


def test_from_json_refuses_clocks(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(NEW_RUN))
    ran = run_command(capsys, "--from-json", path, "--clocks")
    assert ran.code != 0 and "leave out --clocks" in ran.err


def test_sampling_reads_until_the_block_ends_and_once_at_its_end(monkeypatch):
    sampler = ClockSampler.__new__(ClockSampler)  # no NVML here: a stand-in reading that counts
    calls = []
    monkeypatch.setattr(sampler, "sample", lambda: calls.append(1) or (1500.0 + len(calls), 650.0), raising=False)
    sampling = sampler.sampling()
    with sampling as samples:
        time.sleep(6 * clocks.SAMPLE_MS / 1000)
    assert len(samples) >= 2 and samples[-1] == (1500.0 + len(calls), 650.0)
    assert median_reading(samples).watts == 650.0


def test_no_samples_is_an_error_not_a_number():
    with pytest.raises(ValueError, match="no clock samples"):
        median_reading([])


def test_without_nvml_the_sampler_says_what_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    with pytest.raises(ClocksUnavailable, match="pip install nvidia-ml-py"):
        ClockSampler(0)
