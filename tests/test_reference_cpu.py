"""The exact reference is what every error is measured against, so it is checked against a plain loop."""

import math
import sys
import types

import pytest
import torch
from torch.nn.attention import SDPBackend

import reference
from reference import (
    AttentionError,
    attention_bytes,
    attention_error,
    attention_flops,
    exact_attention,
    sdpa,
    sdpa_available,
)


def visible_keys(query: int, seq_len_q: int, seq_len_k: int, causal: bool) -> range:
    """The keys one query sees: all of them, or when causal those up to its bottom-right diagonal."""
    return range(query + seq_len_k - seq_len_q + 1 if causal else seq_len_k)


def loop_attention(q, k, v, causal, *, scale=None, lengths=None):
    """Attention one query row at a time, in float64, straight from the definition; with its log-sum-exp.

    Sequence b sees its first lengths[b] keys (all by default); a row that sees none is 0, its log-sum-exp -inf.
    """
    batch, seq_len_q, heads, dim = q.shape
    seq_len_k, kv_heads = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(dim) if scale is None else scale
    out = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full((batch, heads, seq_len_q), -math.inf, dtype=torch.float64)
    for b in range(batch):
        length = seq_len_k if lengths is None else lengths[b]
        for h in range(heads):
            kv_head = h // (heads // kv_heads)
            for i in range(seq_len_q):
                keys = visible_keys(i, seq_len_q, length, causal)
                if not keys:
                    continue
                scores = torch.tensor([float(q[b, i, h].double() @ k[b, j, kv_head].double()) * scale for j in keys])
                weights = torch.exp(scores - scores.max())
                lse[b, h, i] = scores.max() + weights.sum().log()
                weights /= weights.sum()
                out[b, i, h] = (weights[:, None] * v[b, keys, kv_head].double()).sum(0)
    return out, lse


def random_qkv(seq_len_q, seq_len_k, heads, kv_heads, dtype=torch.bfloat16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, seq_len_q, heads, 128, generator=generator).to(dtype)
    k, v = (torch.randn(2, seq_len_k, kv_heads, 128, generator=generator).to(dtype) for _ in range(2))
    return q, k, v


SHAPES = [  # seq_len_q, seq_len_k, n_heads, n_kv_heads
    (1, 1, 3, 3),
    (5, 5, 3, 3),
    (17, 17, 3, 3),
    (4, 9, 4, 2),  # grouped heads, queries at the end of a longer key sequence
    (1, 7, 4, 1),  # one query against a cache, one K/V head for all
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"q{a}-k{b}-h{c}-kv{d}" for a, b, c, d in SHAPES])
def test_exact_attention_matches_loop(shape, causal):
    q, k, v = random_qkv(*shape, seed=sum(shape))
    exact = exact_attention(q, k, v, causal=causal)
    assert exact.dtype == torch.float32 and exact.shape == q.shape
    expected, expected_lse = loop_attention(q, k, v, causal)
    torch.testing.assert_close(exact.double(), expected, rtol=1e-5, atol=1e-6)
    lse = exact_attention(q, k, v, causal=causal, return_lse=True)[1]
    torch.testing.assert_close(lse.double(), expected_lse, rtol=1e-5, atol=1e-6)


