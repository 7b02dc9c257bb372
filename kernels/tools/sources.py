"""Which kernel sources a measurement ran: the sha256 of each measured ``.cu`` file, keyed by its path in the
project, so that a results file says whether the kernel it timed is still the one in the tree."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PREFIX = "sha256:"


def source_hash(path: Path) -> str:
    """The file's sha256 as a results file records it, e.g. "sha256:9f86d0…"."""
    return PREFIX + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def source_key(path: Path) -> str:
    """The file's path relative to the project (as posix), or as given where it lies outside."""
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()


def source_hashes(paths: Iterable[Path]) -> dict[str, str]:
    """``{"k16_softmax_chains/flash_attention.cu": "sha256:…"}`` for every source measured, in the order given."""
    return {source_key(path): source_hash(path) for path in paths}


def changed_sources(recorded: dict[str, str], root: Path = ROOT) -> list[str]:
    """The recorded sources whose file is gone or differs from today's: the measurement no longer describes them."""
    changed = []
    for key, digest in recorded.items():
        path = root / key
        if not path.is_file():
            changed.append(f"{key} (no such file)")
        elif source_hash(path) != digest:
            changed.append(f"{key} (changed since it was measured)")
    return changed
