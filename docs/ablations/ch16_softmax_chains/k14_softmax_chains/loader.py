"""Ablation of chapter 16: kernel 14 with kernel 16's softmax chains, one block per query tile."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "kernel 14 with kernel 16's softmax chains: one block per query tile"

BLOCK_Q, BLOCK_KV, HEAD_DIM, N_WARPS, STAGES, SMEM_ALIGN = 128, 128, 128, 8, 2, 1024
PRODUCER_WARPS = 4  # one warpgroup copies; the N_WARPS compute
PLANE, N_BARRIERS = 64, 1 + 4 * STAGES  # a copy's box: 64 columns (128 bytes); mbarriers: Q's; K's, V's filled, free
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    block_q=BLOCK_Q,
    n_threads=(N_WARPS + PRODUCER_WARPS) * 32,
    # Q, STAGES tiles each of K and V, the 8-byte mbarriers, and the slack the kernel may skip to start them
    # 1 KB aligned (the 128-byte swizzle of TMA and wgmma works in 1 KB atoms)
    smem_bytes=(BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * 2 + N_BARRIERS * 8 + SMEM_ALIGN,
    arch="sm_90a",  # wgmma, TMA and setmaxnreg exist on Hopper alone
    tensor_map_box=(BLOCK_KV, PLANE),  # q, k and v as tensor maps; one copy moves one plane of a tile
)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, out=None) -> torch.Tensor:
    """softmax(q kᵀ/√128) v on Hopper: q (batch, seq_len_q, n_heads, 128), k, v (batch, seq_len_k, n_kv_heads, 128)."""
    return KERNEL(q, k, v, causal=causal, out=out)
