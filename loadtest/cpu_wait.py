"""How long runnable work waited for a core during a measurement: the part of a latency that is the
machine's, not the code's.

Two figures from the kernel's own accounting (Linux):

* **CPU pressure**: the share of the time at least one runnable task waited for a core
  (``/proc/pressure/cpu``, "some"; PSI);
* **the serving processes' wait**: the time their threads spent runnable on a run queue, in ms per
  second of the run (``/proc/<pid>/task/<tid>/schedstat``, second field: ``run_delay``). A request
  that crosses a process whose threads waited 200 ms of every second waits with them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PSI_CPU = Path("/proc/pressure/cpu")


@dataclass(frozen=True)
class CpuWait:
    """Over one measurement: ``pressure`` (0..1; NaN where the kernel has no PSI) and the serving
    processes' run-queue wait in ms per second."""

    pressure: float
    waited_ms_per_s: float

    def describe(self) -> str:
        pressure = "" if self.pressure != self.pressure else f"CPU pressure {100 * self.pressure:.0f}%, "
        return f"{pressure}servers waited for a core {self.waited_ms_per_s:.0f} ms/s"


def _psi_some_us() -> float:
    """Microseconds during which some task waited for a core, since boot; NaN without PSI."""
    try:
        for line in PSI_CPU.read_text().splitlines():
            if line.startswith("some "):
                return float(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        pass
    return float("nan")


def _run_delay_ns(pids: tuple[int, ...]) -> int:
    """The threads of ``pids``: nanoseconds spent runnable but not running, summed."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # the process ended
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[1])
            except (OSError, ValueError, IndexError):  # the thread ended meanwhile
                continue
    return total


class CpuWaitMeter:
    """``start()`` before a measurement, ``stop()`` after it. A thread that ends in between takes
    its wait with it, so the processes' figure is a lower bound."""

    def __init__(self, pids: tuple[int, ...]) -> None:
        self.pids = pids
        self._t = self._psi = 0.0
        self._delay = 0

    def start(self) -> CpuWaitMeter:
        self._t, self._psi, self._delay = time.monotonic(), _psi_some_us(), _run_delay_ns(self.pids)
        return self

    def stop(self) -> CpuWait:
        wall = max(1e-9, time.monotonic() - self._t)
        pressure = (_psi_some_us() - self._psi) / 1e6 / wall
        waited = (_run_delay_ns(self.pids) - self._delay) / 1e6 / wall
        return CpuWait(pressure, waited)
