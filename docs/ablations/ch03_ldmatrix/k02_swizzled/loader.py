"""Ablation of chapter 3: kernel 2's per-lane fragment loads on kernel 4's swizzled layout."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "per-lane fragment loads, swizzled rows"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
