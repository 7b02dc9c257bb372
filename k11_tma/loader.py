"""Chapter 11: K, V and Q tiles copied by the Tensor Memory Accelerator (TMA), one thread issuing each tile."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "TMA: one thread copies a whole tile, counted on an mbarrier"

BLOCK_Q, BLOCK_KV, HEAD_DIM, N_WARPS, STAGES, SMEM_ALIGN = 128, 128, 128, 8, 2, 1024
PLANE, N_BARRIERS = 64, 1 + STAGES  # a copy's box: 64 columns (128 bytes); mbarriers: Q's, one per stage
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    block_q=BLOCK_Q,
    n_threads=N_WARPS * 32,
    # Q, STAGES tiles each of K and V, the 8-byte mbarriers, and the slack the kernel may skip to start them
    # 1 KB aligned (the 128-byte swizzle of TMA and wgmma works in 1 KB atoms)
    smem_bytes=(BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * 2 + N_BARRIERS * 8 + SMEM_ALIGN,
    arch="sm_90a",  # wgmma and TMA exist on Hopper alone
    tensor_map_box=(BLOCK_KV, PLANE),  # q, k and v as tensor maps; one copy moves one plane of a tile
)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, out=None) -> torch.Tensor:
    """softmax(q kᵀ/√128) v on Hopper: q (batch, seq_len_q, n_heads, 128), k, v (batch, seq_len_k, n_kv_heads, 128)."""
    return KERNEL(q, k, v, causal=causal, out=out)
