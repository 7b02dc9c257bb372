"""Ablation of chapter 3: kernel 2's per-lane fragment loads on kernel 4's swizzled layout."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "per-lane fragment loads, swizzled rows"

BLOCK_Q, BLOCK_KV, HEAD_DIM, N_WARPS = 64, 64, 128, 4
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    block_q=BLOCK_Q,
    n_threads=N_WARPS * 32,
    smem_bytes=(BLOCK_Q + 2 * BLOCK_KV) * HEAD_DIM * 2,  # Q, K and V tiles of 16-bit values
)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, out=None) -> torch.Tensor:
    """softmax(q kᵀ / √128) v: q (batch, seq_len_q, n_heads, 128), k, v (batch, seq_len_k, n_kv_heads, 128)."""
    return KERNEL(q, k, v, causal=causal, out=out)
