"""Chapter 5: pipelining, the next K/V tile's copy overlaps this tile's math."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "pipelining: two stages, the next tile copies under this tile's math"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
