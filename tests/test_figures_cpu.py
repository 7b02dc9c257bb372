"""The figures under docs/figures/ without a GPU: each drawn by name from its module, the ladder and the roofline
from results/ files, the roofline's byte counts, and the schedule models the figures of pages 14-16 draw."""

import dataclasses
import json
import math
import struct
from pathlib import Path

import pytest

from kernels.tools.plot import BARS_PER_ROW
from reference import attention_flops

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"
HEADLINE = ROOT / "results" / "headline.json"
PEAK = ROOT / "results" / "peak.json"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels, from a PNG's header."""
    return struct.unpack(">II", path.read_bytes()[16:24])


def test_every_figure_in_docs_has_one_drawing(figures):
    """make_figures names every PNG under docs/figures/, and nothing else, by its file name."""
    assert sorted(figures.drawings(HEADLINE, PEAK)) == sorted(png.stem for png in FIGURES.glob("*.png"))


def test_named_figures_are_drawn_alone_at_the_size_of_the_committed_ones(figures, tmp_path):
    """Only the figures named are drawn; the ladder from results/headline.json has the committed ladder's size,
    which follows from the number of chapters in that file (rows of at most nine)."""
    figures.main(["swizzle", "ladder", "--out", str(tmp_path / "out")])
    drawn = sorted((tmp_path / "out").iterdir())
    assert [png.name for png in drawn] == ["ladder.png", "swizzle.png"]
    for png in drawn:
        assert png_size(png) == png_size(FIGURES / png.name)


def test_the_ladder_is_rows_of_chapters_on_one_scale_at_most_twice_as_wide_as_tall(figures, tmp_path, monkeypatch):
    """At a page's width (~880 px) the ladder stays legible: the chapters in as few rows of at most BARS_PER_ROW as
    hold them, as many in each row but the last, in order, every row on the same TFLOP/s axis, no more than twice
    as wide as tall."""
    import matplotlib.pyplot as plt
    from matplotlib.container import BarContainer

    kept = []
    monkeypatch.setattr(plt, "close", kept.append)  # keep the figure to look at it
    figures.ladder.figure_ladder(tmp_path / "ladder.png", HEADLINE)
    width, height = png_size(tmp_path / "ladder.png")
    assert width <= 2 * height
    chapters = [row.name for row in figures.ladder.first_run(HEADLINE).rows if row.kind == "chapter"]
    axes = kept[0].axes
    rows = [[label.get_text() for label in ax.get_xticklabels()] for ax in axes]
    per_row = math.ceil(len(chapters) / math.ceil(len(chapters) / BARS_PER_ROW))
    assert rows == [chapters[i : i + per_row] for i in range(0, len(chapters), per_row)]
    for ax, row in zip(axes, rows, strict=True):
        bars = next(c for c in ax.containers if isinstance(c, BarContainer))
        assert len(bars.patches) == len(row)
    assert len({ax.get_ylim() for ax in axes}) == 1


def test_an_unknown_figure_is_refused_with_the_names(figures, capsys):
    with pytest.raises(SystemExit):
        figures.main(["no_such_figure"])
    assert "no figure named no_such_figure; the figures are mma_fragments," in capsys.readouterr().err


def test_the_ladder_drops_only_a_reference_that_would_overprint(figures):
    """A reference 1% slower than one before it leaves the ladder; every chapter of the headline stays, in order,
    and every reference it drops is within 3% of one it shows."""
    run = figures.ladder.first_run(HEADLINE)
    first = next(row for row in run.rows if row.kind == "reference")
    slower = [[ms * 1.01 for ms in repeats] for repeats in first.samples_ms]
    crowded = dataclasses.replace(run, rows=[*run.rows, dataclasses.replace(first, name="crowded", samples_ms=slower)])
    shown = figures.ladder.without_overprinted_references(crowded).rows
    assert "crowded" not in [row.name for row in shown] and len(crowded.rows) == len(run.rows) + 1
    assert [row for row in shown if row.kind != "reference"] == [row for row in run.rows if row.kind != "reference"]
    kept = [row.tflops for row in shown if row.kind == "reference"]
    for row in run.rows:
        if row.kind == "reference" and row not in shown:
            assert any(abs(row.tflops - other) < 0.03 * other for other in kept)


def shape(seq_len: int) -> dict:
    return {"batch": 16, "seq_len": seq_len, "heads": 16, "head_dim": 128, "dtype": "bf16", "causal": False}


