"""torch.compile around a chapter's own attention (not the op): the launch is a graph break, the output eager's."""

import pytest
import torch

from kernels.launch import gpu_arch
from tests.helpers import requires_gpu
from tests.test_kernels_gpu import random_qkv

pytestmark = requires_gpu


@pytest.fixture(autouse=True)
def chapter_runs_on_this_gpu(chapter):
    """A chapter written for another GPU (wgmma: Hopper only) is skipped, naming why. Dynamo starts afresh for
    each test, so that no chapter meets the limit on recompiling one function (the test's own, per chapter)."""
    try:
        chapter.kernel.build_arch(gpu_arch(0))
    except ValueError as error:
        pytest.skip(str(error))
    torch._dynamo.reset()


def gqa_inputs(causal: bool) -> list[torch.Tensor]:
    """Random bf16: two query heads per K/V head, more keys than queries, lengths that end mid-tile."""
    return random_qkv(2, 300, 4, torch.bfloat16, seed=1 + causal, seq_len_k=333, kv_heads=2)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_compiled_attention_equals_eager(chapter, causal):
    q, k, v = gqa_inputs(causal)
    expected = chapter.attention(q, k, v, causal=causal)
    compiled = torch.compile(chapter.attention)
    assert torch.equal(compiled(q, k, v, causal=causal), expected)
    out = torch.full_like(q, torch.nan)
    assert compiled(q, k, v, causal=causal, out=out) is out  # written in place, as eager writes it
    assert torch.equal(out, expected)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_compiled_code_around_attention_equals_eager(chapter, causal):
    """torch's work before and after the launch compiles into graphs of their own; the launch runs between them."""

    def around(q, k, v):
        return -chapter.attention(2 * q, k, v, causal=causal)  # exact in bf16: compiled and eager agree bit for bit

    q, k, v = gqa_inputs(causal)
    assert torch.equal(torch.compile(around)(q, k, v), around(q, k, v))
