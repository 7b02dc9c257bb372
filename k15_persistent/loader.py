"""Chapter 15: a persistent grid, one block per SM working through the query tiles in pairs."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "persistent grid: a block per SM takes query tiles in pairs, the next Q loads during this one"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma, TMA and setmaxnreg exist on Hopper alone
    tensor_maps=True,  # q, k and v as tensor maps; one copy moves one plane of a tile
    persistent=True,  # one block per SM; the batch size is the last argument
)
