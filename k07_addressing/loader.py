"""Chapter 7: swizzled fragment addresses for the price of one XOR."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "addressing: one XOR per fragment block instead of the full swizzle"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
