"""Helpers the tests share: `runner.py` run in this process, and what a failed command must look like."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ran:
    """A command's exit status and what it printed."""

    code: int
    out: str
    err: str


def run_command(capsys, *argv: object) -> Ran:
    """`python runner.py *argv` in this process (no interpreter to start, torch imported once per session)."""
    from kernels.tools.commands import main

    capsys.readouterr()  # what earlier steps of the test printed is not this command's
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return Ran(code, out, err)


def assert_one_line_error(ran: Ran, code: int, *messages: str) -> None:
    """A mistake or a failure: exit ``code``, one line on stderr naming it, no traceback."""
    assert ran.code == code, ran.err
    assert len(ran.err.strip().splitlines()) == 1, ran.err
    assert "Traceback" not in ran.err + ran.out
    for message in messages:
        assert message in ran.err, ran.err


def hide_gpu(monkeypatch) -> None:
    """Make torch see no CUDA GPU, as on a machine without one (the GPU machine runs these tests too)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
