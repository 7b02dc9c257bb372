"""What the ladder is measured against: torch's attention (SDPA backends) and an exact attention.

Everything here takes the chapters' layout: q (batch, seq_len_q, n_heads, head_dim), k and v (batch,
seq_len_k, n_kv_heads, head_dim) with n_kv_heads dividing n_heads. Causal attention is aligned bottom-right
(query i sees keys j <= i + seq_len_k - seq_len_q), as with queries against a KV cache.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# Torch's SDPA backends shown on the ladder; the first is the reference the percentages are of.
SDPA_BACKENDS: dict[str, SDPBackend | None] = {
    "torch FA2": SDPBackend.FLASH_ATTENTION,
    "torch cuDNN": SDPBackend.CUDNN_ATTENTION,
    "torch default": None,
}
REFERENCE = "torch FA2"
# FlashAttention-4 (the flash-attn-4 package, CuTe DSL), shown beside them where it imports: requirements-fa4.txt.
FA4 = "flash-attn-4"
# Above this many score elements per head the exact reference drops from float64 to float32.
FLOAT64_LIMIT = 8192 * 8192


def sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, backend: SDPBackend | None = None
) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention in our layout, on one backend or torch's choice.

    Fewer K/V heads go through torch's own GQA (enable_gqa). torch's is_causal=True is aligned top-left, so
    causal with two different lengths takes a lower-right causal mask, which torch dispatches itself.
    """
    options: dict[str, object] = {"enable_gqa": k.shape[2] != q.shape[2]}
    if causal and q.shape[1] != k.shape[1]:
        # Imported here: torch.nn.attention.bias brings in torch's compiler, seconds at start-up for every command.
        from torch.nn.attention.bias import causal_lower_right

        options["attn_mask"] = causal_lower_right(q.shape[1], k.shape[1])
    else:
        options["is_causal"] = causal
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # views: SDPA wants (batch, heads, seq, dim)
    if backend is None:
        out = F.scaled_dot_product_attention(q, k, v, **options)
    else:
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, **options)
    return out.transpose(1, 2)


def sdpa_function(backend: SDPBackend | None) -> Callable[..., torch.Tensor]:
    """``attention(q, k, v, *, causal)`` through one SDPA backend, shaped like a chapter's."""

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False) -> torch.Tensor:
        return sdpa(q, k, v, causal=causal, backend=backend)

    return attention


def sdpa_available(backend: SDPBackend | None, q: torch.Tensor, k: torch.Tensor | None = None, *, causal: bool) -> bool:
    """Whether this backend runs on inputs like q and k (each backend has its own dtype, arch and GQA limits).

    Tried on a slice of at most 16 queries that keeps the heads and the difference of the two lengths.
    """
    k = q if k is None else k
    rows_q = min(q.shape[1], 16)
    rows_k = max(1, rows_q + k.shape[1] - q.shape[1])
    try:
        sdpa(q[:1, :rows_q], k[:1, :rows_k], k[:1, :rows_k], causal=causal, backend=backend)
        return True
    except (RuntimeError, ValueError):
        return False


@functools.cache
def fa4_forward() -> Callable[..., object] | str:
    """flash-attn-4's ``flash_attn_func``, or a sentence saying why it cannot be used here."""
    try:
        from flash_attn.cute import flash_attn_func
    except Exception as error:  # absent, or present without the CuTe DSL it compiles with
        return f"{FA4} is not installed ({type(error).__name__}: {error}); pip install -r requirements-fa4.txt"
    return flash_attn_func


def fa4_version() -> str | None:
    """The installed flash-attn-4's version, for the record of a run; None where it does not import."""
    if isinstance(fa4_forward(), str):
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("flash-attn-4")
    except PackageNotFoundError:  # importable from a folder on the path rather than installed
        return "unknown"


