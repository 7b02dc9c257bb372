"""Ablation of chapter 7: kernel 6's addressing with kernel 8's 128-key tiles."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "kernel 6's full-swizzle addressing, 128-key tiles"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
