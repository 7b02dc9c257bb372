"""Ablation of chapter 5: kernel 5's two stages with kernel 4's block of 64 query rows and 4 warps."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "two stages, 64 query rows and 4 warps"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
