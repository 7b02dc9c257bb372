"""Chapter 4: a swizzled shared-memory layout, free of bank conflicts."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "swizzle: an XOR layout free of shared-memory bank conflicts"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
