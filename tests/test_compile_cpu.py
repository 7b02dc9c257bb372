"""torch.compile around a chapter's own attention without a GPU: the input checks speak as they do in eager mode."""

import pytest
import torch

from tests.helpers import CHAPTERS


def cpu_qkv() -> list[torch.Tensor]:
    return [torch.zeros(1, 64, 2, 128, dtype=torch.bfloat16) for _ in range(3)]


@pytest.mark.parametrize("chapter", [CHAPTERS[0], CHAPTERS[8], CHAPTERS[-1]], ids=lambda c: c.name)
def test_compiled_attention_on_cpu_tensors_raises_eagers_error(chapter):
    """Pointer (1, 9) and tensor-map (16) chapters alike: the ValueError that names the device, no Dynamo error."""
    with pytest.raises(ValueError) as eager:
        chapter.attention(*cpu_qkv(), causal=True)
    assert "q is on cpu" in str(eager.value)

    def around(q, k, v):
        return -chapter.attention(2 * q, k, v, causal=True)

    for compiled in (torch.compile(chapter.attention, backend="eager"), torch.compile(around, backend="eager")):
        torch._dynamo.reset()
        with pytest.raises(ValueError) as error:
            compiled(*cpu_qkv())
        assert type(error.value) is ValueError and str(error.value) == str(eager.value)
