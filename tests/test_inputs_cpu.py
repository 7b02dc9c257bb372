"""Bad input gets a clear TypeError/ValueError naming the problem, before anything is launched."""

import pytest
import torch

from kernels import check_inputs


def qkv(shape=(1, 8, 2, 128), dtype=torch.bfloat16):
    return [torch.randn(shape).to(dtype) for _ in range(3)]


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda q, k, v: ([1, 2], k, v), TypeError, "q must be a torch.Tensor"),
        (lambda q, k, v: (q.float(), k.float(), v.float()), TypeError, "torch.float32"),
        (lambda q, k, v: (q, k.half(), v), TypeError, "share one dtype"),
        (lambda q, k, v: (q[0], k[0], v[0]), ValueError, "4 dimensions"),
        (lambda q, k, v: (q, k[:, :4], v), ValueError, "same shape"),
        (lambda q, k, v: (q[..., :64], k[..., :64], v[..., :64]), ValueError, "head_dim must be 128, got 64"),
        (lambda q, k, v: (q[:, :0], k[:, :0], v[:, :0]), ValueError, "empty"),
        (lambda q, k, v: (q, k, v), ValueError, "q is on cpu"),
    ],
    ids=["not-a-tensor", "float32", "mixed-dtypes", "3d", "shape-mismatch", "head-dim-64", "empty", "cpu"],
)
def test_bad_input_raises_clear_error(chapter, change, error, message):
    with pytest.raises(error, match=message):
        chapter.attention(*change(*qkv()))


def test_too_many_heads_is_rejected():
    q = torch.empty(1, 1, 70000, 128, dtype=torch.float16)
    with pytest.raises(ValueError, match="at most 65535"):
        check_inputs(q, q, q)


def test_fp16_and_bf16_pass_the_structural_checks():
    for dtype in (torch.bfloat16, torch.float16):
        with pytest.raises(ValueError, match="on cpu"):  # everything but the device is right
            check_inputs(*qkv(dtype=dtype))
