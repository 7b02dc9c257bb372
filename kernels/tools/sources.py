"""Which kernel sources a measurement ran: the sha256 of each measured ``.cu`` file, keyed by its path in the
project, so that a results file says whether the kernel it timed is still the one in the tree."""

from __future__ import annotations

import hashlib
import json
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


SOURCES_LINE = "# sources: "  # how a text file in results/ records the kernels it ran, as one line of JSON


def sources_line(tokens: list[str]) -> str:
    """The line a text result records above its tool's output: the sha256 of each chapter named (by number or slug;
    "op": the chapter the op runs on this GPU) or ablation variant (by name), e.g.
    ``# sources: {"k19_dynamic_schedule/flash_attention.cu": …}``."""
    from kernels.op import chapter_for
    from kernels.tools.ablations import chapter_or_variant

    picked = []
    for token in tokens:
        if token == "op":
            import torch

            picked.append(chapter_for(torch.cuda.current_device()))
        else:
            picked.append(chapter_or_variant(token))
    return sources_line_of(chapter.kernel.source for chapter in picked)


def sources_line_of(paths: Iterable[Path]) -> str:
    """The same line for the sources given, e.g. an ablation variant's."""
    return SOURCES_LINE + json.dumps(source_hashes(paths))


def recorded_in_text(text: str) -> dict[str, str] | None:
    """The sources a text result recorded (merged over its sources lines), or None if it recorded none."""
    found = [json.loads(line.removeprefix(SOURCES_LINE)) for line in text.splitlines() if line.startswith(SOURCES_LINE)]
    return {key: digest for sources in found for key, digest in sources.items()} if found else None


if __name__ == "__main__":
    import sys

    print(sources_line(sys.argv[1:]))
