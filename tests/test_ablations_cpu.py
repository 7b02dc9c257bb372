"""The ablation sets without a GPU: their grids, and each variant as built: it differs from its parent chapter in one
small idea, its launch shape agrees with its constants, and its SASS shows that idea. That it compiles without
spills, with NVRTC and nvcc, is tested with the chapters' (tests/test_build_cpu.py)."""

import difflib
import functools
import itertools
import re
from collections import Counter

import pytest

from kernels import chapters
from kernels.build import ALL_INSTANCES, compile_nvrtc, nvrtc_version
from kernels.launch import DECODE_INSTANCES
from kernels.tools.ablations import (
    ABLATIONS_DIR,
    ablations,
    find_ablation,
    is_variant,
    load_ablation,
    load_ablations,
    set_folders,
)
from kernels.tools.loop_anatomy import (
    PRODUCTS_PER_TILE,
    UNIFORM,
    event_order,
    steady_lines,
    tile_counts,
    tile_loop_lines,
)
from kernels.tools.sass import opcodes, resource_usage
from tests.helpers import VARIANTS, between_the_waits, changed, deepest_wait, hopper_sass, sass_text, tile_loop, total

ABLATIONS = ablations()
LADDER = {c.name: c for c in chapters()}
CONTENDERS = {c.name: c for ablation in ABLATIONS for c in ablation.contenders}


def inspect_module():
    """Where `runner.py inspect`'s machinery (inspect_chapter, sass_counts) lives: one line to change if it moves."""
    import kernels.tools.inspection

    return kernels.tools.inspection


def parent(variant):
    """The ladder chapter a variant derives from: the one with its number."""
    return next(c for c in LADDER.values() if c.number == variant.number)


def test_the_sets_come_in_chapter_order():
    assert [a.name for a in ABLATIONS] == [
        "ch03_ldmatrix",
        "ch05_pipelining",
        "ch07_addressing",
        "ch14_overlap",
        "ch16_softmax_chains",
        "ch18_split_kv",
        "ch19_dynamic_schedule",
        "ch19_l2_prefetch",
        "ch19_ping_pong",
        "ch20_decode_kernel",
        "ch20_longest_first",
        "ch20_maxima_first",
        "ch20_prefill_instance",
        "ch20_quiet_producer",
        "ch21_clock_fence",
        "ch21_loop_top",
        "ch21_producer_warp",
        "ch21_row_sums",
        "ch21_short_tile",
        "ch21_softmax_first",
        "ch21_split_products",
        "ch26_softmax_in_turns",
        "ch28_single_tiles",
        "ch29_kv_multicast",
        "ch29_less_per_tile",
        "ch29_next_query_tile",
        "ch29_tail_split",
        "ch30_o_under_next_s",
        "ch30_q_in_registers",
    ]
    numbers = [3, 5, 7, 14, 16, 18, *[19] * 3, *[20] * 5, *[21] * 7, 26, 28, *[29] * 4, 30, 30]
    assert [a.number for a in ABLATIONS] == numbers


@pytest.mark.parametrize("ablation", ABLATIONS, ids=[a.name for a in ABLATIONS])
def test_cells_fill_the_grid_with_named_contenders(ablation):
    """Every (row, column) has exactly one contender, every contender sits in a cell, each variant in one: a grid, or
    one row of a chapter beside its variant where the idea has nothing to cross."""
    assert ablation.title and len(ablation.rows) >= 1 and len(ablation.columns) >= 2
    assert set(ablation.cells) == set(itertools.product(ablation.rows, ablation.columns))
    names = [c.name for c in ablation.contenders]
    assert len(names) == len(set(names)) and set(names) == set(ablation.cells.values())
    uses = Counter(ablation.cells.values())
    assert all(uses[c.name] == 1 for c in ablation.contenders if is_variant(c))
    assert [c.name for c in ablation.contenders if not is_variant(c)] == [n for n in LADDER if n in names]
    assert ablation.number in {c.number for c in ablation.contenders if not is_variant(c)}


def test_variants_are_named_after_a_ladder_chapter(variant):
    assert variant.name not in LADDER
    assert variant.source.parent.parent.parent == ABLATIONS_DIR
    assert variant.title and parent(variant).source.exists()


def test_find_ablation_by_number_slug_or_folder():
    assert find_ablation("3").name == find_ablation("ch03_ldmatrix").name == find_ablation("ldmatrix").name
    assert find_ablation("05").number == 5
    assert find_ablation("ping_pong").name == "ch19_ping_pong"
    # A chapter with several sets: its number names the one named as the chapter is.
    assert find_ablation("19").name == "ch19_dynamic_schedule" and find_ablation("20").name == "ch20_decode_kernel"
    assert find_ablation("prefill_instance").name == "ch20_prefill_instance"
    with pytest.raises(ValueError, match=r"no ablation set '4'; the sets are 3 \(ch03_ldmatrix\), 5"):
        find_ablation("4")


