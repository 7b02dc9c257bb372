"""Chapter 1: Flash Attention 2 on tensor cores, naive about moving data."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "naive: synchronous copies, per-thread fragment loads"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
