"""Chapter 2: asynchronous global -> shared copies with cp.async."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "cp.async: copies that skip the registers, V overlaps the softmax"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