def padded_with_nan(k: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """A copy of a cache whose slots past each sequence's length hold NaN: whatever reads them shows."""
    k = k.clone()
    for b, length in enumerate(lengths):
        k[b, length:] = math.nan
    return k


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("seq_len_q", "lengths"),
    [(1, [7, 0]), (3, [9, 2]), (4, [4, 9]), (5, [0, 1])],
    ids=["decode-empty", "fewer-keys-than-queries", "full-and-exact", "chunk-short"],
)
def test_per_sequence_lengths_and_lse_match_loop(seq_len_q, lengths, causal):
    """Sequence b sees its first lengths[b] keys of a padded cache (NaN past them), bottom-right causal on its length:
    a query that sees no key is 0 with log-sum-exp -inf."""
    q, k, v = random_qkv(seq_len_q, 9, 4, 2, seed=seq_len_q)
    k, v = padded_with_nan(k, lengths), padded_with_nan(v, lengths)
    for seq_lens_k in (lengths, torch.tensor(lengths, dtype=torch.int32)):
        out, lse = exact_attention(q, k, v, causal=causal, scale=0.07, seq_lens_k=seq_lens_k, return_lse=True)
        expected_out, expected_lse = loop_attention(q, k, v, causal, scale=0.07, lengths=lengths)
        assert out.dtype == lse.dtype == torch.float32 and lse.shape == (2, 4, seq_len_q)
        torch.testing.assert_close(out.double(), expected_out, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(lse.double(), expected_lse, rtol=1e-5, atol=1e-6)
    assert torch.isfinite(out).all()
    seen_nothing = lse.isneginf()
    assert seen_nothing.any() == (causal and seq_len_q > min(lengths) or 0 in lengths)


def test_full_lengths_are_no_lengths():
    q, k, v = random_qkv(3, 8, 4, 2)
    for causal in (False, True):
        without = exact_attention(q, k, v, causal=causal, return_lse=True)
        torch.testing.assert_close(exact_attention(q, k, v, causal=causal, seq_lens_k=[8, 8], return_lse=True), without)


def test_lse_is_the_log_of_the_softmax_denominator():
    """Attention over two halves of the keys, weighted by their log-sum-exps, is attention over all of them: what
    a split-KV kernel's combine step computes."""
    q, k, v = random_qkv(2, 10, 4, 2, dtype=torch.float32)
    out, lse = exact_attention(q, k, v, return_lse=True)
    halves = [exact_attention(q, k[:, s], v[:, s], return_lse=True) for s in (slice(0, 6), slice(6, 10))]
    weights = torch.softmax(torch.stack([half_lse for _, half_lse in halves]), dim=0)  # (2, batch, heads, seq_q)
    merged = sum(w.transpose(1, 2)[..., None] * half_out for w, (half_out, _) in zip(weights, halves, strict=True))
    torch.testing.assert_close(merged, out)
    torch.testing.assert_close(torch.logsumexp(torch.stack([h for _, h in halves]), dim=0), lse)


def test_scale_multiplies_the_scores():
    """A scale of s is the default scale on queries multiplied by s·√128."""
    q, k, v = random_qkv(3, 7, 2, 2, dtype=torch.float32)
    torch.testing.assert_close(exact_attention(q, k, v, scale=0.3), exact_attention(q * 0.3 * math.sqrt(128), k, v))


@pytest.mark.parametrize("lengths", [[3], [3, 10], [-1, 3]], ids=["too-few", "too-long", "negative"])
def test_bad_lengths_are_named(lengths):
    with pytest.raises(ValueError, match=r"seq_lens_k must hold 2 lengths in \[0, 9\]"):
        exact_attention(*random_qkv(2, 9, 2, 2), seq_lens_k=lengths)


def test_more_queries_than_keys_without_a_mask():
    q, k, v = random_qkv(6, 3, 2, 2)
    expected, _ = loop_attention(q, k, v, False)
    torch.testing.assert_close(exact_attention(q, k, v).double(), expected, rtol=1e-5, atol=1e-6)


def test_causal_needs_no_more_queries_than_keys():
    with pytest.raises(ValueError, match="seq_len_q <= seq_len_k"):
        exact_attention(*random_qkv(6, 3, 2, 2), causal=True)


def test_heads_must_divide():
    with pytest.raises(ValueError, match=r"n_kv_heads \(3\) must divide n_heads \(4\)"):
        exact_attention(*random_qkv(2, 2, 4, 3))


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_heads_equal_repeated_heads(causal):
    """GQA is multi-head attention with each K/V head repeated for its group of query heads."""
    q, k, v = random_qkv(5, 11, 6, 2)
    repeated = [x.repeat_interleave(3, dim=2) for x in (k, v)]
    torch.testing.assert_close(exact_attention(q, k, v, causal=causal), exact_attention(q, *repeated, causal=causal))


def test_causal_first_row_is_first_value():
    q, k, v = (torch.randn(1, 9, 2, 128) for _ in range(3))
    torch.testing.assert_close(exact_attention(q, k, v, causal=True)[:, 0], v[:, 0])


def test_causal_is_aligned_bottom_right():
    """The last query sees every key, so it matches the unmasked attention; the first sees 1 + Lk - Lq keys."""
    q, k, v = random_qkv(3, 8, 2, 2, dtype=torch.float32)
    causal = exact_attention(q, k, v, causal=True)
    torch.testing.assert_close(causal[:, -1], exact_attention(q, k, v)[:, -1])
    torch.testing.assert_close(causal[:, :1], exact_attention(q[:, :1], k[:, :6], v[:, :6]))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES[2:], ids=[f"q{a}-k{b}-h{c}-kv{d}" for a, b, c, d in SHAPES[2:]])
def test_torch_attention_is_called_with_the_same_convention(shape, causal):
    """sdpa() asks torch for grouped heads and the bottom-right mask: on the CPU it matches the reference."""
    q, k, v = random_qkv(*shape, dtype=torch.float32)
    torch.testing.assert_close(sdpa(q, k, v, causal=causal), exact_attention(q, k, v, causal=causal))


def test_sdpa_available_says_no_instead_of_raising():
    q, k, _ = random_qkv(4, 9, 4, 2, dtype=torch.float32)
    assert sdpa_available(None, q, k, causal=True)
    assert not sdpa_available(SDPBackend.CUDNN_ATTENTION, q, k, causal=True)  # cuDNN has no CPU kernel


