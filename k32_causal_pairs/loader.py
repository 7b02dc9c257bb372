"""Chapter 32: causal too, the two blocks of a cluster share each K and V tile, and take turns at the longer one."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "causal too, the two blocks of a cluster share each K and V tile, and take turns at the longer one"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES, and the decode kernel's) is the kernel's own: read from its
# constants.
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    arch="sm_90a",  # wgmma, TMA and setmaxnreg exist on Hopper alone
    tensor_maps=True,  # q, k and v as tensor maps; one copy moves one plane of a tile
    persistent=True,  # one block per SM; the batch size is the last argument
    packed_gqa=True,  # a Q tile is (positions, heads of one group): its map's box spans heads
    o_tensor_map=True,  # o as a tensor map as well: a warpgroup's rows leave in one TMA store per plane
    kv_cache=True,  # per-sequence KV lengths, the log-sum-exp, and splits merged by combine_splits
    dynamic_schedule=True,  # blocks take work from a counter in global memory: its address is the last argument
    decode_kernel=True,  # and decode_attention, for query tiles of at most DECODE_ROWS rows
)
