"""The ladder as one torch operator, ``torch.ops.fa_ladder.attention``, and as an attention function for transformers.

A custom op is opaque to torch.compile: Dynamo traces it through its fake implementation (the output's shape,
nothing run), and the compiled graph calls the real one. The real one launches a chapter's kernel on torch's
current stream, so a CUDA graph captures it like any torch kernel.
"""

from __future__ import annotations

import functools
import math

import torch

from kernels.chapters import Chapter, chapters, select
from kernels.launch import HEAD_DIM, check_inputs, gpu_arch

SCALE = 1.0 / math.sqrt(HEAD_DIM)  # the one softmax scale the kernels apply


def fastest_chapter(arch: str, chapter_list: list[Chapter] | None = None) -> Chapter:
    """The highest-numbered chapter written for a GPU of architecture ``arch`` (e.g. "sm_90"): the fastest there."""
    for chapter in reversed(chapters() if chapter_list is None else chapter_list):
        if chapter.kernel.runs_on(arch):
            return chapter
    raise ValueError(f"no chapter runs on {arch}")


@functools.cache
def chapter_for(device_index: int, number: int | None = None) -> Chapter:
    """The chapter the op runs on one GPU: chapter ``number``, or by default the fastest written for that GPU."""
    if number is None:
        return fastest_chapter(gpu_arch(device_index))
    [chapter] = select(chapters(), str(number))
    return chapter


@torch.library.custom_op(
    "fa_ladder::attention",
    mutates_args=(),  # a new output, the inputs left alone: torch.compile may treat the op as a pure function
    schema="(Tensor q, Tensor k, Tensor v, bool causal=False, int? chapter=None) -> Tensor",
)
def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, chapter: int | None = None
) -> torch.Tensor:
    """softmax(q kᵀ / √128) v by one chapter: q (batch, seq_q, heads, 128), k and v (batch, seq_k, kv_heads, 128)."""
    q, k, v = check_inputs(q, k, v)  # a TypeError/ValueError naming the problem, before a GPU is asked anything
    return chapter_for(q.device.index, chapter).attention(q, k, v, causal=causal)


@attention.register_fake
def _attention_shape(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, chapter: int | None = None
) -> torch.Tensor:
    """What torch.compile traces with: an output shaped like q, contiguous as the kernels write it."""
    return q.new_empty(q.shape)


def transformers_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function interface: (batch, heads, seq, 128) in, (batch, seq, heads, 128) out.

    Anything the kernels do not compute (a padding mask, another scale, dropout, a sliding window, a soft cap)
    is refused with a ValueError rather than silently left out.
    """
    if attention_mask is not None:
        raise ValueError("fa_ladder attention takes no attention mask: pad-free batches only")
    if scaling is not None and not math.isclose(scaling, SCALE):
        raise ValueError(f"fa_ladder attention scales scores by 1/sqrt(128) = {SCALE:.6f}, got scaling={scaling}")
    if dropout:
        raise ValueError(f"fa_ladder attention has no dropout, got dropout={dropout}")
    for option in ("sliding_window", "softcap"):
        if kwargs.get(option) is not None:
            raise ValueError(f"fa_ladder attention has no {option}, got {option}={kwargs[option]}")
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    # Causal masks align bottom-right: a decoded token (one query) sees the whole cache, as it should.
    out = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), causal=causal)
    return out, None


def register_with_transformers(name: str = "fa_ladder") -> str:
    """Make ``attn_implementation=name`` run the ladder in Hugging Face transformers models; returns ``name``."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import flash_attention_mask

    AttentionInterface.register(name, transformers_attention)
    # The mask flash attention gets: None unless a token is padded, and then the padding mask, which is refused.
    # Without a mask function of its own, transformers would drop padding silently for an unknown name.
    AttentionMaskInterface.register(name, flash_attention_mask)
    return name