def visible_pairs(seq_len_q: int, seq_len_k: int, causal: bool) -> int:
    return sum(len(visible_keys(i, seq_len_q, seq_len_k, causal)) for i in range(seq_len_q))


@pytest.mark.parametrize(("seq_len_q", "seq_len_k"), [(8, 8), (3, 10), (1, 7), (77, 1000)])
def test_flops_count_both_products_over_the_visible_pairs(seq_len_q, seq_len_k):
    """Each visible (query, key) pair costs a dot product for S and a multiply-add row for P V: 2 · 2 · 128
    FLOPs. Causal counts the diagonal half, so it is exactly half of the full count on a square."""
    batch, heads, per_pair = 2, 3, 2 * 2 * 128
    full = attention_flops(batch, seq_len_q, heads, 128, seq_len_k=seq_len_k)
    causal = attention_flops(batch, seq_len_q, heads, 128, seq_len_k=seq_len_k, causal=True)
    assert full == batch * heads * per_pair * visible_pairs(seq_len_q, seq_len_k, causal=False)
    assert causal == batch * heads * per_pair * (visible_pairs(seq_len_q, seq_len_k, causal=True) - seq_len_q / 2)
    assert attention_flops(batch, seq_len_q, heads, 128) == attention_flops(
        batch, seq_len_q, heads, 128, seq_len_k=seq_len_q
    )
    if seq_len_q == seq_len_k:
        assert causal == full / 2


def test_attention_error():
    exact = torch.ones(2, 3)
    error = attention_error(exact + 0.5, exact)
    assert error.max_abs == pytest.approx(0.5) and error.rel_l2 == pytest.approx(0.5)
    nan_output = exact.clone()
    nan_output[1, 2] = math.nan
    assert attention_error(nan_output, exact).max_abs == math.inf


def test_tolerance_is_twice_torch_plus_a_floor():
    torch_error = AttentionError(max_abs=0.01, rel_l2=0.003)
    assert AttentionError(0.02, 0.006).within(torch_error)
    assert not AttentionError(0.02, 0.007).within(torch_error)
    assert not AttentionError(0.03, 0.004).within(torch_error)
    assert not AttentionError(math.inf, math.inf).within(torch_error)


def test_fa4_absent_is_named_not_raised(monkeypatch):
    """Without the flash-attn-4 package the reference says so in one sentence; calling it raises that sentence."""
    monkeypatch.setitem(sys.modules, "flash_attn.cute", None)  # an import of it now fails, installed or not
    reference.fa4_forward.cache_clear()
    try:
        q = torch.randn(1, 4, 2, 128, dtype=torch.bfloat16)
        why = reference.fa4_unavailable(q)
        assert why.startswith(f"{reference.FA4} is not installed") and "requirements-fa4.txt" in why
        with pytest.raises(RuntimeError, match="flash-attn-4 is not installed"):
            reference.fa4(q, q, q)
    finally:
        reference.fa4_forward.cache_clear()


def test_fa4_refuses_a_cpu_tensor_when_installed(monkeypatch):
    """With the package importable, inputs it cannot take are named rather than crashing inside it."""
    module = types.ModuleType("flash_attn.cute")
    module.flash_attn_func = lambda q, k, v, causal=False: (q, None)
    monkeypatch.setitem(sys.modules, "flash_attn.cute", module)
    reference.fa4_forward.cache_clear()
    try:
        q = torch.randn(1, 4, 2, 128, dtype=torch.bfloat16)
        assert "Hopper and Blackwell" in reference.fa4_unavailable(q)
        assert reference.fa4(q, q, q) is q  # the (out, lse) pair unwrapped
    finally:
        reference.fa4_forward.cache_clear()


def test_bytes_are_q_k_v_read_once_and_o_written_once():
    """The decode shape by hand: Q and O are 64 · 1 · 32 · 128 bf16 each; K and V 64 · 8192 · 8 · 128 each, read once
    per K/V head; causal or not, every key is read. A small shape: the bytes of the tensors themselves."""
    q_or_o, k_or_v = 64 * 1 * 32 * 128 * 2, 64 * 8192 * 8 * 128 * 2
    assert attention_bytes(64, 1, 32, 128, seq_len_k=8192, n_kv_heads=8, element_bytes=2) == 2 * q_or_o + 2 * k_or_v
    q, k, v = random_qkv(3, 10, 4, 2)
    by_tensors = 2 * q.nbytes + k.nbytes + v.nbytes
    assert attention_bytes(2, 3, 4, 128, seq_len_k=10, n_kv_heads=2, element_bytes=q.element_size()) == by_tensors
    assert attention_bytes(2, 3, 4, 128, element_bytes=4) == 4 * 2 * 3 * 4 * 128 * 4  # K/V as long and as many as Q
