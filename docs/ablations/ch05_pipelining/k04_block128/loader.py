"""Ablation of chapter 5: kernel 4's single stage with kernel 5's block of 128 query rows and 8 warps."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "one stage, 128 query rows and 8 warps"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
