"""Ablation of chapter 19: kernel 18 with the three trims and one addition per wgmma descriptor."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "kernel 18 with the three trims and one addition per wgmma descriptor"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma, TMA and setmaxnreg exist on Hopper alone
    tensor_maps=True,  # q, k and v as tensor maps; one copy moves one plane of a tile
    persistent=True,  # one block per SM; the batch size is the last argument
    packed_gqa=True,  # a Q tile is (positions, heads of one group): its map's box spans heads
    kv_cache=True,  # per-sequence KV lengths, the log-sum-exp, and splits merged by combine_splits
)
