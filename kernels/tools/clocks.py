"""The SM clock and the board's power draw while a contender is timed (`runner.py --clocks`), read through NVML.

A kernel that keeps the tensor cores busy draws the card's whole power budget, and the card then lowers its SM
clock until the draw fits: two kernels that issue the same products can run at different clocks, and one launch
under Nsight Compute sees neither the clock nor the draw of a thousand launches back to back. A thread reads both
every SAMPLE_MS while the timed calls run; a round's reading is the median of its samples.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass

from kernels.tools.cli import ToolError

SAMPLE_MS = 5.0


class ClocksUnavailable(ToolError):
    """NVML cannot be read here: no nvidia-ml-py, or no NVIDIA driver."""


@dataclass(frozen=True)
class Reading:
    """One round's clock and power: the medians of what was sampled while its calls ran."""

    sm_mhz: float
    watts: float

    def to_json(self) -> dict:
        return {"sm_mhz": self.sm_mhz, "watts": self.watts}

    @classmethod
    def from_json(cls, data: dict) -> Reading:
        return cls(float(data["sm_mhz"]), float(data["watts"]))


def median_reading(samples: list[tuple[float, float]]) -> Reading:
    """The medians of (MHz, W) samples; ValueError when there are none."""
    if not samples:
        raise ValueError("no clock samples: the timed calls ended before the first one")
    return Reading(statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples))


class ClockSampler:
    """``with sampler.sampling() as samples:`` fills ``samples`` with (SM MHz, W) every SAMPLE_MS until the block
    ends, and takes one sample at its end too, so that a block shorter than SAMPLE_MS has one."""

    def __init__(self, device_index: int):
        try:
            import pynvml
        except ImportError as error:
            raise ClocksUnavailable("--clocks reads NVML: pip install nvidia-ml-py") from error
        try:
            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        except pynvml.NVMLError as error:
            raise ClocksUnavailable(f"NVML cannot read GPU {device_index}: {error}") from error
        self._nvml = pynvml

    def sample(self) -> tuple[float, float]:
        nvml = self._nvml
        mhz = nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)
        return float(mhz), nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0  # NVML reports mW

    def sampling(self) -> _Sampling:
        return _Sampling(self)


class _Sampling:
    def __init__(self, sampler: ClockSampler):
        self._sampler, self._stop, self.samples = sampler, threading.Event(), []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_MS / 1000.0):
            self.samples.append(self._sampler.sample())

    def __enter__(self) -> list[tuple[float, float]]:
        self._thread.start()
        return self.samples

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(self._sampler.sample())
