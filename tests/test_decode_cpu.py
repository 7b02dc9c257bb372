"""`runner.py decode` without a GPU: the preset and its options, and the memory-bound view of a run (GB/s of the
bytes a call must move, % of the DRAM ceiling), computed from saved samples."""

import json

import pytest

from kernels.tools import commands
from kernels.tools.ceilings import MEMORY_BOUND_BELOW, Ceilings, load_ceilings, memory_bound
from kernels.tools.runs import Row, Run, load_runs, save_runs, shape_title
from kernels.tools.tables import COLUMNS, columns, markdown_table, print_runs
from tests.helpers import assert_one_line_error, hide_gpu, run_command

DEVICE = "Test GPU (1 SMs)"
# One query row against 4096 keys, four query heads on each of two K/V heads, bf16.
SHAPE = {
    "batch": 2,
    "seq_len": 1,
    "heads": 8,
    "kv_heads": 2,
    "kv_len": 4096,
    "head_dim": 128,
    "dtype": "bf16",
    "causal": False,
}
Q_BYTES = 2 * 1 * 8 * 128 * 2  # and as many for O
K_BYTES = 2 * 4096 * 2 * 128 * 2  # and as many for V
BYTES = 2 * Q_BYTES + 2 * K_BYTES
FLOPS = 4 * 2 * 8 * 128 * 1 * 4096  # S = Q Kᵀ and O = P V over every (query, key) pair
ROUND_MS = {"torch FA2": [0.05, 0.04, 0.08], "k16_softmax_chains": [0.1, 0.125, 0.1]}  # each round's median


def decode_run(shape: dict = SHAPE, flops: float = FLOPS) -> Run:
    """A run as the ladder records it: per round three repeats whose median is ROUND_MS's."""
    rows = [
        Row(
            name,
            "reference" if name.startswith("torch") else "chapter",
            [[ms * 1.5, ms, ms * 0.9] for ms in times],
            1e-4,
            2e-3,
            flops,
            ok=None if name.startswith("torch") else True,
            family=None if name.startswith("torch") else "wgmma",
        )
        for name, times in ROUND_MS.items()
    ]
    return Run(dict(shape), {"device": DEVICE, "command": "python runner.py decode"}, flops, rows, [list(ROUND_MS)] * 3)


def cells_by_row(run: Run, ceilings: Ceilings) -> dict[str, dict[str, str]]:
    """The Markdown table read back: row name -> column -> cell."""
    lines = [line for line in markdown_table(run, ceilings).splitlines() if not line.startswith("|--")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]
    return {cells[0]: dict(zip(header, cells, strict=True)) for cells in rows}


def write_peak(path, *, dram_tbps: float | None, device: str = DEVICE):
    data = {"environment": {"device": device}, "ceilings": {"wgmma": {"tflops": 800.0}}}
    if dram_tbps is not None:
        data["memory"] = {"dram copy": {"tbps": dram_tbps}, "l2 read": {"tbps": 3 * dram_tbps}}
    path.write_text(json.dumps(data))
    return path


# --- the preset ------------------------------------------------------------------------------------------------


def test_the_preset_parses_to_its_three_decode_shapes():
    args = commands.decode_parser().parse_args([])
    assert [(s["batch"], s["kv_len"], s["heads"], s["kv_heads"]) for s in args.shapes] == [
        (64, 8192, 32, 8),
        (8, 32768, 32, 8),
        (128, 2048, 16, 16),
    ]
    for shape in args.shapes:  # one query row, bf16, head_dim 128, not causal: what the command promises
        assert (shape["seq_len"], shape["dtype"], shape["head_dim"], shape["causal"]) == (1, "bf16", 128, False)
    assert not args.causal and args.plot is None and args.from_json is None  # what the ladder's engine reads
    args.shapes[0]["batch"] = 1
    assert commands.DECODE_SHAPES[0]["batch"] == 64  # a parse hands out copies: the table stays as written


def test_the_preset_takes_the_ladders_timing_options():
    args = commands.decode_parser().parse_args(
        ["--rounds", "2", "--warmup", "3", "--repeats", "7", "--kernels", "8,16", "--markdown", "--json", "decode.json"]
    )
    assert (args.rounds, args.warmup, args.repeats, args.kernels, args.markdown) == (2, 3, 7, "8,16", True)
    assert str(args.json) == "decode.json"