def test_a_number_naming_several_sets_none_the_chapters_own_is_a_clear_error(monkeypatch):
    foreign = [s for s in ablations() if s.name in ("ch19_l2_prefetch", "ch19_ping_pong")]
    monkeypatch.setattr("kernels.tools.ablations.ablations", lambda: foreign)
    sets = r"chapter 19 has 2 ablation sets \(ch19_l2_prefetch, ch19_ping_pong\): name one"
    with pytest.raises(ValueError, match=sets):
        find_ablation("19")


def test_loading_a_set_compiles_nothing():
    """Loading the sets builds no kernel, so it needs no GPU and no NVRTC."""
    before = compile_nvrtc.cache_info()
    assert [a.name for a in load_ablations(set_folders(), list(LADDER.values()))] == [a.name for a in ABLATIONS]
    assert compile_nvrtc.cache_info() == before


def test_a_cell_borrows_a_variant_an_earlier_set_holds():
    """ch21_short_tile's turns at kernel 21's tile are ch21_clock_fence's k21_ping_pong: the same kernel, listed once
    among the variants, with its own set; without that set loaded first the cell names nothing."""
    short, fence = find_ablation("short_tile"), find_ablation("clock_fence")
    [borrowed] = [c for c in short.contenders if c.name == "k21_ping_pong"]
    assert borrowed in fence.contenders and borrowed.source.parent.parent.name == "ch21_clock_fence"
    assert [c.name for c in VARIANTS].count("k21_ping_pong") == 1
    with pytest.raises(ValueError, match="ch21_short_tile: cells name k21_ping_pong, which are neither"):
        load_ablation(ABLATIONS_DIR / "ch21_short_tile", list(LADDER.values()))


def test_a_cell_naming_nothing_is_a_clear_error(tmp_path):
    folder = tmp_path / "ch03_typo"
    folder.mkdir()
    cells = '{("a", "b"): "k03_nope"}'
    (folder / "ablation.py").write_text(f'TITLE = "t"\nROWS = ("a",)\nCOLUMNS = ("b",)\nCELLS = {cells}\n')
    with pytest.raises(ValueError, match="ch03_typo: cells name k03_nope, which are neither chapters nor variants"):
        load_ablation(folder, list(LADDER.values()))


# ---------------------------------------------------------------------------------------------------
# Each variant as built
# ---------------------------------------------------------------------------------------------------


def test_kernel8_without_chapter7s_addressing_needs_every_register():
    usage = resource_usage(compile_nvrtc(CONTENDERS["k06_kv128"].source, "sm_90"))
    assert max(used["REG"] for used in usage.values()) == 255


def without_header(lines: list[str]) -> list[str]:
    """A kernel's lines after its opening comment, which says what the file is and so differs by design."""
    return list(itertools.dropwhile(lambda line: line.startswith("//"), lines))


def changed_lines(a: list[str], b: list[str]) -> int:
    """How many lines a diff removes plus how many it adds."""
    return len(changed(list(difflib.unified_diff(a, b, n=0, lineterm=""))))


def test_variant_is_its_parent_with_one_small_change(variant):
    """The diff against the chapter it derives from is a few lines; the header says which chapter that is."""
    mine, theirs = variant.source.read_text().splitlines(), parent(variant).source.read_text().splitlines()
    ablation = next(a for a in ABLATIONS if variant in a.contenders)
    assert mine[0].startswith(f"// Ablation of chapter {ablation.number}, derived from kernel {variant.number}:")
    mine, theirs = without_header(mine), without_header(theirs)
    # A few lines, or exactly the lines the ablated chapter adds to and removes from the one before it.
    before, chapter = [
        without_header(c.source.read_text().splitlines())
        for c in LADDER.values()
        if c.number in (ablation.number - 1, ablation.number)
    ]
    # Compared without indentation: the chapter may run the same lines one loop deeper than the variant.
    mine, theirs, before, chapter = ([line.strip() for line in lines] for lines in (mine, theirs, before, chapter))
    carried = (Counter(mine) - Counter(theirs), Counter(theirs) - Counter(mine)) == (
        Counter(chapter) - Counter(before),
        Counter(before) - Counter(chapter),
    )
    assert 0 < changed_lines(theirs, mine) <= ablation.changed_lines or carried
    loaders = [c.source.with_name("loader.py").read_text().splitlines() for c in (parent(variant), variant)]
    # Past the docstring: the title, and at most two of the launch's flags for what a variant compiles in (a line
    # removed and one added for each).
    assert changed_lines(*(lines[1:] for lines in loaders)) <= 2 * 3


# ---------------------------------------------------------------------------------------------------
# What the SASS shows: bf16, not causal, for sm_90, in the tile loop (tests/helpers.py's tile_loop)
# ---------------------------------------------------------------------------------------------------


