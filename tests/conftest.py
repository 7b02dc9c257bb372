"""Shared fixtures: GPU tests skip cleanly where there is no CUDA GPU; CPU tests always run."""

import pytest
import torch

from kernels import chapters

CHAPTERS = chapters()


def has_gpu() -> bool:
    if not torch.cuda.is_available():
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


requires_gpu = pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU (and CuPy)")


@pytest.fixture(params=CHAPTERS, ids=[c.name for c in CHAPTERS])
def chapter(request):
    return request.param
