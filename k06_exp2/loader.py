"""Chapter 6: the softmax in base 2, its scale folded into one FMA."""

from pathlib import Path

from kernels import AttentionKernel

TITLE = "exp2: the softmax scale folded into one FFMA before MUFU.EX2"

# The launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES) is the kernel's own: read from its constants.
KERNEL = AttentionKernel(Path(__file__).with_name("flash_attention.cu"))
