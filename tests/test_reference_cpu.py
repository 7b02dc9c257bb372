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


def loop_attention(q, k, v, causal):
    """Attention one query row at a time, in float64, straight from the definition."""
    batch, seq_len_q, heads, dim = q.shape
    seq_len_k, kv_heads = k.shape[1], k.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            kv_head = h // (heads // kv_heads)
            for i in range(seq_len_q):
                keys = visible_keys(i, seq_len_q, seq_len_k, causal)
                scores = torch.tensor([float(q[b, i, h].double() @ k[b, j, kv_head].double()) for j in keys])
                weights = torch.exp(scores / math.sqrt(dim) - (scores / math.sqrt(dim)).max())
                weights /= weights.sum()
                out[b, i, h] = (weights[:, None] * v[b, keys, kv_head].double()).sum(0)
    return out


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
    torch.testing.assert_close(exact.double(), loop_attention(q, k, v, causal), rtol=1e-5, atol=1e-6)


def test_more_queries_than_keys_without_a_mask():
    q, k, v = random_qkv(6, 3, 2, 2)
    torch.testing.assert_close(exact_attention(q, k, v).double(), loop_attention(q, k, v, False), rtol=1e-5, atol=1e-6)


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