def fa4(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False) -> torch.Tensor:
    """FlashAttention-4's forward in our layout, which is its own: grouped heads and bottom-right causal included.

    Each new shape, dtype or causal flag compiles a kernel first (CuTe DSL, seconds): warm it up before timing.
    """
    forward = fa4_forward()
    if isinstance(forward, str):
        raise RuntimeError(forward)
    out = forward(q, k, v, causal=causal)
    return out[0] if isinstance(out, tuple) else out  # (out, lse) in the versions that return both


def fa4_unavailable(q: torch.Tensor) -> str | None:
    """Why FlashAttention-4 cannot run on inputs like q, or None where it can (Hopper and Blackwell, 16-bit)."""
    forward = fa4_forward()
    if isinstance(forward, str):
        return forward
    if q.device.type != "cuda" or torch.cuda.get_device_capability(q.device)[0] not in (9, 10):
        return f"{FA4} runs on Hopper and Blackwell GPUs (sm_90, sm_100) only"
    if q.dtype not in (torch.bfloat16, torch.float16):
        return f"{FA4} takes bf16 or fp16, got {q.dtype}"
    return None


def kv_group_size(n_heads: int, n_kv_heads: int) -> int:
    """How many query heads share one K/V head; a ValueError where n_kv_heads does not divide n_heads."""
    if n_kv_heads < 1 or n_heads % n_kv_heads != 0:
        raise ValueError(f"n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads})")
    return n_heads // n_kv_heads


