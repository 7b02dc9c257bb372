"""Chapter 13: wgmma descriptors made once before the loop, in the uniform registers wgmma reads."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "descriptors made once: wgmma operands in uniform registers"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma, TMA and setmaxnreg exist on Hopper alone
    tensor_maps=True,  # q, k and v as tensor maps; one copy moves one plane of a tile
)
