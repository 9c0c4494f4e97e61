"""loadtest.proc_usage reads a benchmark process's own CPU time and peak RSS from the kernel."""

from __future__ import annotations

import sys

from loadtest.proc_usage import run_measured


def test_cpu_and_peak_rss_of_the_child() -> None:
    # 200 MiB touched, then about 0.3 s of CPU: both must show, and nothing of this test process
    code = ("import time; b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); "
            "t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\nprint('done')")
    u = run_measured([sys.executable, "-c", code], timeout=60)
    assert u.returncode == 0 and u.stdout.strip() == "done"
    assert u.maxrss_mib >= 200
    assert u.cpu_s >= 0.3
    assert u.wall_s >= u.cpu_s * 0.5


def test_exit_code_and_timeout() -> None:
    assert run_measured([sys.executable, "-c", "import sys; sys.exit(3)"]).returncode == 3
    u = run_measured([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert u.returncode == -9 and u.wall_s < 10
