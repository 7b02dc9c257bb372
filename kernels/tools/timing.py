"""Time GPU work with CUDA events: what the ladder, `runner.py ablate` and the examples measure with."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch

# Calling a kernel from Python costs the CPU about 0.05 to 0.1 ms (input checks, the launch; more where a tensor map
# is encoded). Each call is timed between its own CUDA events, queued behind the calls before it: while a call keeps
# the GPU busier than that, the queue stays full and the events time the GPU alone. Under this many ms a call may
# time its own launch as much as the kernel.
LAUNCH_MS = 0.2


# A call is timed at the clocks its own work sets. A kernel that draws the card's whole power budget leaves the SM
# clock lowered for a few hundred ms after it ends, so a call timed right after one would be timed at that clock:
# warm-up lasts at least this long, as well as its number of calls.
WARMUP_MS = 300.0


def time_ms(
    fn: Callable[[int], object],
    warmup: int,
    repeats: int,
    warmup_ms: float = WARMUP_MS,
    during: AbstractContextManager | None = None,
) -> list[float]:
    """Time of each of ``repeats`` calls ``fn(i)`` in ms, each between its own pair of CUDA events, after warm-up:
    ``warmup`` calls, and more until they have kept the GPU busy for ``warmup_ms``. The timed calls run inside
    ``during`` (the clock sampling of `runner.py --clocks`), until the last has ended."""
    calls, busy_ms, batch = 0, 0.0, max(warmup, 1)
    while calls < warmup or busy_ms < warmup_ms:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(calls, calls + batch):
            fn(i)
        end.record()
        end.synchronize()
        busy_ms += start.elapsed_time(end)
        calls += batch
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    with during or nullcontext():
        for i, (start, end) in enumerate(events):
            start.record()
            fn(calls + i)
            end.record()
        torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]