@functools.cache
def sass_of(name: str) -> str:
    return sass_text(CONTENDERS[name])


def loop(name: str) -> dict[str, int]:
    """The tile loop's instructions, folded into the rows of `runner.py inspect`."""
    return inspect_module().sass_counts(tile_loop(sass_of(name)))


def address_arithmetic(name: str) -> int:
    """LEA and LOP3 in the tile loop: the shifts-and-adds and the XORs that build shared-memory addresses."""
    opcodes = tile_loop(sass_of(name))
    return total(opcodes, "LEA") + total(opcodes, "LOP3")


def test_ch03_variants_keep_their_loads_and_change_only_the_layout():
    """The per-lane variants issue kernel 2's loads (no LDSM), k03_padded kernel 3's ldmatrix. The swizzle
    costs XORs and shifts for every per-lane address; padding costs nothing, its stride folds into offsets."""
    k02, k03 = loop("k02_cp_async"), loop("k03_ldmatrix")
    for name in ("k02_swizzled", "k02_padded"):
        assert loop(name)["LDSM"] == loop(name)["LDSM.MT88"] == 0
        assert loop(name)["LDS"] == k02["LDS"]
    assert loop("k03_padded")["LDSM"] == k03["LDSM"] > 0
    assert loop("k03_padded")["LDSM.MT88"] == k03["LDSM.MT88"] > 0
    # How many address instructions the per-lane loop keeps is the compiler's choice: NVRTC 13.0 keeps more.
    if tuple(int(part) for part in nvrtc_version().split(".")) >= (13, 5):
        assert address_arithmetic("k02_swizzled") > 2 * address_arithmetic("k02_cp_async")
        assert address_arithmetic("k02_padded") <= address_arithmetic("k02_cp_async")
        assert address_arithmetic("k03_padded") <= address_arithmetic("k03_ldmatrix")


def test_ch05_one_stage_waits_inside_the_tile_two_stages_keep_the_next_tile_in_flight():
    """k04_block128 waits for V inside the tile behind three barriers, as kernel 4 does; k05_block64 keeps
    tile j + 1's copies in flight with one barrier per tile, as kernel 5 does. The math is the same in all four."""
    assert deepest_wait(sass_of("k04_block128")) == deepest_wait(sass_of("k04_swizzle")) == 1
    assert deepest_wait(sass_of("k05_block64")) == deepest_wait(sass_of("k05_pipelining")) == 2
    assert loop("k04_block128")["BAR"] == loop("k04_swizzle")["BAR"] == 3
    assert loop("k05_block64")["BAR"] == loop("k05_pipelining")["BAR"] == 1
    assert len({loop(name)["HMMA"] for name in ("k04_swizzle", "k04_block128", "k05_block64", "k05_pipelining")}) == 1


def test_ch07_kernel6_addressing_at_128_keys_spends_more_on_addresses():
    """k06_kv128 does kernel 8's math and loads, but builds its fragment addresses as kernel 6 does: more LEA
    and LOP3 per tile than kernel 8, as kernel 6 spends more than kernel 7 at 64 keys."""
    assert loop("k06_kv128")["HMMA"] == loop("k08_kv128")["HMMA"] == 2 * loop("k06_exp2")["HMMA"]
    assert loop("k06_kv128")["LDSM"] == loop("k08_kv128")["LDSM"]
    assert loop("k06_kv128")["LDSM.MT88"] == loop("k08_kv128")["LDSM.MT88"]
    assert address_arithmetic("k06_exp2") > address_arithmetic("k07_addressing")
    assert address_arithmetic("k06_kv128") > address_arithmetic("k08_kv128")


def exponentials_between_the_waits(name: str, instance: str) -> tuple[int, int]:
    """In the tile loop: the MUFU.EX2 between the wait for S (DEPBAR.LE gsb0, 0x1) and the wait for P V (0x0), and
    all of them. The loop is the one that issues both products: unlike tests/helpers.py's tile_loop, not the
    longest loop, which in a persistent kernel is the one over query tiles."""
    loop = tile_loop_lines(sass_text(CONTENDERS[name], instance), PRODUCTS_PER_TILE)
    first = next(i for i, text in enumerate(loop) if "DEPBAR.LE gsb0, 0x1" in text)
    second = next(i for i, text in enumerate(loop) if i > first and "DEPBAR.LE gsb0, 0x0" in text)
    return sum("MUFU.EX2" in text for text in loop[first:second]), sum("MUFU.EX2" in text for text in loop)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
@pytest.mark.parametrize("kernel", [14, 18])
def test_ch18_the_fence_keeps_every_exponential_between_the_waits(kernel, instance):
    """ptxas hoists the wait for P V of kernels 14 and 18 above their softmax: few exponentials, if any, run under
    P V. With the fence below the softmax, every one of them does, in every instance."""
    [chapter] = [name for name in CONTENDERS if name.startswith(f"k{kernel}_") and name in LADDER]
    before, total_before = exponentials_between_the_waits(chapter, instance)
    between, total = exponentials_between_the_waits(f"k{kernel}_fenced_softmax", instance)
    assert before < total_before // 4
    assert between == total == total_before > 0


