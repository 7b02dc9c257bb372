"""`runner.py diff A B`: the one idea chapter B adds to chapter A, as a unified diff of the kernel, then the loader.

python runner.py diff 3 4 [-U 5] [-w] [--no-color]
python runner.py diff 21 k21_short_tile     # an ablation variant against its chapter
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from rich.console import Console
from rich.text import Text

from kernels.tools.ablations import chapter_or_variant

DIFFED_FILES = ("flash_attention.cu", "loader.py")
# The budget of one step of the ladder: the kernel's diff between neighbouring chapters changes at most this many
# lines (removed plus added), read as it is, without -w. One idea, short enough to read beside its page.
DIFF_BUDGET = 180
DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def unified_diff(a: Path, b: Path, context: int, ignore_indent: bool = False) -> list[str]:
    """The unified diff of two files, labelled chapter/file, without line endings.

    With ``ignore_indent``, lines that differ only in leading whitespace count as the same and show as context in
    their new form, as `diff -w` does: code that moved into a loop shows as the loop's lines alone.
    """
    old, new = a.read_text().splitlines(), b.read_text().splitlines()
    if not ignore_indent:
        return list(
            difflib.unified_diff(
                old, new, f"{a.parent.name}/{a.name}", f"{b.parent.name}/{b.name}", n=context, lineterm=""
            )
        )
    matcher = difflib.SequenceMatcher(
        None, [line.lstrip() for line in old], [line.lstrip() for line in new], autojunk=False
    )
    lines = []
    for group in matcher.get_grouped_opcodes(context):
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        lines.append(f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [" " + line for line in new[j1:j2]]
                continue
            lines += ["-" + line for line in old[i1:i2]] + ["+" + line for line in new[j1:j2]]
    return [f"--- {a.parent.name}/{a.name}", f"+++ {b.parent.name}/{b.name}", *lines] if lines else []


def diff_style(line: str) -> str:
    """The colour of one diff line: headers bold, hunks cyan, additions green, removals red."""
    return next((style for prefix, style in DIFF_STYLES if line.startswith(prefix)), "")


def print_diff(lines: list[str], color: bool) -> None:
    """Print diff lines, coloured unless asked not to (or not on a terminal)."""
    if not color:
        print("\n".join(lines))
        return
    text = Text()
    for line in lines:
        text.append(line + "\n", style=diff_style(line))
    Console(highlight=False).print(text, soft_wrap=True, end="")


def run_diff(args: argparse.Namespace) -> int:
    """`runner.py diff A B`: the kernel's diff, then the loader's."""
    a, b = chapter_or_variant(args.a), chapter_or_variant(args.b)
    for i, file_name in enumerate(DIFFED_FILES):
        if i:
            print()
        lines = unified_diff(
            a.source.with_name(file_name), b.source.with_name(file_name), args.context, args.ignore_indent
        )
        print_diff(lines or [f"{a.name} and {b.name} have the same {file_name}"], color=not args.no_color)
    return 0
