"""Run a benchmark process and read its own cost from the kernel: CPU seconds and peak RSS.

``os.wait4`` returns the child's rusage (user + system time, ``ru_maxrss``), so nothing samples
the process while it runs and the figures are the kernel's, for any runtime (CPython, the JVM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Usage", "run_measured", "thread_cpu"]


@dataclass(frozen=True)
class Usage:
    """What one process cost: wall and CPU seconds, peak resident set (MiB), and its output."""

    returncode: int
    wall_s: float
    cpu_s: float
    maxrss_mib: float
    stdout: str
    stderr: str


def run_measured(cmd: list[str], cwd: Path | None = None, timeout: float = 1800.0,
                 env: dict[str, str] | None = None) -> Usage:
    """Run ``cmd`` to its end (killed after ``timeout`` s) and return its usage and output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.send_signal(signal.SIGKILL)
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Usage(returncode=proc.returncode, wall_s=round(wall, 3),
                     cpu_s=round(ru.ru_utime + ru.ru_stime, 3), maxrss_mib=round(ru.ru_maxrss / 1024, 1),
                     stdout=out.read().decode(errors="replace"), stderr=err.read().decode(errors="replace"))


def thread_cpu() -> dict[str, float]:
    """This process's CPU seconds so far per kind of thread, from ``/proc/self/task``: librdkafka
    names its threads (``rdk:main``, ``rdk:broker<N>``...), Python's keep the process's name. Shows
    how much of a record's cost is the Python thread's and how much the Kafka clients' own."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        kind = "rdk:broker" if comm.startswith("rdk:broker") else comm if comm.startswith("rdk:") else "python"
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return out
