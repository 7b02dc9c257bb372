"""The ablation sets: small grids of kernels that take apart a ladder step whose effects are mixed or hidden.

Each set is a folder ``docs/ablations/chNN_slug/`` (NN: the chapter whose step it splits, or that its ideas are
tried on) holding a data file ``ablation.py`` (``TITLE``, ``ROWS``, ``COLUMNS``, ``CELLS``; ``CHANGED_LINES`` where
a variant's diff needs more than the usual few lines) and one folder per variant kernel, laid out like a
chapter (``flash_attention.cu`` + ``loader.py``) and named after the chapter it derives from. A cell names a
ladder chapter or a variant of the set. Loading compiles nothing and needs no GPU; listing the sets
(``set_folders``) imports neither torch nor the kernels, for `runner.py ablate --help`.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernels.chapters import Chapter

ROOT = Path(__file__).resolve().parents[2]
ABLATIONS_DIR = ROOT / "docs" / "ablations"
SET_FOLDER = re.compile(r"ch(\d\d)_(\w+)")
# A variant is its chapter with one small change: twelve lines for the idea, and where it changes the shared memory,
# SMEM_BYTES and the kernel's static_assert on it, one line each. A set whose idea takes more says so (CHANGED_LINES).
CHANGED_LINES = 12 + 2 * 2


@dataclass(frozen=True)
class Ablation:
    """One set: a grid whose (row, column) cells each name the contender, chapter or variant, that fills it."""

    name: str  # folder, e.g. "ch03_ldmatrix"
    number: int  # the chapter whose step it splits: 3
    title: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: dict[tuple[str, str], str]  # (row, column) -> contender name
    contenders: list[Chapter]  # ladder chapters named in cells and the variants, in ladder order
    changed_lines: int  # the most lines a variant's diff against its chapter may change (CHANGED_LINES)


def is_variant(chapter: Chapter) -> bool:
    """Whether a contender is an ablation variant rather than a rung of the ladder."""
    return chapter.source.is_relative_to(ABLATIONS_DIR)


def ladder_order(chapter: Chapter) -> tuple[int, bool, str]:
    """Sort key: by chapter number, the ladder's own chapter before the variants derived from it."""
    return chapter.number, is_variant(chapter), chapter.name


def import_data_file(path: Path) -> ModuleType:
    """Import a set's ``ablation.py`` from its path (the sets are folders, not packages)."""
    spec = importlib.util.spec_from_file_location(f"{path.parent.name}.ablation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def set_folders() -> list[Path]:
    """Every set's folder, in the order of the chapters they split."""
    return [f for f in sorted(ABLATIONS_DIR.iterdir()) if SET_FOLDER.fullmatch(f.name) and f.is_dir()]


def set_number(folder: Path) -> int:
    """The chapter whose step a set splits, from its folder's name: 3 for ch03_ldmatrix."""
    return int(SET_FOLDER.fullmatch(folder.name).group(1))


def load_ablation(folder: Path, ladder: list[Chapter], earlier: tuple[Ablation, ...] = ()) -> Ablation:
    """One set from its folder; a ValueError if a cell names neither a ladder chapter nor a variant, of its own or of
    one of the ``earlier`` sets (a cell may borrow a variant another set already measures, rather than a copy)."""
    from kernels.chapters import CHAPTER_FOLDER, load_chapter

    data = import_data_file(folder / "ablation.py")
    variants = [load_chapter(sub) for sub in sorted(folder.iterdir()) if CHAPTER_FOLDER.fullmatch(sub.name)]
    borrowed = [c for ablation in earlier for c in ablation.contenders if is_variant(c)]
    known = {c.name: c for c in [*ladder, *borrowed, *variants]}
    unknown = sorted(set(data.CELLS.values()) - set(known))
    if unknown:
        raise ValueError(f"{folder.name}: cells name {', '.join(unknown)}, which are neither chapters nor variants")
    named = {known[name] for name in data.CELLS.values()} | set(variants)
    return Ablation(
        name=folder.name,
        number=set_number(folder),
        title=data.TITLE,
        rows=tuple(data.ROWS),
        columns=tuple(data.COLUMNS),
        cells=dict(data.CELLS),
        contenders=sorted(named, key=ladder_order),
        changed_lines=getattr(data, "CHANGED_LINES", CHANGED_LINES),
    )


def load_ablations(folders: list[Path], ladder: list[Chapter]) -> tuple[Ablation, ...]:
    """The sets of the folders, in their order, each free to borrow the variants of the sets before it."""
    loaded: tuple[Ablation, ...] = ()
    for folder in folders:
        loaded += (load_ablation(folder, ladder, loaded),)
    return loaded


@functools.cache
def _ablations() -> tuple[Ablation, ...]:
    """Every set, loaded once: each loader's kernel keeps its compiled instances for the whole process."""
    from kernels.chapters import chapters

    return load_ablations(set_folders(), chapters())


def ablations() -> list[Ablation]:
    """All ablation sets, in the order of the chapters they split."""
    return list(_ablations())


def variant_named(name: str) -> Chapter | None:
    """The ablation variant whose folder is ``name`` ("k19_lean"), or None: no set holds one by that name."""
    return next((c for ablation in ablations() for c in ablation.contenders if is_variant(c) and c.name == name), None)


def chapter_or_variant(token: str) -> Chapter:
    """A chapter by number or slug, or an ablation variant by its folder's name ("k21_short_tile"); a UsageError
    names an unknown one."""
    from kernels.tools.cli import one_chapter

    return variant_named(token) or one_chapter(token)


def find_ablation(token: str) -> Ablation:
    """The set named by its folder ("ch03_ldmatrix"), its slug ("ldmatrix") or the chapter it splits ("3", "03"):
    that chapter's only set, or the one named as the chapter is (ch19_dynamic_schedule for k19_dynamic_schedule);
    else a ValueError."""
    sets, token = ablations(), token.strip()
    named = [a for a in sets if token in (a.name, SET_FOLDER.fullmatch(a.name).group(2))]
    numbered = [a for a in sets if token in (str(a.number), f"{a.number:02d}")]
    own = [a for a in numbered if (ROOT / f"k{a.name[2:]}").is_dir()]  # ch19_dynamic_schedule: k19_dynamic_schedule/
    if named or len(numbered) == 1 or own:
        return (named or own or numbered)[0]
    if numbered:
        folders = ", ".join(a.name for a in numbered)
        raise ValueError(f"chapter {numbered[0].number} has {len(numbered)} ablation sets ({folders}): name one")
    known = ", ".join(f"{a.number} ({a.name})" for a in sets)
    raise ValueError(f"no ablation set {token!r}; the sets are {known}")