def steady_path(name: str, instance: str) -> list[str]:
    """The steady path of a contender's tile loop (kernels/tools/loop_anatomy.py)."""
    return steady_lines(tile_loop_lines(sass_text(CONTENDERS[name], instance), PRODUCTS_PER_TILE))


@pytest.mark.parametrize("instance", ALL_INSTANCES)
@pytest.mark.parametrize("kernel", [18, 19])
def test_ch19_each_trim_takes_its_instructions_out_of_the_steady_path(kernel, instance):
    """Kernels 18 and 19 compare each of a thread's two rows' new max with -inf (FSETP) and select 0 in its place
    (FSEL) before the exponentials: started at -FLT_MAX, the max needs no guard, four instructions fewer. The
    lean kernel also starts each of the 16 chains of its sums (8 per row) at a first term instead of 0 + p, and
    derives stages and phases from an unsigned count: 16 FADD fewer and fewer uniform instructions. The
    exponentials stay."""
    [chapter] = [name for name in CONTENDERS if name.startswith(f"k{kernel}_") and name in LADDER]
    paths = [steady_path(name, instance) for name in (chapter, f"k{kernel}_finite_max", f"k{kernel}_lean")]
    assert [sum("FSETP" in line for line in path) for path in paths] == [2, 0, 0]
    assert len(paths[0]) - len(paths[1]) == 4
    fadds = [sum(line.split()[1:2] == ["FADD"] for line in path) for path in paths]
    assert fadds[1] - fadds[2] == 16
    uniform = [tile_counts(path)[UNIFORM] for path in paths]
    assert uniform[2] < uniform[1] == uniform[0]
    assert [sum("MUFU.EX2" in line for line in path) for path in paths] == [66, 66, 66]


@pytest.mark.parametrize("instance", ALL_INSTANCES)
@pytest.mark.parametrize("kernel", [18, 19])
def test_ch19_one_addition_per_descriptor_takes_uniform_instructions_out(kernel, instance):
    """With the descriptors' upper halves hidden from ptxas, each step of Q's, K's and V's descriptors is one
    addition: the steady path loses uniform-datapath instructions (an add with carry and a move per S wgmma) and
    nothing else changes kind."""
    lean, trimmed = (tile_counts(steady_path(f"k{kernel}_{name}", instance)) for name in ("lean", "lean_descriptors"))
    assert lean[UNIFORM] - trimmed[UNIFORM] >= 12
    assert {kind: n for kind, n in lean.items() if kind not in (UNIFORM, "total")} == {
        kind: n for kind, n in trimmed.items() if kind not in (UNIFORM, "total")
    }


# The start of each cell's steady path: how it waits for K and V, takes its turn and issues its 16 wgmma.
PING_PONG_ORDERS = {
    "k19_dynamic_schedule": "mbarrier wait×2 → HGMMA×16 → wait(≤1)",
    "k19_s_first": "mbarrier wait → HGMMA×8 → mbarrier wait → HGMMA×8 → wait(≤1)",
    "k19_turns": "mbarrier wait×2 → BAR.SYNC → HGMMA×16 → BAR.ARV → wait(≤1)",
    "k19_ping_pong": "mbarrier wait → BAR.SYNC → HGMMA×8 → mbarrier wait → HGMMA×8 → BAR.ARV → wait(≤1)",
}


@pytest.mark.parametrize("instance", ALL_INSTANCES)
@pytest.mark.parametrize("name", PING_PONG_ORDERS)
def test_ping_pong_each_cell_waits_and_takes_turns_as_its_grid_says(name, instance):
    """The ping-pong grid crosses the turns (BAR.SYNC before the products, BAR.ARV after) with S issued before the
    wait for V; in every instance each cell's tile loop starts as its row and column say, and nothing else in it
    differs in order: the exponentials follow the second wait in all four."""
    order = event_order(steady_path(name, instance))
    assert order.startswith(PING_PONG_ORDERS[name] + " → "), order
    assert order.count("BAR.") == (2 if name in ("k19_turns", "k19_ping_pong") else 0)
    assert "MUFU.EX2" not in order.split("wait(≤0)")[0]


