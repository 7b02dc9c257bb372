"""Chapter 16: the softmax's row max and row sum as eight independent chains, on chapter 15's persistent grid."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "softmax chains: each row's max and sum over a tile in eight independent chains instead of one"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma, TMA and setmaxnreg exist on Hopper alone
    tensor_maps=True,  # q, k and v as tensor maps; one copy moves one plane of a tile
    persistent=True,  # one block per SM; the batch size is the last argument
)
