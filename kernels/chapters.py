"""Find the chapters: every ``kNN_slug/`` folder at the top of the project with a ``loader.py``."""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from kernels.launch import AttentionKernel

ROOT = Path(__file__).resolve().parent.parent
CHAPTER_FOLDER = re.compile(r"k(\d\d)_(\w+)")


@dataclass(frozen=True)
class Chapter:
    """One rung of the ladder: its number, folder slug, one-line title and kernel (its loader's ``KERNEL``)."""

    number: int
    slug: str
    title: str
    kernel: AttentionKernel

    @property
    def attention(self) -> AttentionKernel:
        """The chapter's attention: ``chapter.attention(q, k, v, causal=False, out=None)`` launches its kernel."""
        return self.kernel

    @property
    def name(self) -> str:
        """The folder name, e.g. ``k01_naive``."""
        return f"k{self.number:02d}_{self.slug}"

    @property
    def source(self) -> Path:
        """The chapter's ``.cu`` file."""
        return self.kernel.source


def chapters() -> list[Chapter]:
    """All chapters in ladder order. Importing a loader compiles nothing and needs no GPU."""
    found = []
    for folder in sorted(ROOT.iterdir()):
        match = CHAPTER_FOLDER.fullmatch(folder.name)
        if match and (folder / "loader.py").exists():
            loader = importlib.import_module(f"{folder.name}.loader")
            found.append(Chapter(int(match.group(1)), match.group(2), loader.TITLE, loader.KERNEL))
    return found


def load_chapter(folder: Path) -> Chapter:
    """A chapter-like folder anywhere (``kNN_slug/`` with a ``loader.py``), imported from its path, not a package."""
    match = CHAPTER_FOLDER.fullmatch(folder.name)
    if not match or not (folder / "loader.py").exists():
        raise ValueError(f"{folder} is not a chapter folder: it needs a kNN_slug name and a loader.py")
    spec = importlib.util.spec_from_file_location(f"{folder.name}.loader", folder / "loader.py")
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    return Chapter(int(match.group(1)), match.group(2), loader.TITLE, loader.KERNEL)


def select(chapter_list: list[Chapter], wanted: str | None) -> list[Chapter]:
    """Pick chapters by number or slug from a comma-separated list ("1,3", "naive,swizzle"); None: all."""
    if not wanted:
        return chapter_list
    picked = []
    for token in (part.strip() for part in wanted.split(",") if part.strip()):
        matches = [c for c in chapter_list if token in (str(c.number), f"{c.number:02d}", c.slug, c.name)]
        if not matches:
            known = ", ".join(f"{c.number} ({c.slug})" for c in chapter_list)
            raise ValueError(f"no chapter {token!r}; the chapters are {known}")
        picked += [c for c in matches if c not in picked]
    return picked
