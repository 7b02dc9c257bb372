"""The exact reference is what every error is measured against, so it is checked against a plain loop."""

import math

import pytest
import torch

from reference import AttentionError, attention_error, attention_flops, exact_attention


def loop_attention(q, k, v, causal):
    """Attention one query row at a time, in float64, straight from the definition."""
    batch, seq_len, heads, dim = q.shape
    out = torch.zeros(q.shape, dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            for i in range(seq_len):
                keys = i + 1 if causal else seq_len
                scores = torch.tensor([float(q[b, i, h].double() @ k[b, j, h].double()) for j in range(keys)])
                weights = torch.exp(scores / math.sqrt(dim) - (scores / math.sqrt(dim)).max())
                weights /= weights.sum()
                out[b, i, h] = (weights[:, None] * v[b, :keys, h].double()).sum(0)
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_len", [1, 5, 17])
def test_exact_attention_matches_loop(seq_len, causal):
    generator = torch.Generator().manual_seed(seq_len)
    q, k, v = (torch.randn(2, seq_len, 3, 128, generator=generator).to(torch.bfloat16) for _ in range(3))
    exact = exact_attention(q, k, v, causal=causal)
    assert exact.dtype == torch.float32 and exact.shape == q.shape
    torch.testing.assert_close(exact.double(), loop_attention(q, k, v, causal), rtol=1e-5, atol=1e-6)


def test_causal_first_row_is_first_value():
    q, k, v = (torch.randn(1, 9, 2, 128) for _ in range(3))
    torch.testing.assert_close(exact_attention(q, k, v, causal=True)[:, 0], v[:, 0])


def test_flops():
    assert attention_flops(16, 4096, 16, 128) == 4 * 16 * 16 * 4096**2 * 128
    assert attention_flops(16, 4096, 16, 128, causal=True) == attention_flops(16, 4096, 16, 128) / 2


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
