"""Chapter 11: K, V and Q tiles copied by the Tensor Memory Accelerator (TMA), one thread issuing each tile."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "TMA: one thread copies a whole tile, counted on an mbarrier"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma and TMA exist on Hopper alone
    tensor_maps=True,  # q, k and v as tensor maps; one copy moves one plane of a tile
)