@pytest.mark.parametrize("seq_len", [1024, 4096, 16384])
def test_every_kv_element_meets_every_query_once_per_launch(figures, seq_len):
    """Against the compulsory bytes the intensity is seq_len / 2: 2 FLOP per query for each 2-byte element."""
    s = shape(seq_len)
    assert attention_flops(16, seq_len, 16, 128) / figures.roofline.dram_bytes(s) == seq_len / 2


@pytest.mark.parametrize("block_q", [64, 128])
def test_l2_intensity_is_block_q_diluted_by_the_q_and_o_tiles(figures, block_q):
    """Per block 4·BLOCK_Q·N·d FLOP over 4·d·(BLOCK_Q + N) bytes: BLOCK_Q·N / (BLOCK_Q + N) FLOP per byte."""
    s = shape(4096)
    intensity = attention_flops(16, 4096, 16, 128) / figures.roofline.l2_bytes(s, block_q)
    assert intensity == pytest.approx(block_q * 4096 / (block_q + 4096), rel=1e-12)


def synthetic_peak(path: Path, device: str) -> Path:
    """A peak.json in the format `runner.py peak --json` writes, with made-up ceilings."""
    path.write_text(
        json.dumps(
            {
                "environment": {"device": device},
                "ceilings": {"mma.sync": {"tflops": 600.0}, "wgmma": {"tflops": 800.0}},
                "details": {"torch.matmul 8192^3 bf16": {"tflops": 700.0}},
                "memory": {"dram copy": {"tbps": 4.0}, "l2 read": {"tbps": 8.0}},
            }
        )
    )
    return path


def test_roofline_is_drawn_from_a_peak_json_of_the_same_gpu(figures, tmp_path):
    device = json.loads(HEADLINE.read_text())[0]["environment"]["device"]
    peak = synthetic_peak(tmp_path / "peak.json", device)
    figures.roofline.figure_roofline(tmp_path / "roofline.png", peak, HEADLINE)
    assert (tmp_path / "roofline.png").stat().st_size > 0


def test_the_roofline_legend_stands_beside_the_plot_not_over_the_markers(figures, tmp_path, monkeypatch):
    """The legend names every chapter and lies wholly outside the axes, so no chapter's marker hides under it."""
    import matplotlib.pyplot as plt

    kept = []
    monkeypatch.setattr(plt, "close", kept.append)  # keep the figure to look at it
    device = json.loads(HEADLINE.read_text())[0]["environment"]["device"]
    figures.roofline.figure_roofline(
        tmp_path / "roofline.png", synthetic_peak(tmp_path / "peak.json", device), HEADLINE
    )
    ax = kept[0].axes[0]
    legend = ax.get_legend()
    chapters = [row.name for row in figures.ladder.first_run(HEADLINE).rows if row.kind == "chapter"]
    assert [text.get_text().split(":")[0] for text in legend.get_texts()][-len(chapters) :] == chapters
    renderer = kept[0].canvas.get_renderer()
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def test_roofline_is_skipped_without_a_peak_json_or_for_another_gpu(figures, tmp_path, capsys):
    draw = figures.roofline.figure_roofline
    draw(tmp_path / "roofline.png", tmp_path / "missing.json", HEADLINE)
    draw(tmp_path / "roofline.png", synthetic_peak(tmp_path / "peak.json", "another GPU"), HEADLINE)
    assert not (tmp_path / "roofline.png").exists()
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["skipped", "skipped"]


def spans(steps: list, kind: str) -> dict[int, tuple[float, float]]:
    """(start, end) of one kind of step of a schedule, by tile."""
    return {tile: (start, start + length) for name, tile, start, length in steps if name == kind}


@pytest.mark.parametrize("schedule", ["schedule_waiting", "schedule_skewed"])
def test_the_loop_schedules_keep_the_data_dependences(figures, schedule):
    """Page 14's schematic: one product at a time on the tensor cores; a softmax after its S, a P·V after its P is
    packed, and O rescaled and the next P packed only after the previous P·V has landed."""
    loop = figures.overlap
    steps = getattr(loop, schedule)(5)
    products = sorted(span for kind in (loop.SCORES, loop.PRODUCTS) for span in spans(steps, kind).values())
    assert all(end <= next_start for (_, end), (next_start, _) in zip(products, products[1:], strict=False))
    scores, softmax = spans(steps, loop.SCORES), spans(steps, loop.SOFTMAXES)
    packs, pv = spans(steps, loop.PACKS), spans(steps, loop.PRODUCTS)
    assert sorted(scores) == sorted(softmax) == sorted(packs) == sorted(pv) == list(range(5))
    for tile in range(5):
        assert softmax[tile][0] >= scores[tile][1] and packs[tile][0] >= softmax[tile][1]
        assert pv[tile][0] >= packs[tile][1]
        if tile > 0:
            assert packs[tile][0] >= pv[tile - 1][1]


