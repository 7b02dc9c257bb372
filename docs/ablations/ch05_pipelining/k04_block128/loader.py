"""Ablation of chapter 5: kernel 4's single stage with kernel 5's block of 128 query rows and 8 warps."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "one stage, 128 query rows and 8 warps"

BLOCK_Q, BLOCK_KV, HEAD_DIM, N_WARPS = 128, 64, 128, 8
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    block_q=BLOCK_Q,
    n_threads=N_WARPS * 32,
    smem_bytes=(BLOCK_Q + 2 * BLOCK_KV) * HEAD_DIM * 2,  # Q, K and V tiles of 16-bit values
)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, out=None) -> torch.Tensor:
    """softmax(q kᵀ / √128) v: q (batch, seq_len_q, n_heads, 128), k, v (batch, seq_len_k, n_kv_heads, 128)."""
    return KERNEL(q, k, v, causal=causal, out=out)
