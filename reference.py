"""What the ladder is measured against: torch's attention (SDPA backends) and an exact attention.

Everything here takes the chapters' layout, (batch, seq_len, n_heads, head_dim).
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
# Above this many score elements per head the exact reference drops from float64 to float32.
FLOAT64_LIMIT = 8192 * 8192


def sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, backend: SDPBackend | None = None
) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention in our layout, on one backend or torch's choice."""
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # views: SDPA wants (batch, heads, seq, dim)
    if backend is None:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    else:
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return out.transpose(1, 2)


def sdpa_function(backend: SDPBackend | None) -> Callable[..., torch.Tensor]:
    """``attention(q, k, v, *, causal)`` through one SDPA backend, shaped like a chapter's."""

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False) -> torch.Tensor:
        return sdpa(q, k, v, causal=causal, backend=backend)

    return attention


def sdpa_available(backend: SDPBackend | None, q: torch.Tensor, *, causal: bool) -> bool:
    """Whether this backend runs on these inputs (each backend has its own dtype/arch limits)."""
    try:
        sdpa(q[:1, :16], q[:1, :16], q[:1, :16], causal=causal, backend=backend)
        return True
    except RuntimeError:
        return False


def exact_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False) -> torch.Tensor:
    """Attention computed in float64 (float32 for very long sequences), a few heads at a time.

    Returns float32 in our layout. This is the ground truth every error on the ladder is measured against.
    """
    batch, seq_len, n_heads, head_dim = q.shape
    precision = torch.float64 if seq_len * seq_len <= FLOAT64_LIMIT else torch.float32
    # Bound the (heads, seq, seq) score tensor to about 1 GiB.
    heads_per_step = max(1, (1 << 30) // (seq_len * seq_len * (8 if precision == torch.float64 else 4)))
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    mask = None
    if causal:
        mask = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
    scale = 1.0 / math.sqrt(head_dim)
    for b in range(batch):
        for h0 in range(0, n_heads, heads_per_step):
            heads = slice(h0, h0 + heads_per_step)
            qh, kh, vh = (x[b, :, heads].transpose(0, 1).to(precision) for x in (q, k, v))
            scores = (qh @ kh.transpose(1, 2)) * scale
            if mask is not None:
                scores.masked_fill_(mask, -math.inf)
            out[b, :, heads] = (torch.softmax(scores, dim=-1) @ vh).transpose(0, 1).float()
    return out


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


def attention_flops(batch: int, seq_len: int, n_heads: int, head_dim: int, *, causal: bool = False) -> float:
    """Matrix FLOPs of the forward pass: two products of 2·S·S·D each per head; causal does half."""
    flops = 4.0 * batch * n_heads * seq_len * seq_len * head_dim
    return flops / 2 if causal else flops