def test_decode_help_names_each_shape_and_why_it_is_not_causal(capsys):
    ran = run_command(capsys, "decode", "--help")
    assert ran.code == 0
    text = " ".join(ran.out.split())
    for shape in commands.DECODE_SHAPES:
        assert f"({shape_title(shape)})" in text
    assert "bottom-right causal mask hides no key" in text
    for option in ("--rounds", "--warmup", "--repeats", "--json", "--markdown", "--kernels"):
        assert option in text
    assert "`runner.py decode`" in run_command(capsys, "--help").out  # the ladder's help points to it


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch", "4"], "unrecognized arguments: --batch 4"),  # the preset fixes the shapes
        (["--causal"], "unrecognized arguments: --causal"),
        (["--repeats", "0"], "--repeats: must be at least 1"),
        (["--kernels", "99"], "no chapter '99'"),
        (["--json", "no/such/folder/decode.json"], "--json: the folder no/such/folder does not exist"),
    ],
)
def test_decode_mistakes_are_one_line_before_any_gpu_work(args, message, capsys, monkeypatch):
    hide_gpu(monkeypatch)
    assert_one_line_error(run_command(capsys, "decode", *args), 2, message)


def test_decode_without_a_gpu_names_what_was_asked(capsys, monkeypatch):
    hide_gpu(monkeypatch)
    assert_one_line_error(
        run_command(capsys, "decode"),
        1,
        "No CUDA GPU found: timing the ladder at the 3 decode shapes needs an NVIDIA GPU",
    )
    assert_one_line_error(
        run_command(capsys, "decode", "--kernels", "8,16"),
        1,
        "timing k08_kv128 and k16_softmax_chains at the 3 decode shapes",
    )


# --- the memory-bound view --------------------------------------------------------------------------------------


def test_the_decode_shapes_are_memory_bound_and_the_headline_is_not():
    """The rule: FLOPs over the bytes a call must move below MEMORY_BOUND_BELOW."""
    from reference import attention_flops

    for shape in commands.DECODE_SHAPES:
        flops = attention_flops(shape["batch"], 1, shape["heads"], 128, seq_len_k=shape["kv_len"])
        run = decode_run(shape, flops)
        assert memory_bound(run)
        assert run.intensity == pytest.approx(shape["heads"] / shape["kv_heads"], rel=1e-3)  # FLOPs per byte
    headline = {**SHAPE, "seq_len": 4096, "heads": 16, "kv_heads": 16, "kv_len": 4096}
    run = decode_run(headline, attention_flops(2, 4096, 16, 128))
    assert run.intensity == pytest.approx(4096 / 2) and not memory_bound(run)
    assert columns(run, Ceilings({"wgmma": 800.0}, 4.0)) == COLUMNS  # TFLOP/s and % of peak, as before


def test_gbps_and_percent_of_dram_are_the_bytes_over_the_time():
    run, ceilings = decode_run(), Ceilings({"wgmma": 800.0}, dram_tbps=2.0)
    assert run.bytes_moved == BYTES and run.intensity == pytest.approx(FLOPS / BYTES)
    assert run.intensity < MEMORY_BOUND_BELOW
    cells = cells_by_row(run, ceilings)
    assert list(cells["torch FA2"]) == ["", "ms", "GB/s", "% of DRAM", "% of FA2", "step", "max err", "rel L2", "check"]
    for name, times in ROUND_MS.items():
        gbps = sorted(BYTES / (ms * 1e-3) / 1e9 for ms in times)  # bytes over each round's median time
        assert cells[name]["GB/s"] == f"{gbps[1]:.0f} [{gbps[0]:.0f}–{gbps[2]:.0f}]"
        assert cells[name]["% of DRAM"] == f"{100 * gbps[1] / 2000:.1f}%"  # 2.0 TB/s = 2000 GB/s
    assert cells["k16_softmax_chains"]["% of FA2"] == "50.0%"  # per round 0.05/0.1, 0.04/0.125, 0.08/0.1: 50, 32, 80


def test_the_legend_states_the_rule_and_what_the_bytes_are(capsys):
    print_runs([decode_run()], markdown=True, ceilings=Ceilings({"wgmma": 800.0}, 2.0), note=None)
    out = capsys.readouterr().out
    assert f"memory-bound: {FLOPS / BYTES:.1f} FLOP per byte moved, below {MEMORY_BOUND_BELOW}" in out
    assert "this GPU's ridge point, 400" in out  # 800 TFLOP/s over 2 TB/s
    assert f"{BYTES / 1e9:.3f} GB (Q, K and V read once, K and V once per K/V head, O written once)" in out
    assert "% of DRAM: of the DRAM copy rate, 2.00 TB/s" in out
    # the fastest row takes 0.04 ms a call in one round: its time may be its launch's
    assert "some calls take under" in out


