"""Time GPU work with CUDA events: what the ladder, `runner.py ablate` and the examples measure with."""

from __future__ import annotations

from collections.abc import Callable

import torch

# Calling a kernel from Python costs the CPU about 0.05 to 0.1 ms (input checks, the launch; more where a tensor map
# is encoded). Each call is timed between its own CUDA events, queued behind the calls before it: while a call keeps
# the GPU busier than that, the queue stays full and the events time the GPU alone. Under this many ms a call may
# time its own launch as much as the kernel.
LAUNCH_MS = 0.2


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
