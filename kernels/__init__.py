"""The runtime under the chapters and the op: build, launch, check inputs, tensor maps, list the chapters.

The tools behind `runner.py` (inspect, diff, profile, peak, ablate, reports) live one floor up, in ``kernels.tools``.

``from kernels import AttentionKernel`` imports the module that defines it on first use, not here: the command
line parses its arguments (and prints --help) from ``kernels.tools`` before anything imports torch.
"""

from __future__ import annotations

import importlib
import sys
import types

# What the package exports, by the module that defines it.
EXPORTS = {
    "BuildError": "kernels.build",
    "Chapter": "kernels.chapters",
    "chapters": "kernels.chapters",
    "select": "kernels.chapters",
    "DTYPES": "kernels.launch",
    "HEAD_DIM": "kernels.launch",
    "AttentionKernel": "kernels.launch",
    "KernelError": "kernels.launch",
    "check_inputs": "kernels.launch",
}
__all__ = list(EXPORTS)


def __getattr__(name: str) -> object:
    """An export, imported from its module the first time it is asked for."""
    if name not in EXPORTS:
        raise AttributeError(f"module 'kernels' has no attribute {name!r}")
    value = getattr(importlib.import_module(EXPORTS[name]), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """The package; importing ``kernels.chapters`` does not bind the module over the function ``chapters``."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in EXPORTS and isinstance(value, types.ModuleType):
            return  # the module stays in sys.modules; ``kernels.chapters`` is the function, as ``from kernels import``
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
