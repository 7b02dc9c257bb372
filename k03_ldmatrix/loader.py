"""Chapter 3: mma fragments from shared memory with ldmatrix."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "ldmatrix: whole-warp fragment loads, V transposed on the way"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
