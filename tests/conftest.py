"""The fixtures over the kernels. What the test files share besides fixtures is in tests/helpers.py."""

import importlib
import os
import sys
from pathlib import Path

import pytest

from kernels.tools.sass import opcodes
from tests.helpers import CHAPTERS, KERNELS, VARIANTS, sass_text


@pytest.fixture(params=CHAPTERS, ids=[c.name for c in CHAPTERS])
def chapter(request):
    """Each chapter of the ladder."""
    return request.param


@pytest.fixture(scope="session")
def figures():
    """docs/figures/make_figures.py, imported with its package (docs/figures/): each figure's module an attribute."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs"))
    return importlib.import_module("figures.make_figures")


@pytest.fixture(params=VARIANTS, ids=[c.name for c in VARIANTS])
def variant(request):
    """Each ablation variant (docs/ablations/chNN_*/kNN_*/)."""
    return request.param


@pytest.fixture(params=KERNELS, ids=[c.name for c in KERNELS])
def chapter_or_variant(request):
    """Each kernel the project builds, chapter or ablation variant: for what must hold of all of them."""
    return request.param


@pytest.fixture(scope="session")
def sass_texts():
    """Each chapter's SASS, by number: its bf16, non-causal instance for an sm_90 GPU.

    Each pytest-xdist worker starts at another chapter: workers that want them all at once compile different ones,
    then read the rest from the disk cache, instead of waiting for one another chapter after chapter.
    """
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    start = worker * len(CHAPTERS) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    texts = {c.number: sass_text(c) for c in [*CHAPTERS[start:], *CHAPTERS[:start]]}
    return dict(sorted(texts.items()))


@pytest.fixture(scope="session")
def sass(sass_texts):
    """Each chapter's opcode counts, by number (see sass_texts)."""
    return {number: opcodes(text) for number, text in sass_texts.items()}
