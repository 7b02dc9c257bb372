"""Bad input gets a clear TypeError/ValueError naming the problem, before anything is launched."""

import pytest
import torch

from kernels import check_inputs


def qkv(shape=(1, 8, 2, 128), dtype=torch.bfloat16, kv_shape=None):
    q = torch.randn(shape).to(dtype)
    k, v = (torch.randn(kv_shape or shape).to(dtype) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda q, k, v: ([1, 2], k, v), TypeError, "q must be a torch.Tensor"),
        (lambda q, k, v: (q.float(), k.float(), v.float()), TypeError, "torch.float32"),
        (lambda q, k, v: (q, k.half(), v), TypeError, "share one dtype"),
        (lambda q, k, v: (q[0], k[0], v[0]), ValueError, "4 dimensions"),
        (lambda q, k, v: (q, k[:, :4], v), ValueError, r"k and v must have the same shape, got \(1, 4, 2, 128\)"),
        (lambda q, k, v: (q, k[:, :, :1], v), ValueError, "k and v must have the same shape"),
        (lambda q, k, v: (q, k.expand(3, -1, -1, -1), v.expand(3, -1, -1, -1)), ValueError, "same batch size"),
        (lambda q, k, v: (q[..., :64], k[..., :64], v[..., :64]), ValueError, "head_dim must be 128, got 64 in q"),
        (lambda q, k, v: (q, k[..., :64], v[..., :64]), ValueError, "head_dim must be 128, got 64 in k"),
        (lambda q, k, v: (q[:, :0], k[:, :0], v[:, :0]), ValueError, "empty"),
        (lambda q, k, v: (q, k[:, :0], v[:, :0]), ValueError, "empty"),
        (lambda q, k, v: (q, k, v), ValueError, "q is on cpu"),
    ],
    ids=[
        "not-a-tensor",
        "float32",
        "mixed-dtypes",
        "3d",
        "kv-length-mismatch",
        "kv-heads-mismatch",
        "batch-mismatch",
        "head-dim-64",
        "kv-head-dim-64",
        "empty",
        "empty-kv",
        "cpu",
    ],
)
def test_bad_input_raises_clear_error(chapter, change, error, message):
    with pytest.raises(error, match=message):
        chapter.attention(*change(*qkv()))


def test_kv_heads_must_divide_the_query_heads(chapter):
    with pytest.raises(ValueError, match=r"n_heads of q \(6\) must be a multiple of n_kv_heads of k and v \(4\)"):
        chapter.attention(*qkv((1, 8, 6, 128), kv_shape=(1, 8, 4, 128)))


def test_causal_needs_no_more_queries_than_keys(chapter):
    q, k, v = qkv((1, 9, 2, 128), kv_shape=(1, 8, 2, 128))
    with pytest.raises(ValueError, match="causal attention needs seq_len_q <= seq_len_k.*seq_len_q 9 and seq_len_k 8"):
        chapter.attention(q, k, v, causal=True)
    with pytest.raises(ValueError, match="on cpu"):  # without the mask any two lengths are fine
        chapter.attention(q, k, v)


@pytest.mark.parametrize(
    ("q_shape", "kv_shape"),
    [((2, 8, 16, 128), (2, 8, 8, 128)), ((2, 1, 16, 128), (2, 1000, 1, 128)), ((1, 77, 4, 128), (1, 1000, 2, 128))],
    ids=["gqa", "mqa-one-query", "ragged"],
)
def test_grouped_heads_and_longer_kv_pass_the_structural_checks(q_shape, kv_shape):
    with pytest.raises(ValueError, match="q is on cpu"):  # everything but the device is right
        check_inputs(*qkv(q_shape, kv_shape=kv_shape), causal=True)


def test_too_many_heads_is_rejected():
    q = torch.empty(1, 1, 70000, 128, dtype=torch.float16)
    with pytest.raises(ValueError, match="at most 65535"):
        check_inputs(q, q, q)


def test_fp16_and_bf16_pass_the_structural_checks():
    for dtype in (torch.bfloat16, torch.float16):
        with pytest.raises(ValueError, match="on cpu"):  # everything but the device is right
            check_inputs(*qkv(dtype=dtype))
