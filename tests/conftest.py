"""Shared fixtures: GPU tests skip cleanly where there is no CUDA GPU; CPU tests always run."""

import importlib
import sys
from pathlib import Path

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


def changed(diff: list[str]) -> list[str]:
    """The lines a unified diff removes or adds, without its two file headers."""
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


@pytest.fixture(params=CHAPTERS, ids=[c.name for c in CHAPTERS])
def chapter(request):
    return request.param


@pytest.fixture(scope="session")
def figures():
    """docs/figures/make_figures.py, imported with its package (docs/figures/): each figure's module an attribute."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs"))
    return importlib.import_module("figures.make_figures")
