"""Ablation of chapter 3: kernel 2's per-lane fragment loads on rows padded to 272 bytes."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "per-lane fragment loads, padded rows"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