def test_a_saved_run_shows_the_same_table_from_json(tmp_path, capsys):
    """--from-json recomputes GB/s from the saved shape and samples: the same Markdown as the live run printed."""
    peak = write_peak(tmp_path / "peak.json", dram_tbps=2.0)
    run = decode_run()
    print_runs([run], markdown=True, ceilings=load_ceilings(peak, DEVICE), note=None)
    live = capsys.readouterr().out
    save_runs([run], tmp_path / "decode.json")
    assert load_runs(tmp_path / "decode.json")[0].bytes_moved == BYTES
    ran = run_command(capsys, "--from-json", tmp_path / "decode.json", "--markdown", "--peak", peak)
    assert ran.code == 0, ran.err
    assert ran.out == live and "| GB/s" in live


def test_a_ceilings_file_without_memory_leaves_out_percent_of_dram_with_a_note(tmp_path, capsys):
    peak = write_peak(tmp_path / "peak.json", dram_tbps=None)
    ceilings = load_ceilings(peak, DEVICE)
    assert ceilings.tflops == {"wgmma": 800.0} and ceilings.dram_tbps is None
    path = tmp_path / "decode.json"
    save_runs([decode_run()], path)
    ran = run_command(capsys, "--from-json", path, "--markdown", "--peak", peak)
    assert ran.code == 0, ran.err
    header = next(line for line in ran.out.splitlines() if line.startswith("|  "))
    assert "GB/s" in header and "% of DRAM" not in header and "TFLOP/s" not in header
    note = next(line for line in ran.out.splitlines() if line.startswith("% of DRAM: left out"))
    assert "holds no DRAM ceiling" in note
    assert "% of peak: empty" not in ran.out  # no compute-bound table to leave it empty in


def test_an_older_saved_run_gets_its_bytes_from_the_shape(tmp_path):
    """A file written before kv_heads and kv_len were recorded: they are the queries' heads and length."""
    old = [
        {
            "shape": {"batch": 2, "seq_len": 64, "heads": 3, "head_dim": 128, "dtype": "fp16", "causal": True},
            "environment": {"device": DEVICE},
            "rows": [
                {"name": "torch FA2", "kind": "reference", "ms": 1.0, "tflops": 1.0, "max_abs": 0.0, "rel_l2": 0.0}
            ],
        }
    ]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    assert load_runs(path)[0].bytes_moved == 4 * 2 * 64 * 3 * 128 * 2  # Q, K, V and O, each 2 · 64 · 3 · 128 fp16


def test_a_saved_shape_with_an_unknown_dtype_is_one_line(tmp_path, capsys):
    path = tmp_path / "run.json"
    save_runs([decode_run({**SHAPE, "dtype": "fp8"})], path)
    assert_one_line_error(run_command(capsys, "--from-json", path), 2, "the shape's dtype is 'fp8'")


# --- split-KV ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query_tiles", "key_tiles", "splits"),
    [
        (2048, 16, 1),  # 128 x 2,048 keys without grouping: the tiles fill the GPU
        (512, 64, 1),  # 64 x 8,192 keys, 4 heads packed per tile
        (106, 64, 1),  # at 80 % of 132 SMs: no split
        (64, 256, 2),  # 8 x 32,768 keys, 4 heads packed: 128 work items on 132 SMs
        (8, 256, 15),  # one sequence: 120 work items, the fewest within 85 % of the best last wave
        (1, 8, 7),  # never more splits than key tiles
        (100, 1, 1),  # one key tile cannot be split
    ],
)
def test_the_split_rule(query_tiles, key_tiles, splits):
    """No split while the query tiles fill 80 % of the SMs; else the fewest splits (at most one per key tile) whose
    last wave is at least 85 % as full as the best count's."""
    from kernels.launch import split_count

    assert split_count(query_tiles, key_tiles, 132) == splits


@pytest.mark.parametrize(
    ("query_tiles", "key_tiles", "tail"),
    [
        (8192, 128, (8, 16)),  # 4 x 16,384 keys, 16 heads: a last wave of 8 tiles, 16 pieces each fill 128 SMs
        (8192, 32, (8, 8)),  # 16 x 4,096: no piece shorter than 4 key tiles
        (8192, 8, (8, 2)),  # 64 x 1,024
        (8448, 128, (0, 1)),  # 64 full waves: nothing to split
        (8250, 128, (66, 2)),  # a last wave of 66 tiles: 2 pieces each fill the next
        (8251, 128, (0, 1)),  # of 67: 2 pieces each would not fit in one wave
        (8200, 7, (0, 1)),  # a piece would have fewer than 4 key tiles
    ],
)
def test_the_tail_split_rule(query_tiles, key_tiles, tail):
    """A call's last wave, query_tiles % SMs tiles, split into as many pieces each as fill the SMs' next wave, none
    shorter than TAIL_MIN_PIECE_TILES key tiles; (0, 1), no split, when that leaves fewer than 2 pieces."""
    from kernels.launch import tail_split

    assert tail_split(query_tiles, key_tiles, 132) == tail


