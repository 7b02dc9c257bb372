"""The command line's conventions, shared by every `runner.py` command: a mistake is one line on stderr, every option
shows its default, chapters are named by number or slug.

Nothing here imports torch or the runtime at import time: `--help` and a mistyped option answer at once.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from kernels.chapters import Chapter

# The element types by the names the command line takes (the keys of kernels.launch.DTYPES, which imports torch).
DTYPE_NAMES = ("bf16", "fp16")
# The oldest GPU the chapters run on: bf16 mma.sync, cp.async and ldmatrix need sm_80.
OLDEST_ARCH = 80
ARCH = re.compile(r"sm_(\d+)a?")


class UsageError(ValueError):
    """The command line asked for something that does not exist: an unknown chapter, one too many."""


class ToolError(RuntimeError):
    """A tool the command needs is missing or failed (a GPU, ncu, the GPU's counters, the profiled program)."""


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help, with each option's default where it has one and its help does not already give it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        no_default = action.default is None or action.default is False or action.default is argparse.SUPPRESS
        if "default" in text or no_default or not action.option_strings:
            return text
        return f"{text} (default %(default)s)"


# A check of the parsed arguments taken together: (parser, args, argv); it may fill in args or call parser.error.
Check = Callable[["Parser", argparse.Namespace, list[str]], None]


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, the problem and where the help is, and whose help shows defaults.

    ``checks`` run after parsing, in order, on what argparse alone cannot judge (e.g. options that exclude others).
    """

    def __init__(self, *, checks: Sequence[Check] = (), **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # an option is named in full: --from-json refuses some by name
        super().__init__(**kwargs)
        self.checks = tuple(checks)

    def parse_args(self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None):
        """The parsed arguments, checked."""
        argv = list(sys.argv[1:] if args is None else args)
        parsed = super().parse_args(argv, namespace)
        for check in self.checks:
            check(self, parsed, argv)
        return parsed

    def error(self, message: str) -> NoReturn:
        """Exit 2 with ``prog: error: message`` alone, without the usage block."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def run(parser: argparse.ArgumentParser, handler: Callable[[argparse.Namespace], int], argv: list[str]) -> int:
    """Parse ``argv`` and run the command: its exit status, 0 after --help, 2 for a mistake in what was asked
    for, 1 for a tool or a build that failed; each failure one line on stderr."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a mistake argparse found (already printed)
        return exit_.code if isinstance(exit_.code, int) else 1
    from kernels.build import BuildError  # after parsing: it imports torch

    try:
        return handler(args)
    except UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    except (BuildError, ToolError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader of a pipe (`| head`) stopped reading: not a failure of the command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that exit's flush of stdout is quiet
        return 0


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def gpu_arch(text: str) -> str:
    """argparse type: a GPU architecture the chapters compile for, "sm_80" or newer ("sm_90a" reads as "sm_90")."""
    match = ARCH.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a GPU architecture such as sm_80 or sm_90, got {text!r}")
    if int(match.group(1)) < OLDEST_ARCH:
        raise argparse.ArgumentTypeError(
            f"{text} is older than the chapters support: they compile for sm_{OLDEST_ARCH} and newer, "
            "and the Hopper chapters (built for sm_90a) for sm_90 only"
        )
    return f"sm_{match.group(1)}"


def add_instance_options(parser: argparse.ArgumentParser) -> None:
    """--dtype and --causal: which kernel instance to look at or run."""
    parser.add_argument("--dtype", choices=DTYPE_NAMES, default="bf16", help="element type of q, k, v and out")
    parser.add_argument("--causal", action="store_true", help="the causal instance (default: not causal)")


def pick(wanted: Sequence[str]) -> list[Chapter]:
    """Chapters by number or slug, as words or comma lists ("3 4", "1,3", "naive,swizzle"); none named: all."""
    from kernels.chapters import chapters, select

    try:
        return select(chapters(), ",".join(wanted) or None)
    except ValueError as error:
        raise UsageError(str(error)) from error


def one_chapter(token: str) -> Chapter:
    """The chapter named by one number or slug ("3", "03", "ldmatrix", "k03_ldmatrix")."""
    picked = pick([token])
    if len(picked) != 1:
        raise UsageError(f"name one chapter, got {token!r}")
    return picked[0]


def names(items: Sequence[str]) -> str:
    """Names in prose: "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
