"""The persistent chapters (15 on) on the GPU, where every block takes many pairs of query tiles: its Q buffers and
K/V stages go round many times, and a pair's middle tile may stand alone."""

import pytest
import torch

from kernels import DTYPES
from kernels.launch import gpu_arch, work_counter
from tests.helpers import CHAPTERS, check_chapter, random_qkv, requires_gpu

pytestmark = requires_gpu
PERSISTENT = [c for c in CHAPTERS if c.kernel.persistent]

# (batch, seq_len, heads): more pairs than a GPU has SMs (768 and 576; an H200 has 132), with 5 query tiles per
# head (a middle tile alone, so a skipped step) and 8.
MANY_PAIRS = [(4, 560, 64), (3, 1000, 48)]


@pytest.fixture(params=PERSISTENT, ids=[c.name for c in PERSISTENT])
def chapter(request):
    """A persistent chapter; they are written for Hopper: elsewhere each is skipped, naming why."""
    try:
        request.param.kernel.build_arch(gpu_arch(0))
    except ValueError as error:
        pytest.skip(str(error))
    return request.param


@pytest.mark.parametrize("shape", MANY_PAIRS, ids=[f"b{b}-s{s}-h{h}" for b, s, h in MANY_PAIRS])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_every_query_tile_of_many_pairs_per_block(chapter, shape, causal, dtype):
    """Every output row written (the output starts as NaN) and as accurate as torch's own attention."""
    batch, seq_len, heads = shape
    check_chapter(chapter, *random_qkv(batch, seq_len, heads, dtype, seed=seq_len), causal)


def test_grouped_heads_across_pairs(chapter):
    """Query heads that share a K/V head fall in different pairs, and the K/V copies follow each pair's head."""
    q, k, v = random_qkv(2, 700, 32, DTYPES["bf16"], seed=7, seq_len_k=900, kv_heads=4)
    check_chapter(chapter, q, k, v, True)