def test_a_tail_split_kernel_splits_full_attention_alone():
    """AttentionKernel.tail at the three full shapes of the ladder, and never causal, decoding, split-KV, or in a
    kernel without a tail split."""
    from kernels.chapters import chapters
    from kernels.tools.ablations import variant_named

    kernel = variant_named("k29_tail_split").kernel
    full = [(16, 4096, 16), (64, 1024, 16), (4, 16384, 16)]
    assert [kernel.tail((b, n, h, 128), (b, n, h, 128), 132, False) for b, n, h in full] == [(8, 8), (8, 2), (8, 16)]
    assert kernel.tail((16, 4096, 16, 128), (16, 4096, 16, 128), 132, True) == (0, 1)
    assert kernel.tail((64, 1, 32, 128), (64, 8192, 8, 128), 132, False) == (0, 1)  # the decode kernel
    assert kernel.tail((1, 700, 16, 128), (1, 700, 16, 128), 132, False) == (0, 1)  # split-KV: 96 tiles
    assert chapters()[-1].kernel.tail((4, 16384, 16, 128), (4, 16384, 16, 128), 132, False) == (0, 1)


def test_the_tail_splits_are_shown_under_the_table_and_saved(tmp_path, capsys):
    """A run records where a tail-split kernel split the last wave; the legend says so, a saved run keeps it."""
    run = decode_run()
    run.tails = {"k29_tail_split": [8, 16]}
    print_runs([run], markdown=True, ceilings=Ceilings({"wgmma": 800.0}, 2.0), note=None)
    assert "the last wave split along the keys: k29_tail_split 8 tiles in 16 pieces each" in capsys.readouterr().out
    save_runs([run], tmp_path / "decode.json")
    assert load_runs(tmp_path / "decode.json")[0].tails == {"k29_tail_split": [8, 16]}
    assert "tails" not in json.loads(json.dumps(decode_run().to_json()))


def test_a_split_kv_chapter_counts_its_query_tiles_as_it_launches_them():
    """AttentionKernel.splits at the decode shapes: packed tiles of a K/V group's heads, keys in 128-key tiles."""
    from kernels.chapters import chapters

    [split_kv] = [c.kernel for c in chapters() if c.kernel.kv_cache][:1]
    shapes = {
        (b, k, h, kv): (b, 1, h, 128) for b, k, h, kv in ((64, 8192, 32, 8), (8, 32768, 32, 8), (128, 2048, 16, 16))
    }
    counts = [split_kv.splits(q, (b, k, kv, 128), 132) for (b, k, h, kv), q in shapes.items()]
    assert counts == [1, 2, 1]
    unsplit = [c.kernel for c in chapters() if not c.kernel.kv_cache][-1]
    assert unsplit.splits((8, 1, 32, 128), (8, 32768, 8, 128), 132) == 1


def test_the_split_counts_are_shown_under_the_table_and_saved(tmp_path, capsys):
    """A run records each split-KV chapter's split count; the legend shows them, and a saved run keeps them."""
    run = decode_run()
    run.splits = {"k18_split_kv": 2}
    print_runs([run], markdown=True, ceilings=Ceilings({"wgmma": 800.0}, 2.0), note=None)
    assert (
        "split-KV splits, each query tile's keys dealt to: k18_split_kv 2 (rules: split_count"
        in capsys.readouterr().out
    )
    save_runs([run], tmp_path / "decode.json")
    assert load_runs(tmp_path / "decode.json")[0].splits == {"k18_split_kv": 2}
    assert "splits" not in json.loads(json.dumps(decode_run().to_json()))  # none for a ladder without split-KV


# --- python -m kernels.tools.decode_splits ----------------------------------------------------------------------


def test_decode_splits_tries_the_rule_and_its_multiples_within_the_key_tiles():
    from kernels.tools.decode_splits import split_counts

    assert split_counts(2, 512) == [2, 4, 8, 16]
    assert split_counts(3, 6) == [3, 6]  # no more splits than key tiles


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [((), 1, "no CUDA GPU"), (("--rounds", "0"), 2, "--rounds"), (("--chapter", "99"), 1, "no CUDA GPU")],
)
def test_decode_splits_without_a_gpu_or_with_bad_options_says_why_in_one_line(args, code, message, capsys, monkeypatch):
    from kernels.tools import decode_splits
    from kernels.tools.cli import run

    hide_gpu(monkeypatch)
    capsys.readouterr()
    ran_code = run(decode_splits.parser(), decode_splits.run_decode_splits, list(args))
    err = capsys.readouterr().err
    assert ran_code == code and len(err.strip().splitlines()) == 1 and message in err, err
