"""The timeline's stamps (kernels/tools/timeline.py): where they go in the source and in the SASS, and what the
summary reads from them."""

import numpy as np
import pytest

from kernels.build import ALL_INSTANCES
from kernels.tools.timeline import (
    EVENTS,
    IN_FLIGHT,
    Timeline,
    landing_stamped,
    stamped_kernel,
    stamped_source,
    steady_path,
    summarize,
    warps_table,
)
from tests.helpers import (
    CHAPTERS,
    KERNELS,
    assert_one_line_error,
    between_the_waits,
    hide_gpu,
    run_command,
    split_at_the_waits,
)

# k29_half_tile takes its tile loop's last tile out of the loop (tile_step): the loop the stamps go in is not there.
STAMPABLE = [c for c in KERNELS if c.number >= 15 and c.kernel.arch == "sm_90a" and c.name != "k29_half_tile"]


@pytest.mark.parametrize("kernel", STAMPABLE, ids=[c.name for c in STAMPABLE])
def test_every_hopper_kernel_from_15_on_gets_a_stamp_at_each_point(kernel):
    text = stamped_source(kernel.source.read_text())
    calls = [line.strip() for line in text.splitlines() if line.strip().startswith("timeline_stamp(")]
    assert [int(call.rsplit(",", 1)[1].strip(" );")) for call in calls] == list(range(len(EVENTS)))


def test_a_kernel_whose_loop_does_not_count_the_blocks_tiles_is_refused():
    kernel14 = next(c for c in CHAPTERS if c.number == 14)
    with pytest.raises(ValueError, match="count"):
        stamped_source(kernel14.source.read_text())


@pytest.mark.parametrize("number", [16, 20])
@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_stamps_leave_what_runs_between_and_after_the_waits_as_it_was(number, instance):
    kernel = next(c for c in CHAPTERS if c.number == number)
    stamped = split_at_the_waits(steady_path(stamped_kernel(kernel), instance))
    plain = between_the_waits(kernel, instance)
    for mnemonic in ("MUFU.EX2", "FMNMX", "HGMMA.64x128x16.F32.BF16", "HGMMA.64x128x16.F32"):
        assert [side[mnemonic] for side in stamped] == [side[mnemonic] for side in plain]


def test_each_stamp_reads_the_clock_where_the_source_puts_it():
    """In the machine code: the stamp before issuing comes before the products, and one clock read after each wait."""
    kernel21 = next(c for c in CHAPTERS if c.number == 21)
    steady = steady_path(stamped_kernel(kernel21), ALL_INSTANCES[0])
    clock = [i for i, line in enumerate(steady) if "SR_CLOCKLO" in line]
    first_product = next(i for i, line in enumerate(steady) if "HGMMA" in line)
    waits = [i for i, line in enumerate(steady) if "WARPGROUP.DEPBAR.LE" in line]
    assert len(clock) == len(EVENTS)
    assert clock[1] < first_product  # issue
    assert len(waits) == 2
    for wait in waits:  # S landed, P V landed: the next clock read after each wait, before anything else waits
        after = min(i for i in clock if i > wait)
        assert not any("DEPBAR" in line or "SYNCS.PHASECHK" in line for line in steady[wait + 1 : after])


def synthetic(offset_wg1: int, tiles: int = 40) -> np.ndarray:
    """Stamps of one block whose warpgroups run the same 2,000-cycle tile, the second offset_wg1 cycles later: products
    in flight for 1,000 cycles from issuing, then 800 cycles of softmax."""
    stamps = np.zeros((8, 8, 256, len(EVENTS)), dtype=np.int64)
    for warp in range(8):
        start = 1_000_000 + (offset_wg1 if warp >= 4 else 0)
        for tile in range(tiles):
            top = start + 2000 * tile
            issue = top + 100
            stamps[0, warp, tile] = (top, issue, issue + 20, issue + 500, issue + 1000, issue + 1800)
    return stamps


def test_summary_of_warpgroups_in_turns():
    summary = summarize(synthetic(offset_wg1=1000))
    assert summary.period == 2000
    assert summary.phases["waiting for K and V (and the turn)"] == 100
    assert summary.phases["of which after P V has landed"] == 800
    assert summary.phases["from S to the end of the softmax"] == 1300
    assert summary.issue_spread == 0 and summary.issue_lag == [0, 0, 0, 0]
    assert summary.in_flight["one warpgroup"] > 0.85
    assert summary.in_flight["both warpgroups"] < 0.06


