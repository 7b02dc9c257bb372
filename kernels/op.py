"""The ladder as torch operators, ``torch.ops.fa_ladder.attention`` and ``attention_with_lse``, and as an attention
function for transformers.

Both operators take a softmax scale and, for a KV cache, per-sequence key lengths (``seq_lens_k``: sequence b sees
the first seq_lens_k[b] keys of a padded cache); ``attention_with_lse`` also returns the log-sum-exp of each row.
A custom op has one return type, hence two operators.

A custom op is opaque to torch.compile: Dynamo traces it through its fake implementation (the output's shape,
nothing run), and the compiled graph calls the real one. The real one launches a chapter's kernel on torch's
current stream, so a CUDA graph captures it like any torch kernel.
"""

from __future__ import annotations

import functools

import torch

from kernels.chapters import Chapter, chapters, select
from kernels.launch import check_inputs, check_scale, gpu_arch

KV_CACHE_FEATURES = "per-sequence KV lengths or the log-sum-exp"
# The arguments of both operators; a chapter's kernel reads them as chapter.attention's keyword arguments do.
OPTIONS = "bool causal=False, float? scale=None, Tensor? seq_lens_k=None, int? chapter=None"


def fastest_chapter(arch: str, chapter_list: list[Chapter] | None = None, *, kv_cache: bool = False) -> Chapter:
    """The highest-numbered chapter written for a GPU of architecture ``arch`` (e.g. "sm_90"): the fastest there.

    With ``kv_cache``, the highest-numbered that also takes per-sequence KV lengths and returns the log-sum-exp.
    """
    for chapter in reversed(chapters() if chapter_list is None else chapter_list):
        if chapter.kernel.runs_on(arch) and (not kv_cache or chapter.kernel.kv_cache):
            return chapter
    raise ValueError(f"no chapter runs on {arch}" + (f" with {KV_CACHE_FEATURES}" if kv_cache else ""))


@functools.cache
def chapter_for(device_index: int, number: int | None = None, *, kv_cache: bool = False) -> Chapter:
    """The chapter the op runs on one GPU: chapter ``number``, or by default the fastest written for that GPU (with
    ``kv_cache``: the fastest that takes KV lengths and returns the log-sum-exp)."""
    if number is None:
        return fastest_chapter(gpu_arch(device_index), kv_cache=kv_cache)
    [chapter] = select(chapters(), str(number))
    return chapter


def _run(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    scale: float | None,
    seq_lens_k: torch.Tensor | None,
    chapter: int | None,
    return_lse: bool,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Check what can be checked without the GPU, pick the chapter, launch it.

    The chapter checks the lengths itself (``check_seq_lens_k``: their values are read back, one synchronisation,
    except while a CUDA graph is captured); a chapter asked for by number that has no KV lengths or log-sum-exp
    raises a ValueError naming it.
    """
    q, k, v = check_inputs(q, k, v, causal=causal)  # a TypeError/ValueError naming the problem, before the GPU
    scale = check_scale(scale)
    kv_cache = seq_lens_k is not None or return_lse
    kernel = chapter_for(q.device.index, chapter, kv_cache=kv_cache).attention
    return kernel(q, k, v, causal=causal, scale=scale, seq_lens_k=seq_lens_k, return_lse=return_lse)


@torch.library.custom_op(
    "fa_ladder::attention",
    mutates_args=(),  # a new output, the inputs left alone: torch.compile may treat the op as a pure function
    schema=f"(Tensor q, Tensor k, Tensor v, {OPTIONS}) -> Tensor",
)
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    seq_lens_k: torch.Tensor | None = None,
    chapter: int | None = None,
) -> torch.Tensor:
    """softmax(scale · q kᵀ) v by one chapter: q (batch, seq_q, heads, 128), k and v (batch, seq_k, kv_heads, 128).

    ``scale`` defaults to 1/√128; ``seq_lens_k`` (int32, (batch,)) limits sequence b to its first seq_lens_k[b] keys.
    """
    return _run(q, k, v, causal, scale, seq_lens_k, chapter, return_lse=False)


@attention.register_fake
def _attention_shape(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    seq_lens_k: torch.Tensor | None = None,
    chapter: int | None = None,
) -> torch.Tensor:
    """What torch.compile traces with: an output shaped like q, contiguous as the kernels write it."""
    return q.new_empty(q.shape)


@torch.library.custom_op(
    "fa_ladder::attention_with_lse",
    mutates_args=(),
    schema=f"(Tensor q, Tensor k, Tensor v, {OPTIONS}) -> (Tensor, Tensor)",
)
def attention_with_lse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    seq_lens_k: torch.Tensor | None = None,
    chapter: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """As ``attention``, and the log-sum-exp: the natural log of each row's softmax denominator of the scaled scores,
    float32 (batch, heads, seq_q), -inf for a row that sees no key (FlashAttention-2's softmax_lse)."""
    return _run(q, k, v, causal, scale, seq_lens_k, chapter, return_lse=True)


@attention_with_lse.register_fake
def _attention_with_lse_shapes(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    seq_lens_k: torch.Tensor | None = None,
    chapter: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The output shaped like q, and the log-sum-exp: float32 (batch, heads, seq_q), contiguous."""
    batch, seq_len_q, n_heads, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((batch, n_heads, seq_len_q), dtype=torch.float32)


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

    ``scaling`` is the op's softmax scale (None: 1/√128). Anything the kernels do not compute (a padding mask,
    dropout, a sliding window, a soft cap) is refused with a ValueError rather than silently left out.
    """
    if attention_mask is not None:
        raise ValueError("fa_ladder attention takes no attention mask: pad-free batches only")
    if dropout:
        raise ValueError(f"fa_ladder attention has no dropout, got dropout={dropout}")
    for option in ("sliding_window", "softcap"):
        if kwargs.get(option) is not None:
            raise ValueError(f"fa_ladder attention has no {option}, got {option}={kwargs[option]}")
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    # Causal masks align bottom-right: a decoded token (one query) sees the whole cache, as it should.
    q, k, v = (x.transpose(1, 2) for x in (query, key, value))
    out = attention(q, k, v, causal=causal, scale=scaling)
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
