"""Chapter 14: the softmax of one tile under the tensor cores' product of the tile before."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "skewed loop: S of tile j issued with P V of tile j - 1, the softmax between their waits in the source"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma, TMA and setmaxnreg exist on Hopper alone
    tensor_maps=True,  # q, k and v as tensor maps; one copy moves one plane of a tile
)
