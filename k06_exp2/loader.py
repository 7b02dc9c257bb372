"""Chapter 6: the softmax in base 2, its scale folded into one FMA."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "exp2: the softmax scale folded into one FFMA before MUFU.EX2"

BLOCK_Q, BLOCK_KV, HEAD_DIM, N_WARPS, STAGES = 128, 64, 128, 8, 2
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    block_q=BLOCK_Q,
    n_threads=N_WARPS * 32,
    smem_bytes=(BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * 2,  # Q, and STAGES tiles each of K and V
)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, out=None) -> torch.Tensor:
    """softmax(q kᵀ / √128) v: q (batch, seq_len_q, n_heads, 128), k, v (batch, seq_len_k, n_kv_heads, 128)."""
    return KERNEL(q, k, v, causal=causal, out=out)
