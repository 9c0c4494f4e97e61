"""loadtest/cpu_wait.py: the run-queue wait of processes that want more cores than there are."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from loadtest.cpu_wait import CpuWait, CpuWaitMeter

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/task"),
                                reason="reads Linux's per-thread scheduling statistics (/proc/<pid>/task/*/schedstat)")

SPIN = "import time\nend = time.monotonic() + 1.0\nwhile time.monotonic() < end: pass\n"


def test_processes_that_outnumber_the_cores_are_seen_waiting() -> None:
    cores = len(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(2 * cores + 1)]
    try:
        meter = CpuWaitMeter(tuple(p.pid for p in procs)).start()
        time.sleep(0.5)
        wait = meter.stop()
    finally:
        for p in procs:
            p.wait(30)
    # more than twice as many spinners as cores: at any moment over half of them wait, so their
    # summed wait is at least about (cores + 1) × the time measured
    assert wait.waited_ms_per_s > 250, wait
    if wait.pressure == wait.pressure:  # PSI present
        assert wait.pressure > 0.2, wait


def test_a_process_gone_counts_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    assert CpuWaitMeter((proc.pid,)).start().stop().waited_ms_per_s == 0


def test_describe_without_pressure() -> None:
    assert CpuWait(float("nan"), 12.4).describe() == "servers waited for a core 12 ms/s"
    assert CpuWait(0.36, 120).describe() == "CPU pressure 36%, servers waited for a core 120 ms/s"