def producer_loop_prefetches(sass: str) -> tuple[int, int]:
    """The TMA prefetches into L2 (UTMAPF) of a kernel: inside the producer's tile loops (a loop around the 4 copies
    of a K and a V tile, two planes each, and not Q's; ptxas may peel the last tiles into a loop of their own), and
    in all."""
    from kernels.tools.loop_anatomy import BRANCH, addressed

    lines = addressed(sass)
    spans = []
    for at, line in lines:
        branch = BRANCH.search(line)
        target = int(branch.group(2), 16) if branch else None
        if target is not None and target < at:
            if sum("UTMALDG" in text for address, text in lines if target <= address <= at) == 4:
                spans.append((target, at))
    inside = {address for address, text in lines if "UTMAPF" in text and any(a <= address <= b for a, b in spans)}
    return len(inside), sass.count("UTMAPF")


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_l2_prefetch_each_cell_prefetches_where_its_grid_says(instance):
    """Per plane of K and of V, a prefetch into L2: at a query tile's start, in the producer's tile loop (all of
    them inside it), or both (as many as the two apart); kernel 19 has none. The copies are kernel 19's."""
    copies = sass_of("k19_dynamic_schedule").count("UTMALDG")
    assert producer_loop_prefetches(sass_text(CONTENDERS["k19_dynamic_schedule"], instance)) == (0, 0)
    _, total_start = producer_loop_prefetches(sass_text(CONTENDERS["k19_prefetch_start"], instance))
    assert total_start >= 4
    inside, total_loop = producer_loop_prefetches(sass_text(CONTENDERS["k19_prefetch_loop"], instance))
    assert inside == total_loop >= 4
    _, total_both = producer_loop_prefetches(sass_text(CONTENDERS["k19_prefetch"], instance))
    assert total_both == total_start + total_loop
    for name in ("k19_prefetch_start", "k19_prefetch_loop", "k19_prefetch"):
        assert sass_of(name).count("UTMALDG") == copies, name


COPIES_ONCE_PER_TILE = ("k20_decode_kernel", "k20_conflicted_merge")
MERGE_WITHOUT_CONFLICTS = ("k20_decode_kernel", "k20_rowwise_copies")