def test_summary_of_warpgroups_in_step():
    summary = summarize(synthetic(offset_wg1=0))
    # Both in flight from issue to landing (1,000 of the 1,900 cycles inside the tiles), neither for the rest.
    assert summary.in_flight["both warpgroups"] == pytest.approx(1000 / 1900, abs=0.01)
    assert summary.in_flight["neither warpgroup"] == pytest.approx(900 / 1900, abs=0.01)
    assert sum(summary.in_flight[name] for name in IN_FLIGHT) == pytest.approx(1.0)


def test_a_tile_missing_a_stamp_is_left_out():
    stamps = synthetic(offset_wg1=1000)
    stamps[0, 2, 5, EVENTS.index("S landed")] = 0  # one warp of warpgroup 0 did not stamp tile 5
    summary = summarize(stamps)
    assert summary.tiles == 2 * 40 - 1


def test_the_seam_between_query_tiles_is_what_it_takes_beyond_two_periods():
    """Query tiles of 8 key tiles: the first of each runs before the loop (no stamps), and the loop of the next one
    starts 1,500 cycles later than two periods would bring it. A window without such a gap has no seam."""
    stamps = synthetic(offset_wg1=1000, tiles=60)
    for tile in range(60):
        if tile % 8 == 0:
            stamps[0, :, tile] = 0  # a query tile's first tile, outside the loop
        else:
            stamps[0, :, tile] += 1500 * (tile // 8)
    summary = summarize(stamps)
    assert summary.period == 2000
    assert summary.seam == 1500 and summary.seams == 8 * 7  # 8 warps, 7 seams between tiles 0 ... 59
    assert np.isnan(summarize(synthetic(offset_wg1=1000)).seam)


def test_timeline_needs_a_gpu(capsys, monkeypatch):
    hide_gpu(monkeypatch)
    assert_one_line_error(run_command(capsys, "timeline", "21"), 1, "No CUDA GPU found")


def test_timeline_names_a_kernel_it_cannot_stamp(capsys, monkeypatch):
    ran = run_command(capsys, "timeline", "nonesuch")
    assert ran.code in (1, 2) and "Traceback" not in ran.err


@pytest.mark.parametrize(("number", "read_at_once"), [(16, False), (20, False), (21, True)])
def test_the_clock_after_the_wait_for_p_v_is_read_at_once_only_where_nothing_else_follows_it(number, read_at_once):
    """Kernels 16 and 20 run their whole softmax after the wait for P V, and ptxas sinks the stamp's clock read below
    it; kernel 21 reads it right after the wait, as the timeline's P V phases need."""
    kernel = next(c for c in CHAPTERS if c.number == number)
    assert landing_stamped(steady_path(stamped_kernel(kernel), ALL_INSTANCES[0])) == read_at_once


def test_the_warp_that_issues_last_is_named():
    stamps = synthetic(offset_wg1=1000)
    stamps[0, [2, 6], :40, EVENTS.index("issue")] += 30  # warp 2 of each warpgroup comes 30 cycles late
    summary = summarize(stamps)
    assert summary.issue_lag == [0, 0, 30, 0] and summary.issue_spread == 30


def test_each_warps_phases_say_where_a_late_warp_spent_its_cycles():
    """Warp 0 of each warpgroup reaches the top 300 cycles after the others and issues 300 cycles longer: its own
    issuing phase and its lag at the top show it, the other warps' phases stay the tile's."""
    stamps = synthetic(offset_wg1=1000)
    late = [0, 4]
    stamps[0, late, :40, : EVENTS.index("issued")] += 300  # the top and the first wgmma 300 cycles late
    stamps[0, late, :40, EVENTS.index("issued") :] += 600  # and issuing 300 cycles longer
    summary = summarize(stamps)
    phases = summary.warp_phases
    assert len(phases) == 8
    for warp in range(8):
        assert phases[warp]["issuing S and P V"] == (320 if warp in late else 20), warp
        assert phases[warp]["reaches the top after its warpgroup's first"] == (300 if warp in late else 0), warp
        assert phases[warp]["waiting for K and V"] == 100
    table = warps_table(Timeline("k", summary, 1.0, 1.0, (0, 0), True), "shape")
    assert table.heads == [f"warp {w}" for w in range(8)] and table.sections[0][2][1][0].text == "320"
