"""The runtime under the chapters and the op: build, launch, check inputs, tensor maps, list the chapters.

The tools behind `runner.py` (inspect, diff, profile, peak, ablate, reports) live one floor up, in ``kernels.tools``.
"""

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