@pytest.mark.parametrize("instance", list(DECODE_INSTANCES))
@pytest.mark.parametrize("name", ["k20_first", "k20_rowwise_copies", "k20_conflicted_merge", "k20_decode_kernel"])
def test_ch20_each_cell_copies_and_merges_as_its_grid_says(name, instance):
    """In decode_attention: copies addressed once per tile issue a whole tile's cp.async (LDGSTS) without the
    zero-fill predicate that checks a row against the sequence's length, 16 to a tile; copies addressed row by row
    check every one. The merge's rows lie MERGE_STRIDE = HEAD_DIM + 8 floats apart (the float2 stores of a warp's
    row g + 8 sit 8 such rows after row g's) and are read as float4; with bank conflicts, HEAD_DIM apart and read
    one float at a time."""
    sass = hopper_sass(CONTENDERS[name], DECODE_INSTANCES[instance])
    copies = [line for line in sass.splitlines() if "LDGSTS" in line]
    unchecked = [line for line in copies if not re.search(r"\], !?P\d ;", line)]
    if name in COPIES_ONCE_PER_TILE:
        assert unchecked and len(unchecked) % 16 == 0
    else:
        assert copies and not unchecked
    offsets = sorted(int(offset, 16) for offset in re.findall(r"STS\.64 \[R\d+\+(0x[0-9a-f]+)\]", sass))
    assert len(offsets) == 2 * 128 // 8  # per row: HEAD_DIM / 8 n-tiles, a float2 each, for rows g and g + 8
    row_stride_floats = (offsets[len(offsets) // 2] - offsets[0]) // (8 * 4)
    assert row_stride_floats == (128 + 8 if name in MERGE_WITHOUT_CONFLICTS else 128)
    assert ("LDS.128" in sass) == (name in MERGE_WITHOUT_CONFLICTS)


@functools.cache
def general_paths(name: str, instance: str) -> Counter:
    """Kernel 20's marks of chapter 18's generality (fp32 split rows, STG.E.64; the log-sum-exp, MUFU.LG2; the
    named barrier after V past a sequence's end is zeroed, a second BAR.SYNC) and of chapter 17's (the integer
    divisions of rows by the heads per tile: MUFU.RCP), and its size in SASS instructions."""
    sass = sass_text(CONTENDERS[name], instance)
    found = Counter(re.findall(r"\b(STG\.E\.64|MUFU\.LG2|BAR\.SYNC|MUFU\.RCP)\b", sass))
    found["size"] = sum(opcodes(sass).values())
    return found


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch20_prefill_instance_compiles_each_general_path_away(instance):
    """Compiled in, one split with full lengths and no log-sum-exp leaves no fp32 rows, no log-sum-exp and one block
    barrier, as in kernel 16; one head per tile takes divisions out; both together leave a kernel within a tenth of
    kernel 16's size."""
    general, one_head, no_splits, prefill, before = (
        general_paths(name, instance)
        for name in ("k20_decode_kernel", "k20_one_head", "k20_no_splits", "k20_prefill_only", "k16_softmax_chains")
    )
    assert general["STG.E.64"] and general["MUFU.LG2"] and general["BAR.SYNC"] == 2
    for trimmed in (no_splits, prefill):
        assert not trimmed["STG.E.64"] and not trimmed["MUFU.LG2"] and trimmed["BAR.SYNC"] == before["BAR.SYNC"] == 1
    assert one_head["MUFU.RCP"] < general["MUFU.RCP"] and prefill["MUFU.RCP"] < no_splits["MUFU.RCP"]
    assert prefill["size"] < min(one_head["size"], no_splits["size"]) <= max(one_head["size"], no_splits["size"])
    assert max(one_head["size"], no_splits["size"]) < general["size"]
    assert prefill["size"] <= 1.1 * before["size"]


def test_a_plain_prefill_variant_never_splits_a_prefill_call():
    """What k20_no_splits compiles in, its launch keeps to: one split for a prefill call that chapter 20 splits (a
    lone sequence's few query tiles against many keys); the decode kernel's splits stay chapter 20's."""
    plain, general = CONTENDERS["k20_no_splits"].kernel, CONTENDERS["k20_decode_kernel"].kernel
    prefill, decode, keys = (1, 128, 8, 128), (8, 1, 32, 128), (1, 32768, 8, 128)
    assert general.splits(prefill, keys, sms=132) > 1 and plain.splits(prefill, keys, sms=132) == 1
    assert plain.splits(decode, keys, sms=132) == general.splits(decode, keys, sms=132) > 1


WORK_ITEM_VARIANTS = ("k20_longest_first", "k20_shortest_first", "k20_shorter_first")


@pytest.mark.parametrize("instance", ALL_INSTANCES)
@pytest.mark.parametrize("name", WORK_ITEM_VARIANTS)
def test_ch20_work_items_change_the_list_not_the_tile_loop(name, instance):
    """The work list is the producer's and the consumers' lookup, outside the tile loop: each variant's steady path
    (the loop less the mask a tile without one jumps over, where causal positions come from the work item) is
    kernel 20's, instruction for instruction, by kind."""
    variant, parent = (
        tile_counts(steady_lines(tile_loop_lines(sass_text(CONTENDERS[n], instance), products=16)))
        for n in (name, "k20_decode_kernel")
    )
    assert variant == parent and parent["HGMMA (wgmma)"] == 16


def sleeping_waits(name: str) -> int:
    """The calls of mbarrier_wait_sleeping in a kernel's source, its definition left out."""
    return len(re.findall(r"\bmbarrier_wait_sleeping\(&", CONTENDERS[name].source.read_text()))


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch20_quiet_producer_sleeps_in_the_waits_its_grid_names(instance):
    """Each wait that sleeps between tries brings one NANOSLEEP; the producer has three such waits (Q's buffer, K's
    and V's stages), the consumers five, and kernel 20 none."""
    counts = {
        name: sass_text(CONTENDERS[name], instance).count("NANOSLEEP")
        for name in ("k20_decode_kernel", "k20_producer_sleeps", "k20_consumers_sleep", "k20_all_sleep")
    }
    assert counts["k20_decode_kernel"] == 0
    assert counts["k20_producer_sleeps"] == sleeping_waits("k20_producer_sleeps") == 3
    assert counts["k20_consumers_sleep"] == sleeping_waits("k20_consumers_sleep") == 5
    assert counts["k20_all_sleep"] == counts["k20_producer_sleeps"] + counts["k20_consumers_sleep"]


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch20_maxima_first_moves_the_maxima_between_the_waits(instance):
    """Kernel 20 and k20_ping_pong wait for P V right after S: next to no FMNMX and no MUFU.EX2 between the waits.
    With the fence, every FMNMX of the row maxima and the rescales' exponentials come before the wait for P V, and
    the fence's MEMBAR with them; the turns add a named-barrier sync and arrive (BAR) to the tile loop."""
    for name in ("k20_decode_kernel", "k20_ping_pong", "k20_maxima_first", "k20_maxima_ping_pong"):
        between, after = between_the_waits(CONTENDERS[name], instance)
        if "maxima" in name:
            assert total(between, "FMNMX") >= 64 and total(after, "FMNMX") == 0, name
            assert total(between, "MUFU.EX2") >= 2 and total(between, "MEMBAR") == 1, name
        else:
            assert total(between, "FMNMX") <= 1 and total(between, "MUFU.EX2") == 0, name
        loop = opcodes("\n".join(tile_loop_lines(sass_text(CONTENDERS[name], instance), products=16)))
        assert (total(loop, "BAR") == 2) == ("ping_pong" in name), name


def test_chapter_21_is_the_maxima_cell_of_its_ablation_set():
    """The ch20_maxima_first cell that paid became chapter 21: the same kernel, line for line, under its own
    header, so the set's grid measured the chapter's code."""
    chapter = LADDER["k21_maxima_first"].source.read_text().splitlines()
    variant = CONTENDERS["k20_maxima_first"].source.read_text().splitlines()
    assert chapter != variant and without_header(chapter) == without_header(variant)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch21_split_products_moves_what_its_grid_says(instance):
    """The first half's exponentials between the waits: at least 32 MUFU.EX2 there (kernel 21 keeps at most 16); P V
    in halves alone leaves them after the wait, except causal, where ptxas moves them up by itself. P V in halves:
    the tile's 16 HGMMA issue in two places, S and the second half together, the first half's four after the wait
    for P V, among the second half's exponentials."""
    causal = "true" in instance
    for name in ("k21_maxima_first", "k21_half_exponentials_first", "k21_split_products", "k21_split_half_first"):
        between, after = between_the_waits(CONTENDERS[name], instance)
        moved = "half" in name or (causal and "split" in name)
        assert (total(between, "MUFU.EX2") >= 32) == moved, name
        assert total(between, "MUFU.EX2") + total(after, "MUFU.EX2") == 66, name
        assert total(after, "HGMMA") == (4 if "split" in name else 0), name


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch21_softmax_first_moves_what_its_grid_says(instance):
    """The exponentials between the waits: all 66 MUFU.EX2 before the wait for P V (kernel 21 keeps at most 16).
    O rescaled a tile late: its 64 FMUL leave the path after the wait and join the issue, between a fence before
    S and one before P V (a second WARPGROUP.ARRIVE); the whole softmax first leaves only P's packing after it."""
    for name in ("k21_maxima_first", "k21_exponentials_first", "k21_rescale_late", "k21_softmax_first"):
        between, after = between_the_waits(CONTENDERS[name], instance)
        first = "exponentials" in name or "softmax" in name
        late = "late" in name or "softmax" in name
        assert (total(between, "MUFU.EX2") == 66) == first and total(between, "MUFU.EX2") >= 11, name
        assert total(after, "FMUL") == (0 if late else 64), name
        loop = opcodes("\n".join(tile_loop_lines(sass_text(CONTENDERS[name], instance), products=16)))
        assert loop["WARPGROUP.ARRIVE"] == (2 if late else 1), name
        if name == "k21_softmax_first":  # after the wait: P's packing, no softmax arithmetic
            assert total(after, "F2FP") == 32, name
            assert not any(total(after, op) for op in ("MUFU", "FMNMX", "FADD", "FMUL", "FFMA")), after


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch26_softmax_in_turns_moves_what_its_grid_says(instance):
    """As on kernel 21, with the turns: all 66 MUFU.EX2 between the waits where the exponentials come first (kernel
    26 leaves 54 of them after the wait for P V); O's 64 FMUL leave the path after the wait where it is rescaled
    late; the whole softmax first leaves only P's packing after the wait. Every cell takes and passes its turn."""
    for name in ("k26_turns", "k26_exponentials_first", "k26_rescale_late", "k26_softmax_first"):
        between, after = between_the_waits(CONTENDERS[name], instance)
        first = "exponentials" in name or "softmax" in name
        late = "late" in name or "softmax" in name
        assert (total(between, "MUFU.EX2") == 66) == first and total(after, "MUFU.EX2") == 66 - total(
            between, "MUFU.EX2"
        ), name
        assert total(after, "FMUL") == (0 if late else 64), name
        loop = opcodes("\n".join(tile_loop_lines(sass_text(CONTENDERS[name], instance), products=16)))
        assert total(loop, "BAR") == 2, name
        if name == "k26_softmax_first":  # after the wait: P's packing, no softmax arithmetic
            assert total(after, "F2FP") == 32, name
            assert not any(total(after, op) for op in ("MUFU", "FMNMX", "FADD", "FMUL", "FFMA")), after


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch21_clock_fence_holds_the_maxima_with_a_clock_read_instead_of_a_membar(instance):
    """Either fence keeps every FMNMX of the row maxima before the wait for P V; the clock read leaves no MEMBAR in
    the tile loop and reads the clock once; the turns add a named-barrier sync and arrive (BAR)."""
    for name in ("k21_maxima_first", "k21_ping_pong", "k21_clock_fence", "k21_clock_ping_pong"):
        between, after = between_the_waits(CONTENDERS[name], instance)
        assert total(between, "FMNMX") >= 64 and total(after, "FMNMX") == 0, name
        loop = opcodes("\n".join(tile_loop_lines(sass_text(CONTENDERS[name], instance), products=16)))
        clock = "clock" in name
        assert (total(loop, "MEMBAR"), total(loop, "S2R") + total(loop, "CS2R") >= 1) == (0 if clock else 1, clock), (
            name
        )
        assert (total(loop, "BAR") == 2) == ("ping_pong" in name), name


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch21_loop_top_waits_and_counts_as_its_grid_says(instance):
    """V awaited once S is issued: one mbarrier wait before the first HGMMA and one between S's eight and P V's eight,
    where kernel 21 waits twice before all sixteen. From an unsigned count, stages and phases take no signed rounding
    (ULEA.HI) in the steady path, and fewer uniform instructions."""
    counts = {}
    for name in ("k21_maxima_first", "k21_v_after_s", "k21_unsigned_count", "k21_lean_top"):
        steady = steady_path(name, instance)
        order = event_order(steady)
        if name in ("k21_v_after_s", "k21_lean_top"):
            assert order.startswith("mbarrier wait → HGMMA×8 → mbarrier wait → HGMMA×8 → wait(≤1)"), (name, order)
        else:
            assert order.startswith("mbarrier wait×2 → HGMMA×16 → wait(≤1)"), (name, order)
        signed_rounding = sum("ULEA.HI" in line for line in steady)
        assert (signed_rounding == 0) == (name in ("k21_unsigned_count", "k21_lean_top")), (name, signed_rounding)
        counts[name] = tile_counts(steady)[UNIFORM]
    assert counts["k21_unsigned_count"] < counts["k21_maxima_first"]
    assert counts["k21_lean_top"] < counts["k21_v_after_s"]


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch21_producer_warp_copies_from_the_warp_and_waits_as_its_grid_says(instance):
    """The producer's one thread is the block's thread 256 (warp 8) or 288 (warp 9): the kernel compares threadIdx.x
    with it. A wait with a suspend-time hint retries through NANOSLEEP.SYNCS, which the barrier's phase wakes; the
    kernel without one retries its try at once and sleeps nowhere."""
    for name in ("k21_maxima_first", "k21_suspend_hint", "k21_producer_warp9", "k21_warp9_suspend_hint"):
        sass = sass_text(CONTENDERS[name], instance)
        producer = 0x120 if "warp9" in name else 0x100
        assert re.search(rf"ISETP\.NE\.AND P\d, PT, R\d+, {producer:#x}, PT", sass), name
        sleeps = sass.count("NANOSLEEP.SYNCS")
        assert (sleeps >= sass.count("SYNCS.PHASECHK.TRANS64.TRYWAIT") // 2) if "suspend" in name else sleeps == 0, name


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch21_row_sums_takes_the_sums_to_the_tensor_cores(instance):
    """With the sums on the tensor cores, each tile issues eight more wgmma, of N = 8 (HGMMA.64x8x16) and A in
    registers, beside P V's eight, and the steady path keeps next to none of the 80 FADD the sums by additions take.
    The fence's MEMBAR is in the cells that hold the maxima above the wait, and only there."""
    for name in ("k20_decode_kernel", "k21_maxima_first", "k21_row_sums_unfenced", "k21_row_sums"):
        tensor = "row_sums" in name
        products = PRODUCTS_PER_TILE + (8 if tensor else 0)
        loop = tile_loop_lines(sass_text(CONTENDERS[name], instance), products)
        assert sum("HGMMA.64x8x16" in line for line in loop) == (8 if tensor else 0), name
        steady = opcodes("\n".join(steady_lines(loop)))
        assert (total(steady, "FADD") <= 4) == tensor, (name, total(steady, "FADD"))
        assert total(opcodes("\n".join(loop)), "MEMBAR") == (
            0 if name in ("k20_decode_kernel", "k21_row_sums_unfenced") else 1
        ), name


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_ch21_short_tile_waits_and_trims_as_its_grid_says(instance):
    """With the next K tile asked under the softmax (mbarrier.test_wait: a SYNCS.PHASECHK without TRYWAIT, which
    looks once, after the tile's first exponential), the steady path issues S with no wait before it and waits only for
    V, between S's eight HGMMA and P V's eight; with turns, inside a BAR.SYNC and a BAR.ARV. The short tile's chains
    start at their first term, 64 FADD where kernel 21 has 80, and its descriptors take fewer uniform instructions."""
    counts = {}
    for name in ("k21_peeked", "k21_short_tile", "k21_peeked_turns", "k21_short_tile_turns"):
        steady = steady_path(name, instance)
        issue = "HGMMA×8 → mbarrier wait → HGMMA×8"
        order = event_order(steady)
        expected = f"BAR.SYNC → {issue} → BAR.ARV → wait(≤1)" if "turns" in name else f"{issue} → wait(≤1)"
        assert order.startswith(expected), (name, order)
        assert order.count("mbarrier test") == 1 and order.index("MUFU.EX2") < order.index("mbarrier test"), order
        counts[name] = tile_counts(steady)
        assert counts[name]["FADD"] == (64 if "short" in name else 80), name
    for turns in ("", "_turns"):
        short, peeked = counts[f"k21_short_tile{turns}"], counts[f"k21_peeked{turns}"]
        assert short[UNIFORM] < peeked[UNIFORM] and short["total"] < peeked["total"] - 16
