"""Chapter 17: packed GQA, the query heads of one K/V head as the rows of one tile, on chapter 16's kernel."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "packed GQA: the query heads that share a K/V head are the rows of one tile, so K and V are read once per group"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma, TMA and setmaxnreg exist on Hopper alone
    tensor_maps=True,  # q, k and v as tensor maps; one copy moves one plane of a tile
    persistent=True,  # one block per SM; the batch size is the last argument
    packed_gqa=True,  # a Q tile is (positions, heads of one group): its map's box spans heads
)
