"""What a long command is doing now, on stderr (stdout carries only its tables): a spinner line on a terminal, plain
lines in a pipe or a log, so that a first `runner.py inspect` (a minute of compiling) is never silent."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import TracebackType

from rich.console import Console
from rich.progress import Progress as Spinner
from rich.progress import SpinnerColumn, TextColumn


class Progress:
    """Steps and notes on stderr; use it as a context manager around the work.

    ``step(text)``: a stage of the work, shown while it runs (a spinner line, or "text ..." once in a log);
    ``detail(text)``: a finer one, shown on a terminal only, where it costs no line;
    ``note(text)``: a line that stays, in both (a kernel left out, and why).
    """

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self.spinner = None
        if self.console.is_terminal:
            columns = (SpinnerColumn(), TextColumn("{task.description}", markup=False))
            self.spinner = Spinner(*columns, console=self.console, transient=True)

    def __enter__(self) -> Progress:
        if self.spinner is not None:
            self.spinner.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None):
        if self.spinner is not None:
            self.spinner.__exit__(kind, error, trace)

    @contextlib.contextmanager
    def step(self, text: str) -> Iterator[None]:
        """A stage of the work: on a terminal, a spinner line while it runs; elsewhere "text ..." as it starts."""
        if self.spinner is None:
            print(f"{text} ...", file=sys.stderr, flush=True)
            yield
            return
        with self._spinning(text):
            yield

    @contextlib.contextmanager
    def detail(self, text: str) -> Iterator[None]:
        """A finer stage: a spinner line on a terminal, nothing elsewhere (a log gets its ``step`` alone)."""
        if self.spinner is None:
            yield
            return
        with self._spinning(text):
            yield

    def note(self, text: str) -> None:
        """A line that stays."""
        if self.spinner is None:
            print(text, file=sys.stderr, flush=True)
        else:
            self.console.print(text, highlight=False, markup=False)

    @contextlib.contextmanager
    def _spinning(self, text: str) -> Iterator[None]:
        task = self.spinner.add_task(text, total=None)
        try:
            yield
        finally:
            self.spinner.remove_task(task)