def test_the_skewed_loop_runs_each_softmax_under_the_product_before(figures):
    """Kernel 14's schedule: the softmax of tile j overlaps P·V of tile j - 1, and the loop ends sooner than
    kernel 13's, which waits for each product."""
    loop = figures.overlap
    skewed = loop.schedule_skewed(5)
    softmax, pv = spans(skewed, loop.SOFTMAXES), spans(skewed, loop.PRODUCTS)
    for tile in range(1, 5):
        assert softmax[tile][0] < pv[tile - 1][1] and pv[tile - 1][0] < softmax[tile][1]
    waiting = loop.schedule_waiting(5)
    assert max(s + n for *_, s, n in skewed) < max(s + n for *_, s, n in waiting)


def test_heads_in_flight_counts_each_head_once_while_any_of_its_tiles_runs(figures):
    """Two tiles of head 0 overlapping count once; head 1 joins at 2 and leaves at 5; nothing after 6."""
    runs = [(0, 0, 0, 4), (1, 0, 1, 6), (2, 1, 2, 5)]
    assert figures.pair_schedule.heads_in_flight(runs) == [(0, 1), (1, 1), (2, 2), (4, 2), (5, 1), (6, 0)]


def test_pairs_keep_the_blocks_even_and_on_few_heads(figures):
    """Page 15's model at the causal headline shape: every block of kernel 15's grid multiplies its share of key
    tiles, give or take one pair, and the heads at work at once stay within a window of one pair per block. Without
    pairs the blocks' shares differ by more, and the heads at work at once spread over more than twice that window,
    where kernel 14's blocks in launch order stay within twice the window."""
    model = figures.pair_schedule
    shape, q_tiles = model.SCHEDULE_SHAPE, model.SCHEDULE_SHAPE["q_tiles"]
    pairs = model.run_static(model.pair_schedule, **shape)
    strided = model.run_static(model.strided_schedule, **shape)
    launched = model.run_in_launch_order(**shape)
    for runs in (pairs, strided, launched):
        assert len(runs) == q_tiles * shape["heads"] * shape["batch"]
    busy = model.busy_time(pairs)
    assert max(busy) - min(busy) == q_tiles + 1
    spread = model.busy_time(strided)
    assert max(spread) - min(spread) > q_tiles + 1
    window = -(-model.SMS // ((q_tiles + 1) // 2)) + 1  # heads that 132 consecutive pairs can touch

    def most(runs):
        return max(n for _, n in model.heads_in_flight(runs))

    assert most(pairs) <= window
    assert max(most(pairs), most(launched)) <= 2 * window < most(strided)


@pytest.mark.parametrize("chains", [1, 2, 4, 8, 16])
def test_the_chains_add_every_value_once_in_fewer_steps(figures, chains):
    """Page 16's model: every value added once, chains - 1 joins and one addition into row_sum, and a dependent
    path of values / chains + log2(chains) + 1 steps, against values for kernel 15's single chain."""
    values = 32
    additions = figures.softmax_chains.sum_in_chains(values, chains)
    kinds = [kind for _, _, kind in additions]
    assert kinds.count("p") == values and kinds.count("join") == chains - 1 and kinds.count("row_sum") == 1
    assert max(step for _, step, _ in additions) == values // chains + chains.bit_length() - 1 + 1
    per_step = [(row, step) for row, step, _ in additions]
    assert len(per_step) == len(set(per_step))  # one addition per chain and step
    assert max(step for _, step, _ in figures.softmax_chains.sum_in_one_chain(values)) == values


# (query heads, K/V heads): the decode shapes' groups of 4 and 1, a group of 3, groups of 5 and 12, MQA past a tile.
GROUPS = [(32, 8), (16, 16), (12, 4), (40, 8), (24, 2), (160, 1)]


@pytest.mark.parametrize("heads, kv_heads", GROUPS)
@pytest.mark.parametrize("seq_len_q", [1, 42, 300])
@pytest.mark.parametrize("packed", [False, True], ids=["kernel16", "kernel17"])
def test_every_query_takes_one_row_of_one_tile_of_its_group_and_reads_back(figures, heads, kv_heads, seq_len_q, packed):
    """Page 17's figure, by the kernel's rule: every (position, head) of a sequence lies in exactly one row of one
    query tile of its K/V head, row_of puts it in that row, and the epilogue's inverse reads the row back as it;
    every other row of a tile is one the epilogue does not write."""
    model = figures.packed_gqa
    group, seen = heads // kv_heads, []
    for tile in model.query_tiles(seq_len_q, heads, kv_heads, packed=packed):
        for row in range(model.BLOCK_Q):
            if model.holds_a_query(tile, row, seq_len_q):
                position, head = model.row_slot(tile, row)
                assert model.row_of(tile, position, head) == row and head // group == tile.kv_head
                seen.append((position, head))
    assert sorted(seen) == [(position, head) for position in range(seq_len_q) for head in range(heads)]


@pytest.mark.parametrize("heads, kv_heads", GROUPS)
def test_the_packed_figure_packs_as_chapter_17_and_reads_kv_once_per_chunk_of_a_group(figures, heads, kv_heads):
    """The figure's tile shape is the one chapter 17's runtime asks the TMA for; at one query per sequence,
    kernel 16 reads each K/V tile once per query head of the group, kernel 17 once per BLOCK_Q heads of it."""
    import importlib

    model = figures.packed_gqa
    runtime = importlib.import_module("k17_packed_gqa.loader").KERNEL
    assert model.packed_tile(heads, kv_heads) == runtime.packed_tile(heads, kv_heads)
    group = heads // kv_heads
    for kv_head in range(kv_heads):
        assert model.kv_reads(model.query_tiles(1, heads, kv_heads, packed=False), kv_head) == group
        assert model.kv_reads(model.query_tiles(1, heads, kv_heads, packed=True), kv_head) == -(-group // model.BLOCK_Q)


def test_the_split_figure_splits_the_decode_shapes_as_chapter_18(figures):
    """The split count the figure shows is chapter 18's runtime's at every decode shape, and only the shape the
    figure draws (few query tiles, many keys) is split."""
    import importlib

    from kernels.tools.commands import DECODE_SHAPES

    model = figures.split_kv
    runtime = importlib.import_module("k18_split_kv.loader").KERNEL
    counts = []
    for s in DECODE_SHAPES:
        q_shape = (s["batch"], s["seq_len"], s["heads"], s["head_dim"])
        k_shape = (s["batch"], s["kv_len"], s["kv_heads"], s["head_dim"])
        counts.append(model.splits_of(s))
        assert counts[-1] == runtime.splits(q_shape, k_shape, model.SMS)
    assert [n > 1 for n in counts] == [s is model.DECODE for s in DECODE_SHAPES]


@pytest.mark.parametrize(
    "q_tiles, key_tiles, n_splits", [(64, 256, 1), (64, 256, 2), (64, 255, 3), (300, 7, 2), (5, 2, 4)]
)
def test_the_work_items_cover_every_key_tile_of_every_query_tile_once(figures, q_tiles, key_tiles, n_splits):
    """Split or not, the SMs' work items take each (query tile, key tile) exactly once, in runs of consecutive key
    tiles, and one SM runs the splits of a tile only when the grid wraps."""
    work = figures.split_kv.sm_work(q_tiles, n_splits, key_tiles)
    assert len(work) == figures.split_kv.SMS
    covered = sorted((tile, key) for items in work for tile, _, first, n in items for key in range(first, first + n))
    assert covered == [(tile, key) for tile in range(q_tiles) for key in range(key_tiles)]
    if q_tiles * n_splits <= len(work):
        assert all(len(items) <= 1 for items in work)


def test_two_splits_fill_the_sms_the_unsplit_tiles_leave_idle(figures):
    """At the figure's shape the unsplit tiles fill too few SMs to go unsplit; split, every work item has an SM
    of its own and a share of the keys no longer than 1 / n_splits of them."""
    from kernels.launch import SPLIT_BELOW

    model = figures.split_kv
    q_tiles, key_tiles = model.decode_tiles(model.DECODE)
    n_splits = model.splits_of(model.DECODE)
    unsplit = [items for items in model.sm_work(q_tiles, 1, key_tiles) if items]
    split = [items for items in model.sm_work(q_tiles, n_splits, key_tiles) if items]
    assert len(unsplit) == q_tiles < SPLIT_BELOW * model.SMS
    assert len(split) == q_tiles * n_splits <= model.SMS
    assert max(n for items in split for *_, n in items) == math.ceil(key_tiles / n_splits)


@pytest.mark.parametrize("stops", [[40], [17, 40], [0, 25, 40], [13, 13, 29, 40], [40, 40], [0]])
def test_combining_the_splits_gives_the_softmax_over_all_keys(figures, stops):
    """combine_splits as the figure draws it: weights exp(lse_s - max) over the splits' own outputs give the softmax
    over every key and its log-sum-exp, empty splits (lse -inf) passed over; no key at all gives 0 and -inf."""
    import numpy as np

    model = figures.split_kv
    rng = np.random.default_rng(0)
    scores, values = rng.normal(0, 4, stops[-1]), rng.normal(size=(stops[-1], 8))
    o, lse = model.combine(model.split_rows(scores, values, stops))
    if stops[-1] == 0:
        assert lse == -math.inf and not o.any()
        return
    p = np.exp(scores - scores.max())
    assert np.allclose(o, p @ values / p.sum(), rtol=1e-12, atol=1e-12)
    assert lse == pytest.approx(scores.max() + math.log(p.sum()), rel=1e-12)


def test_the_decode_figures_are_drawn_at_the_size_of_the_committed_ones(figures, tmp_path):
    """packed_gqa.png and split_kv.png as committed are what their modules draw now (same size in pixels)."""
    figures.main(["packed_gqa", "split_kv", "--out", str(tmp_path)])
    for name in ("packed_gqa.png", "split_kv.png"):
        assert png_size(tmp_path / name) == png_size(FIGURES / name)


@pytest.mark.parametrize("maxima_first", [False, True])
def test_the_maxima_schedules_keep_the_data_dependences(figures, maxima_first):
    """Page 21's schematic: one product at a time on the tensor cores; a tile's maxima after its S, its exponentials
    after its maxima and after the P·V before it, its P packed after them and multiplied by V after that."""
    loop = figures.maxima_first
    steps = loop.schedule(5, maxima_first=maxima_first)
    products = sorted(span for kind in (loop.SCORES, loop.PRODUCTS) for span in spans(steps, kind).values())
    assert all(end <= next_start for (_, end), (next_start, _) in zip(products, products[1:], strict=False))
    scores, maxima = spans(steps, loop.SCORES), spans(steps, loop.MAXIMA_STEP)
    exponentials, packs, pv = (
        spans(steps, loop.EXPONENTIALS_STEP),
        spans(steps, loop.PACKS),
        spans(steps, loop.PRODUCTS),
    )
    assert sorted(scores) == sorted(maxima) == sorted(exponentials) == sorted(packs) == sorted(pv) == list(range(5))
    for tile in range(5):
        assert maxima[tile][0] >= scores[tile][1] and exponentials[tile][0] >= maxima[tile][1]
        assert packs[tile][0] >= exponentials[tile][1] and pv[tile][0] >= packs[tile][1]
        if tile > 0:
            assert exponentials[tile][0] >= pv[tile - 1][1]


def test_kernel_21s_maxima_run_under_the_product_before(figures):
    """Kernel 21's maxima of tile j lie within P·V of tile j - 1, kernel 20's after it; each tile after the first is
    shorter by the maxima, so the loop ends that much sooner."""
    loop = figures.maxima_first
    before, after = loop.schedule(5, maxima_first=False), loop.schedule(5, maxima_first=True)
    for tile in range(1, 5):
        pv = spans(after, loop.PRODUCTS)[tile - 1]
        assert pv[0] <= spans(after, loop.MAXIMA_STEP)[tile][0] < spans(after, loop.MAXIMA_STEP)[tile][1] <= pv[1]
        assert spans(before, loop.MAXIMA_STEP)[tile][0] >= spans(before, loop.PRODUCTS)[tile - 1][1]
    end = {name: max(s + n for *_, s, n in steps) for name, steps in (("before", before), ("after", after))}
    assert end["before"] - end["after"] == pytest.approx(4 * loop.MAXIMA)


def test_the_tail_split_model_deals_every_key_once_and_ends_sooner(figures):
    """Page 30's model: both work lists cover every query tile's key tiles exactly once; whole tiles end after as
    many waves as the tiles fill, idle for the last wave's empty SMs, and the split list ends before them."""
    model = figures.tail_split
    for split in (False, True):
        keys = {}
        for _, tile, cost in model.work_list(split):
            keys[tile] = keys.get(tile, 0) + cost - model.START
        assert keys == dict.fromkeys(range(model.QUERY_TILES), model.KEY_TILES)
    whole, split = model.run(split=False), model.run(split=True)
    waves = -(-model.QUERY_TILES // model.SMS)
    assert model.finish(whole) == waves * (model.KEY_TILES + model.START)
    assert model.finish(split) < model.finish(whole) - model.KEY_TILES // 2
    assert model.idle_share(split) < model.idle_share(whole)
    merges = [item for item in split if item[1] == "merge"]
    assert len(merges) == model.tail_split(model.QUERY_TILES, model.KEY_TILES, model.SMS)[0]