def causal_mask(seq_len_q: int, seq_len_k: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """(seq_len_q, seq_len_k), True where query i may not see key j: j > i + seq_len_k - seq_len_q."""
    if seq_len_q > seq_len_k:
        raise ValueError(f"causal attention needs seq_len_q <= seq_len_k, got {seq_len_q} and {seq_len_k}")
    return torch.ones(seq_len_q, seq_len_k, dtype=torch.bool, device=device).triu(1 + seq_len_k - seq_len_q)


def exact_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
    seq_lens_k: torch.Tensor | Sequence[int] | None = None,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention computed in float64 (float32 for very long sequences), a few heads at a time.

    Query head h reads K/V head h // (n_heads // n_kv_heads); scores are scaled by ``scale`` (1/√head_dim by
    default). With ``seq_lens_k`` (one length per sequence, each in [0, seq_len_k]) sequence b sees only the first
    seq_lens_k[b] keys of a padded cache, whatever the rest holds; causal masks then align bottom-right on that
    length, and a query that sees no key gets output 0 and log-sum-exp -inf. Returns float32 in our layout, and
    with ``return_lse`` also the natural log of each row's softmax denominator, float32 (batch, n_heads, seq_len_q).
    This is the ground truth every error on the ladder is measured against.
    """
    batch, seq_len_q, n_heads, head_dim = q.shape
    seq_len_k = k.shape[1]
    group = kv_group_size(n_heads, k.shape[2])
    scores_per_head = seq_len_q * seq_len_k
    precision = torch.float64 if scores_per_head <= FLOAT64_LIMIT else torch.float32
    # Bound the (heads, seq_len_q, seq_len_k) score tensor to about 1 GiB.
    heads_per_step = max(1, (1 << 30) // (scores_per_head * (8 if precision == torch.float64 else 4)))
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.empty(batch, n_heads, seq_len_q, dtype=torch.float32, device=q.device)
    if seq_lens_k is None:
        lengths = [seq_len_k] * batch
        if causal and seq_len_q > seq_len_k:
            raise ValueError(f"causal attention needs seq_len_q <= seq_len_k, got {seq_len_q} and {seq_len_k}")
    else:
        lengths = [int(n) for n in (seq_lens_k.tolist() if isinstance(seq_lens_k, torch.Tensor) else seq_lens_k)]
        if len(lengths) != batch or not all(0 <= n <= seq_len_k for n in lengths):
            raise ValueError(f"seq_lens_k must hold {batch} lengths in [0, {seq_len_k}], got {lengths}")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    masks: dict[int, torch.Tensor] = {}  # causal, by length: True where query i may not see key j
    for b, length in enumerate(lengths):
        if causal and length not in masks:
            # j > i + length - seq_len_q, for any length (below seq_len_q the first rows see no key).
            ones = torch.ones(seq_len_q, length, dtype=torch.bool, device=q.device)
            masks[length] = ones.triu(1 + length - seq_len_q)
        mask = masks.get(length)
        for h0 in range(0, n_heads, heads_per_step):
            heads = torch.arange(h0, min(h0 + heads_per_step, n_heads), device=q.device)
            qh = q[b][:, heads].transpose(0, 1).to(precision)
            # Only the first ``length`` keys and values are read: the cache's padding may hold anything, NaN included.
            kh, vh = (x[b, :length][:, heads // group].transpose(0, 1).to(precision) for x in (k, v))
            scores = (qh @ kh.transpose(1, 2)) * scale
            if mask is not None:
                scores.masked_fill_(mask, -math.inf)
            row_lse = torch.logsumexp(scores, dim=-1)  # -inf for a row that sees no key
            # exp(score - lse) is softmax; a row with no key (-inf - -inf is NaN) gets all-zero weights, so output 0.
            weights = torch.exp(scores - row_lse[..., None]).masked_fill_(row_lse[..., None].isneginf(), 0.0)
            out[b][:, heads] = (weights @ vh).transpose(0, 1).float()
            lse[b, heads] = row_lse.float()
    return (out, lse) if return_lse else out


@dataclass(frozen=True)
class AttentionError:
    """How far an output is from the exact attention."""

    max_abs: float
    rel_l2: float

    def within(self, baseline: AttentionError) -> bool:
        """No worse than twice the baseline's error (torch's own attention), plus a small floor."""
        return self.rel_l2 <= 2 * baseline.rel_l2 + 1e-4 and self.max_abs <= 2 * baseline.max_abs + 1e-3


def attention_error(out: torch.Tensor, exact: torch.Tensor) -> AttentionError:
    """Max absolute and relative L2 error; NaN anywhere in ``out`` makes both infinite."""
    out = out.float()
    if not torch.isfinite(out).all():
        return AttentionError(math.inf, math.inf)
    diff = out - exact
    return AttentionError(diff.abs().max().item(), (diff.norm() / exact.norm()).item())


def attention_flops(
    batch: int, seq_len_q: int, n_heads: int, head_dim: int, *, seq_len_k: int | None = None, causal: bool = False
) -> float:
    """Matrix FLOPs of the forward pass: S = Q Kᵀ and O = P V, each 2·head_dim per (query, key) pair.

    Causal counts Lq·Lk − Lq²/2 pairs: those below the bottom-right diagonal, the diagonal itself counted
    half (so a square is the usual half). seq_len_k defaults to seq_len_q.
    """
    seq_len_k = seq_len_q if seq_len_k is None else seq_len_k
    pairs = seq_len_q * seq_len_k - (seq_len_q * seq_len_q / 2 if causal else 0)
    return 4.0 * batch * n_heads * head_dim * pairs


def attention_bytes(
    batch: int,
    seq_len_q: int,
    n_heads: int,
    head_dim: int,
    *,
    seq_len_k: int | None = None,
    n_kv_heads: int | None = None,
    element_bytes: int,
) -> float:
    """The fewest bytes the forward pass must move through DRAM: Q read once, K and V read once, O written once.

    With grouped heads K and V are read once per K/V head, not once per query head: the query heads that share a
    K/V head need its rows only once between them. Causal masking (bottom-right) saves none of it, since the last
    query sees every key. seq_len_k defaults to seq_len_q, n_kv_heads to n_heads; element_bytes is 2 for bf16/fp16.
    """
    seq_len_k = seq_len_q if seq_len_k is None else seq_len_k
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    q_and_o = 2 * batch * seq_len_q * n_heads * head_dim
    k_and_v = 2 * batch * seq_len_k * n_kv_heads * head_dim
    return float((q_and_o + k_and_v) * element_bytes)
