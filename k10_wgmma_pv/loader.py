"""Chapter 10: O += P V on wgmma too, P from registers and V transposed by the hardware."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "P·V on wgmma: P from registers, V read transposed from shared memory"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma exists on Hopper alone
)