DYNAMIC = [c for c in PERSISTENT if c.kernel.dynamic_schedule]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_a_dynamic_schedule_leaves_its_counter_at_zero(causal):
    """Blocks take pairs from a counter; the last ask of a launch resets it, so launch after launch on one stream
    each starts from the first pair and gives the same output, and the counter reads 0 after each."""
    assert DYNAMIC, "no chapter takes its work from a counter"
    q, k, v = random_qkv(3, 1000, 48, DTYPES["bf16"], seed=11)
    for chapter in DYNAMIC:
        first = chapter.attention(q, k, v, causal=causal)
        for _ in range(3):
            assert torch.equal(chapter.attention(q, k, v, causal=causal), first), chapter.name
        counter = work_counter(q.device, torch.cuda.current_stream(q.device))
        assert not counter.any(), chapter.name  # the work counter, and a split tail's piece counts
        check_chapter(chapter, q, k, v, causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_o_rescaled_only_where_a_max_moved_is_kernel29_bit_for_bit(causal, dtype):
    """Kernel 29 with O's rescale skipped where no row max of a warp moved (factor exactly 1) writes the same bits
    as kernel 29, over rows long enough that most tiles skip it, with the log-sum-exp and grouped heads."""
    from kernels.tools.ablations import chapter_or_variant

    kernel29, lazy = chapter_or_variant("29"), chapter_or_variant("k29_lazy_rescale")
    try:
        lazy.kernel.build_arch(gpu_arch(0))
    except ValueError as error:
        pytest.skip(str(error))
    q, k, v = random_qkv(2, 3000, 16, dtype, seed=5, kv_heads=4)
    out, lse = kernel29.attention(q, k, v, causal=causal, return_lse=True)
    lazy_out, lazy_lse = lazy.attention(q, k, v, causal=causal, return_lse=True)
    assert torch.equal(lazy_out, out) and torch.equal(lazy_lse, lse)
    check_chapter(lazy, q, k, v, causal)


def assert_writes_kernel29s_bits(variant_name, shape, dtype, *, causal=False, heads=(8, 2)):
    """At (batch, seq_len_q, seq_len_k, per-sequence lengths) with `heads` (query heads, K/V heads): the variant's
    output, written over NaN, and its log-sum-exp are kernel 29's bit for bit, and the work counter is left at zero.
    Skipped where the variant is not built for this GPU."""
    from kernels.tools.ablations import chapter_or_variant

    kernel29, variant = chapter_or_variant("29"), chapter_or_variant(variant_name)
    try:
        variant.kernel.build_arch(gpu_arch(0))
    except ValueError as error:
        pytest.skip(str(error))
    batch, seq_len_q, seq_len_k, lengths = shape
    q, k, v = random_qkv(batch, seq_len_q, heads[0], dtype, seed=seq_len_k, seq_len_k=seq_len_k, kv_heads=heads[1])
    seq_lens_k = None if lengths is None else torch.tensor(lengths, dtype=torch.int32, device=q.device)
    out, lse = kernel29.attention(q, k, v, causal=causal, seq_lens_k=seq_lens_k, return_lse=True)
    variant_out = torch.full_like(q, float("nan"))
    variant_out, variant_lse = variant.attention(
        q, k, v, causal=causal, seq_lens_k=seq_lens_k, return_lse=True, out=variant_out
    )
    assert not variant_out.isnan().any()
    assert torch.equal(variant_out, out) and torch.equal(variant_lse, lse)
    assert not work_counter(q.device, torch.cuda.current_stream(q.device)).any()


# (batch, seq_len_q, seq_len_k, per-sequence lengths), 8 query heads on 2 K/V heads, so 32 positions a query tile:
# many pairs of query tiles per cluster; sequences shorter than the cache, one of 300 keys; and where the blocks work
# alone: query tiles so few that the keys are split, and an odd count of query tiles per unit.
PAIRED_SHAPES = [(2, 8192, 8192, None), (2, 4096, 9000, (8192, 300)), (2, 64, 9000, None), (2, 8160, 8192, None)]


@pytest.mark.parametrize("shape", PAIRED_SHAPES, ids=["many-pairs", "lengths", "split-alone", "odd-alone"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_blocks_sharing_k_and_v_write_kernel29s_bits(shape, dtype):
    """k29_kv_multicast pairs the blocks of a cluster in full attention over PAIRED_KEYS keys or more, each copying one
    plane of every K and V tile into both. Every row is computed as in kernel 29, so the output and the log-sum-exp
    are kernel 29's bit for bit, and the work counter, which paired blocks never ask, is left at zero."""
    assert_writes_kernel29s_bits("k29_kv_multicast", shape, dtype)


@pytest.mark.parametrize("shape", PAIRED_SHAPES, ids=["many-pairs", "lengths", "split-alone", "odd-alone"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_chapter31_writes_kernel29s_bits(shape, dtype):
    """Chapter 31 pairs the blocks of a cluster as k29_kv_multicast does, on kernel 30's loop, from PAIRED_KEYS keys
    on. Kernel 30's rows are kernel 29's bit for bit (test_the_short_seam_writes_kernel29s_bits), and so are its."""
    assert_writes_kernel29s_bits("31", shape, dtype)


# (batch, seq_len_q, seq_len_k, per-sequence lengths, causal, heads): where chapter 32's blocks pair, full and causal.
# 8 query heads on 2 K/V heads make 32 positions a query tile: over 96 keys more than queries, the later tile of every
# second pair holds a key tile more, which the earlier one passes over; sequences of their own lengths, one with such
# pairs; 4 heads on 4, the headline's tiles, a key tile more in every pair; and an odd count of query tiles, alone.
CAUSAL_PAIRED_SHAPES = [
    (2, 8192, 8192, None, False, (8, 2)),
    (2, 8192, 8288, None, True, (8, 2)),
    (2, 4096, 9000, (8192, 4300), True, (8, 2)),
    (1, 4096, 4096, None, True, (4, 4)),
    (2, 8160, 8192, None, True, (8, 2)),
]
CAUSAL_PAIRED_IDS = ["full", "causal-pass-over", "lengths-causal", "causal-every-pair", "odd-alone"]


@pytest.mark.parametrize("shape", CAUSAL_PAIRED_SHAPES, ids=CAUSAL_PAIRED_IDS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_causal_pairs_write_kernel29s_bits(shape, dtype):
    """Chapter 32 pairs the blocks causal too, both walking the later tile's key tiles, and pairs take their items
    from the counter. Every row is computed as in kernel 30, so the output and the log-sum-exp are kernel 29's bit for
    bit, and the counter, asked by each pair's first block, is left at zero."""
    *sizes, causal, heads = shape
    assert_writes_kernel29s_bits("32", sizes, dtype, causal=causal, heads=heads)


# (batch, seq_len_q, seq_len_k, per-sequence lengths, causal), 8 query heads on 2 K/V heads: many query tiles per
# block, full and causal; sequences shorter than the cache, whose V rows past their end are zeroed before the last
# P V, full and causal; more query tiles than blocks of one key tile each; and a short query, whose keys are split.
SEAM_SHAPES = [
    (2, 4096, 4096, None, False),
    (2, 4096, 4096, None, True),
    (2, 1000, 3000, (3000, 77), False),
    (2, 1000, 3000, (3000, 1077), True),
    (16, 200, 128, None, False),
    (2, 64, 9000, None, False),
]
SEAM_IDS = ["full", "causal", "lengths", "lengths-causal", "one-key-tile", "split"]


@pytest.mark.parametrize("shape", SEAM_SHAPES, ids=SEAM_IDS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_query_tiles_started_with_the_last_p_v_write_kernel29s_bits(shape, dtype):
    """k29_next_query_tile issues a query tile's last P V with the next one's first S, and its producer asks the
    counter a query tile ahead. Every row is still computed as in kernel 29, so the output and the log-sum-exp are
    kernel 29's bit for bit, and the counter, asked as many times, is left at zero."""
    *sizes, causal = shape
    assert_writes_kernel29s_bits("k29_next_query_tile", sizes, dtype, causal=causal)


@pytest.mark.parametrize("shape", SEAM_SHAPES, ids=SEAM_IDS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_the_short_seam_writes_kernel29s_bits(shape, dtype):
    """Chapter 30 reads each work item as the producer decoded it, places its rows once, and frees its staging rows
    under the last P V. It computes every row as kernel 29 does, so the output and the log-sum-exp are kernel 29's
    bit for bit, and the counter is left at zero."""
    *sizes, causal = shape
    assert_writes_kernel29s_bits("30", sizes, dtype, causal=causal)


@pytest.mark.parametrize("shape", SEAM_SHAPES, ids=SEAM_IDS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_o_written_under_the_next_s_writes_kernel29s_bits(shape, dtype):
    """k30_o_under_next_s issues each query tile's first S right after the last P V before it, and a block's last
    query tile one S past the list's end that nothing reads. Every row is still computed as in kernel 29, so the
    output and the log-sum-exp are kernel 29's bit for bit, and the counter is left at zero."""
    *sizes, causal = shape
    assert_writes_kernel29s_bits("k30_o_under_next_s", sizes, dtype, causal=causal)
