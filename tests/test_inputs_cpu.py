"""Bad input gets a clear TypeError/ValueError naming the problem, before anything is launched."""

import pytest
import torch

from kernels import check_inputs
from kernels.launch import check_scale, check_seq_lens_k


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


def lengths_for(q_shape=(3, 2, 4, 128), kv_shape=(3, 9, 2, 128)):
    """q and k of three sequences with a padded cache of 9 keys, on the CPU (the checks hold on any one device)."""
    return torch.zeros(q_shape, dtype=torch.bfloat16), torch.zeros(kv_shape, dtype=torch.bfloat16)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths", [[0, 9, 3], [1, 1, 1], [9, 9, 9]], ids=["empty-full-some", "ones", "full"])
def test_lengths_from_zero_to_the_cache_pass(lengths, causal):
    """Any length in [0, seq_len_k] is taken, causal or not: fewer keys than queries leaves the first rows none."""
    q, k = lengths_for()
    seq_lens_k = torch.tensor(lengths, dtype=torch.int32)
    assert check_seq_lens_k(seq_lens_k, q, k, causal=causal) is seq_lens_k
    assert check_seq_lens_k(None, q, k, causal=causal) is None


def test_strided_lengths_come_back_contiguous():
    """The kernels read length b at offset b: every other element of a longer tensor is copied first."""
    q, k = lengths_for()
    strided = torch.tensor([1, 0, 2, 0, 3, 0], dtype=torch.int32)[::2]
    checked = check_seq_lens_k(strided, q, k)
    assert checked.is_contiguous() and checked.tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("seq_lens_k", "error", "message"),
    [
        ([2, 3, 4], TypeError, "seq_lens_k must be a torch.Tensor of int32 lengths, got list"),
        (torch.tensor([2, 3, 4]), TypeError, "seq_lens_k has dtype torch.int64; the lengths must be torch.int32"),
        (torch.tensor([2.0, 3, 4]), TypeError, "dtype torch.float32"),
        (torch.tensor([2, 3], dtype=torch.int32), ValueError, r"shape \(batch,\) = \(3,\).*got \(2,\)"),
        (torch.tensor([[2, 3, 4]], dtype=torch.int32), ValueError, r"got \(1, 3\)"),
        (torch.tensor(3, dtype=torch.int32), ValueError, r"got \(\)"),
        (torch.zeros(3, dtype=torch.int32, device="meta"), ValueError, "seq_lens_k is on meta; it must be on q's"),
        (torch.tensor([2, -1, 4], dtype=torch.int32), ValueError, "must not be negative, got a length of -1"),
        (torch.tensor([2, 10, 4], dtype=torch.int32), ValueError, r"at most seq_len_k = 9 .*got 10"),
    ],
    ids=["list", "int64", "float", "too-few", "2d", "scalar", "other-device", "negative", "past-the-cache"],
)
def test_bad_lengths_raise_clear_error(seq_lens_k, error, message):
    q, k = lengths_for()
    with pytest.raises(error, match=message):
        check_seq_lens_k(seq_lens_k, q, k, causal=False)


def test_lengths_are_not_read_while_a_cuda_graph_is_captured(monkeypatch):
    """Under capture reading a value back is not allowed: the structure is checked, the values are left alone."""
    q, k = (x.to("meta") for x in lengths_for())
    past_the_cache = torch.full((3,), 99, dtype=torch.int32, device="meta")  # meta: .tolist() would raise
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda tensor: True))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert check_seq_lens_k(past_the_cache, q, k) is past_the_cache
    with pytest.raises(TypeError, match="int32"):
        check_seq_lens_k(past_the_cache.long(), q, k)


@pytest.mark.parametrize("scale", [0.05, 1, 2**-0.5, None])
def test_a_finite_positive_scale_passes(scale):
    expected = 1 / 128**0.5 if scale is None else float(scale)
    assert check_scale(scale) == pytest.approx(expected) and type(check_scale(scale)) is float


@pytest.mark.parametrize(
    ("scale", "error", "message"),
    [
        (0.0, ValueError, "finite and above zero, got 0.0"),
        (-0.1, ValueError, "got -0.1"),
        (float("nan"), ValueError, "got nan"),
        (float("inf"), ValueError, "got inf"),
        (True, TypeError, "scale must be a Python float, got bool"),
        (torch.tensor(0.1), TypeError, "got Tensor"),
        ("0.1", TypeError, "got str"),
    ],
)
def test_bad_scale_raises_clear_error(scale, error, message):
    with pytest.raises(error, match=message):
        check_scale(scale)
