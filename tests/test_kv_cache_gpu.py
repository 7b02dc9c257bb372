"""The split-KV chapters (18 on), and the ablation variants derived from them, on the GPU: keys split across blocks
and merged, per-sequence KV lengths, the log-sum-exp; and the chapters before them refusing what they do not
compute."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from kernels import DTYPES
from kernels.launch import gpu_arch
from reference import attention_error, exact_attention
from tests.helpers import CHAPTERS, KERNELS, random_qkv, requires_gpu

pytestmark = requires_gpu
KV_CACHE = [c for c in KERNELS if c.kernel.kv_cache and not c.kernel.plain_prefill]  # as its chapter, or refused
SMS = 132  # the split rule's input on an H200; the tests below choose shapes for it, and assert what it gave
# The variants that sum each row of P on the tensor cores add P as rounded to bf16 for P V, not the float
# exponentials: a row over a few keys keeps up to half a bf16 step (2^-9) of relative error in its sum, and so in
# its log-sum-exp; the others are held to 1e-3.
LSE_ATOL = {"k21_row_sums": 2**-9, "k21_row_sums_unfenced": 2**-9}

# (batch, seq_len_q, seq_len_k, heads, kv_heads): decoding (one query), a few queries against a long cache, and a
# prefill; small grids split, large ones do not. The last two fill a decode kernel's 16 rows: 16 positions of one
# head, one position of 16 heads.
SHAPES = [
    (3, 1, 2000, 32, 8),
    (2, 5, 1000, 16, 2),
    (2, 300, 700, 8, 8),
    (1, 1, 300, 40, 8),
    (2, 16, 777, 4, 4),
    (2, 1, 1500, 64, 4),
]


@pytest.fixture(params=KV_CACHE, ids=[c.name for c in KV_CACHE])
def chapter(request):
    """A split-KV chapter or variant; they are written for Hopper: elsewhere each is skipped, naming why."""
    try:
        request.param.kernel.build_arch(gpu_arch(0))
    except ValueError as error:
        pytest.skip(str(error))
    return request.param


def torch_with_lengths(q, k, v, lengths, causal, scale):
    """torch's own attention (its default backend) of each sequence on its first lengths[b] keys, in q's dtype."""
    out = torch.empty_like(q)
    for b, length in enumerate(lengths.tolist()):
        qb, kb, vb = (x[b : b + 1, :n].transpose(1, 2) for x, n in ((q, q.shape[1]), (k, length), (v, length)))
        mask = causal_lower_right(q.shape[1], length) if causal else None
        out[b] = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale, enable_gqa=True)[0].transpose(
            0, 1
        )
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=[f"b{b}-q{q}-k{k}-h{h}-kv{kv}" for b, q, k, h, kv in SHAPES])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_lengths_and_log_sum_exp_match_exact_attention(chapter, shape, causal, dtype):
    """Each sequence stops at its own length (the whole cache, and the shortest its queries all see a key at); the
    cache holds NaN past each length, which must not leak in. Every row is written, as close as torch's own
    attention on the cut sequences, and the log-sum-exp to float32 rounding."""
    batch, seq_len_q, seq_len_k, heads, kv_heads = shape
    q, k, v = random_qkv(batch, seq_len_q, heads, dtype, seed=seq_len_k, seq_len_k=seq_len_k, kv_heads=kv_heads)
    shortest = seq_len_q if causal else 1
    generator = torch.Generator().manual_seed(batch)
    lengths = torch.randint(shortest, seq_len_k + 1, (batch,), generator=generator, dtype=torch.int32)
    lengths[0], lengths[-1] = seq_len_k, shortest
    for b, length in enumerate(lengths.tolist()):
        k[b, length:], v[b, length:] = math.nan, math.nan
    lengths = lengths.cuda()
    scale = 0.05
    exact, exact_lse = exact_attention(q, k, v, causal=causal, scale=scale, seq_lens_k=lengths, return_lse=True)
    out = torch.full_like(q, math.nan)
    result, lse = chapter.attention(q, k, v, causal=causal, out=out, scale=scale, seq_lens_k=lengths, return_lse=True)
    torch.cuda.synchronize()
    assert result.data_ptr() == out.data_ptr() and not out.isnan().any()
    assert lse.shape == (batch, heads, seq_len_q) and lse.dtype == torch.float32
    torch.testing.assert_close(lse, exact_lse, rtol=1e-4, atol=1e-3)
    baseline = attention_error(torch_with_lengths(q, k, v, lengths, causal, scale), exact)
    assert attention_error(out, exact).within(baseline)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kv_heads", [2, 4], ids=["group-4", "group-2"])
def test_rows_that_see_no_key_are_zero_with_lse_minus_infinity(chapter, causal, kv_heads):
    """A sequence of length 0, and (causal) one shorter than its queries, whose first rows see no key: those rows
    are 0 with log-sum-exp -inf, the rest as exact attention; split or not, in tiles of 24 rows or of 12."""
    q, k, v = random_qkv(3, 6, 8, DTYPES["bf16"], seed=5, seq_len_k=500, kv_heads=kv_heads)
    lengths = torch.tensor([0, 3, 500], dtype=torch.int32, device="cuda")
    for b, length in enumerate(lengths.tolist()):
        k[b, length:], v[b, length:] = math.nan, math.nan
    exact, exact_lse = exact_attention(q, k, v, causal=causal, seq_lens_k=lengths, return_lse=True)
    out, lse = chapter.attention(q, k, v, causal=causal, seq_lens_k=lengths, return_lse=True)
    assert torch.equal(out[0], torch.zeros_like(out[0])) and bool((lse[0] == -math.inf).all())
    assert torch.equal(lse.isinf(), exact_lse.isinf())
    atol = LSE_ATOL.get(chapter.name, 1e-3)
    torch.testing.assert_close(lse[~lse.isinf()], exact_lse[~exact_lse.isinf()], rtol=1e-4, atol=atol)
    assert attention_error(out, exact).rel_l2 < 1e-2


def test_small_grids_split_and_large_ones_do_not(chapter):
    """The split rule at the shapes above: the decode shapes split their keys, the prefill does not."""
    kernel = chapter.kernel
    splits = {
        shape: kernel.splits((b, q, h, 128), (b, k, kv, 128), SMS) for shape in SHAPES for b, q, k, h, kv in [shape]
    }
    assert splits[SHAPES[0]] > 1 and splits[SHAPES[1]] > 1 and splits[SHAPES[3]] > 1
    assert kernel.splits((16, 4096, 16, 128), (16, 4096, 16, 128), SMS) == 1


@pytest.mark.parametrize("split", [False, True], ids=["whole", "split"])
def test_log_sum_exp_without_lengths(chapter, split):
    """return_lse alone: unsplit (the kernel writes it) and split (combine_splits does)."""
    batch, seq_len = (8, 1024) if not split else (1, 700)
    q, k, v = random_qkv(batch, seq_len, 16, DTYPES["bf16"], seed=3)
    assert (chapter.kernel.splits(q.shape, k.shape, SMS) > 1) == split
    out, lse = chapter.attention(q, k, v, causal=True, return_lse=True)
    scores = (q.double().transpose(1, 2) @ k.double().permute(0, 2, 3, 1)) / math.sqrt(128)
    scores.masked_fill_(torch.ones(seq_len, seq_len, dtype=torch.bool, device="cuda").triu(1), -math.inf)
    atol = LSE_ATOL.get(chapter.name, 1e-3)
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1).float(), rtol=1e-4, atol=atol)
    assert attention_error(out, exact_attention(q, k, v, causal=True)).rel_l2 < 1e-2


TAIL_SPLIT = [c for c in KV_CACHE if c.kernel.split_tail]
# (batch, seq_len, heads, kv_heads): calls whose last wave on 132 SMs is a few tiles, each split into pieces
# (tail_split): 144 tiles of 16 key tiles (12 split in 4), 1,088 of 32 (32 in 4), and packed groups of 3 heads,
# 192 tiles of 8 key tiles (60 in 2).
TAIL_SHAPES = [(1, 2048, 9, 9), (1, 4096, 34, 34), (2, 1000, 12, 4)]


@pytest.mark.parametrize("shape", TAIL_SHAPES, ids=[f"b{b}-s{s}-h{h}-kv{kv}" for b, s, h, kv in TAIL_SHAPES])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_a_split_tail_merges_to_exact_attention(shape, dtype):
    """Full attention whose last wave is split along the keys: each tail tile's last piece merges every piece's
    rows, as close to exact attention as torch's own, with per-sequence lengths (NaN past them) and the
    log-sum-exp; launch after launch gives the same output and leaves every counter at zero."""
    from kernels.launch import work_counter

    assert TAIL_SPLIT, "no chapter splits its tail"
    batch, seq_len, heads, kv_heads = shape
    q, k, v = random_qkv(batch, seq_len, heads, dtype, seed=heads, kv_heads=kv_heads)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    lengths = torch.tensor([seq_len, seq_len - 300][:batch], dtype=torch.int32)
    for b, length in enumerate(lengths.tolist()):
        k[b, length:], v[b, length:] = math.nan, math.nan
    lengths = lengths.cuda()
    exact, exact_lse = exact_attention(q, k, v, seq_lens_k=lengths, return_lse=True)
    baseline = attention_error(torch_with_lengths(q, k, v, lengths, False, None), exact)
    for chapter in TAIL_SPLIT:
        if not chapter.kernel.runs_on(gpu_arch(0)):
            pytest.skip(f"{chapter.name} is built for {chapter.kernel.arch}")
        assert chapter.kernel.tail(q.shape, k.shape, sms, False)[1] > 1, "the shape does not split its tail here"
        out, lse = chapter.attention(q, k, v, seq_lens_k=lengths, return_lse=True)
        again, _ = chapter.attention(q, k, v, seq_lens_k=lengths, return_lse=True)
        assert torch.equal(out, again), chapter.name
        assert not work_counter(q.device, torch.cuda.current_stream(q.device)).any(), chapter.name
        torch.testing.assert_close(lse, exact_lse, rtol=1e-4, atol=1e-3)
        assert attention_error(out, exact).within(baseline), chapter.name


def test_a_length_past_the_cache_is_refused(chapter):
    q, k, v = random_qkv(2, 1, 4, DTYPES["bf16"], seq_len_k=100)
    with pytest.raises(ValueError, match="seq_lens_k must be at most seq_len_k = 100"):
        chapter.attention(q, k, v, seq_lens_k=torch.tensor([100, 101], dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match="seq_lens_k must not be negative"):
        chapter.attention(q, k, v, seq_lens_k=torch.tensor([-1, 5], dtype=torch.int32, device="cuda"))


@pytest.mark.parametrize("earlier", [c for c in CHAPTERS if not c.kernel.kv_cache][-1:], ids=lambda c: c.name)
def test_an_earlier_chapter_refuses_lengths_and_lse_by_name(earlier):
    q, k, v = random_qkv(1, 4, 2, DTYPES["bf16"])
    with pytest.raises(ValueError, match=f"{earlier.name}: per-sequence KV lengths need a split-KV chapter"):
        earlier.attention(q, k, v, seq_lens_k=torch.tensor([4], dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match=f"{earlier.name}: the log-sum-exp need"):
        earlier.attention(q, k, v, return_lse=True)
