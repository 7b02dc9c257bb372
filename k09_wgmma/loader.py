"""Chapter 9: S = Q·Kᵀ on Hopper's warpgroup matrix multiply (wgmma), both operands read from shared memory."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "S = Q·Kᵀ on wgmma: Hopper's tensor-core instruction, operands straight from shared memory"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma exists on Hopper alone
)
