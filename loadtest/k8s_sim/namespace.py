"""The simulator runs in namespaces of its own: user (root mapped, so it may set up networks and
mounts), network (its bridge and pods touch nothing of the machine's), mount (its /etc/hosts)
and PID (when it ends, the kernel ends every process it started: no broker or pod outlives it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

MARKER = "IQMESH_K8S_SIM_ISOLATED"
UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork", "--mount-proc",
           "--kill-child"]


def isolated() -> bool:
    return os.environ.get(MARKER) == "1"


def missing_tools() -> list[str]:
    return [t for t in ("unshare", "nsenter", "ip", "mount") if shutil.which(t) is None]


def can_isolate() -> str | None:
    """None when private namespaces work here, else why not."""
    missing = missing_tools()
    if missing:
        return f"missing {', '.join(missing)} (Debian: util-linux, iproute2, mount)"
    out = subprocess.run([*UNSHARE, "ip", "link", "add", "probe0", "type", "bridge"], capture_output=True,
                         text=True, timeout=30)
    if out.returncode != 0:
        return f"cannot create private user/network namespaces here: {out.stderr.strip()}"
    return None


def reexec_isolated(argv: list[str]) -> int:
    """Run ``python -m loadtest.k8s_sim argv`` inside fresh namespaces; its exit status."""
    env = {**os.environ, MARKER: "1"}
    return subprocess.run([*UNSHARE, sys.executable, "-m", "loadtest.k8s_sim", *argv], env=env).returncode
