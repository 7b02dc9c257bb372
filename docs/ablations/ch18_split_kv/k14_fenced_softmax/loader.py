"""Ablation of chapter 18: kernel 14 with a fence that keeps its softmax between the two waits."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "kernel 14 with the softmax kept between the waits by a fence"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma, TMA and setmaxnreg exist on Hopper alone
    tensor_maps=True,  # q, k and v as tensor maps; one copy moves one plane of a tile
)
