"""The shared layer under the chapters: build, launch, check inputs, and list the chapters."""

from kernels.build import BuildError
from kernels.chapters import Chapter, chapters, select
from kernels.launch import DTYPES, HEAD_DIM, AttentionKernel, KernelError, check_inputs

__all__ = [
    "DTYPES",
    "HEAD_DIM",
    "AttentionKernel",
    "BuildError",
    "Chapter",
    "KernelError",
    "chapters",
    "check_inputs",
    "select",
]
