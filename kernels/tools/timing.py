"""Time GPU work with CUDA events: what the ladder, `runner.py ablate` and the examples measure with."""

from __future__ import annotations

from collections.abc import Callable

import torch


def time_ms(fn: Callable[[int], object], warmup: int, repeats: int) -> list[float]:
    """Time of each of ``repeats`` calls ``fn(i)`` in ms, each between its own pair of CUDA events, after warm-up."""
    for i in range(warmup):
        fn(i)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for i, (start, end) in enumerate(events):
        start.record()
        fn(warmup + i)
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]
