"""The simulated cluster's network, built inside the private namespaces the simulator runs in
(``namespace.py``): a bridge (the "node"), one network namespace per pod held by a pause
process, with its own address on the bridge, and an ``/etc/hosts`` (bind-mounted in the private
mount namespace) that plays cluster DNS: pod names through their headless Service, Services
(every ready endpoint), and names such as the Kafka bootstrap address."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BRIDGE = "simbr0"
SUBNET = ipaddress.ip_network("10.244.0.0/24")
#: the node's address on the bridge (what the kubelet probes from; where the broker listens)
NODE_IP = str(SUBNET.network_address + 1)
HOSTS = Path("/etc/hosts")


class NetworkError(Exception):
    """A namespace, link or address could not be set up (the message holds the command)."""


def sh(*cmd: str, timeout: float = 10.0) -> str:
    out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise NetworkError(f"{' '.join(cmd)}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


@dataclass
class Sandbox:
    """A pod's network namespace (Kubernetes' pause container): outlives container restarts."""

    name: str
    ip: str
    holder: subprocess.Popen[bytes]
    link: str

    def enter(self) -> list[str]:
        """The prefix that runs a command in this pod's network namespace."""
        return ["nsenter", "-t", str(self.holder.pid), "-n", "--"]


@dataclass
class ClusterNetwork:
    """Addresses for pods, and the DNS names that point at them. ``hosts_file``: the file
    bind-mounted over /etc/hosts (rewritten in place on every change)."""

    hosts_file: Path
    _next: int = 10
    _sandboxes: dict[str, Sandbox] = field(default_factory=dict)
    _names: dict[str, list[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def setup(self) -> None:
        """The bridge and the hosts file (needs CAP_NET_ADMIN/CAP_SYS_ADMIN in private namespaces)."""
        sh("ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{NODE_IP}/{SUBNET.prefixlen}", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        self.hosts_file.write_text("")
        self._write_hosts()
        sh("mount", "--bind", str(self.hosts_file), str(HOSTS))

    def sandbox(self, pod: str) -> Sandbox:
        """The pod's sandbox, created on first use (same address for the pod's whole life)."""
        with self._lock:
            if pod in self._sandboxes and self._sandboxes[pod].holder.poll() is None:
                return self._sandboxes[pod]
            ip = str(SUBNET.network_address + self._next)
            link = f"veth{self._next}"
            self._next += 1
        holder = subprocess.Popen(["unshare", "--net", "sleep", "infinity"])
        try:
            _wait_own_netns(holder.pid)
            sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", str(holder.pid))
            sh("ip", "link", "set", link, "master", BRIDGE, "up")
            inside = ["nsenter", "-t", str(holder.pid), "-n", "--"]
            sh(*inside, "ip", "link", "set", "lo", "up")
            sh(*inside, "ip", "addr", "add", f"{ip}/{SUBNET.prefixlen}", "dev", "eth0")
            sh(*inside, "ip", "link", "set", "eth0", "up")
            sh(*inside, "ip", "route", "add", "default", "via", NODE_IP)
        except Exception:
            holder.kill()
            holder.wait()
            raise
        box = Sandbox(pod, ip, holder, link)
        with self._lock:
            self._sandboxes[pod] = box
        return box

    def remove(self, pod: str) -> None:
        """Delete the pod's sandbox (the veth pair goes with the namespace)."""
        with self._lock:
            box = self._sandboxes.pop(pod, None)
        if box is not None:
            box.holder.kill()
            box.holder.wait()

    def set_name(self, name: str, ips: list[str]) -> None:
        """Point DNS ``name`` at ``ips`` (none: the name does not resolve)."""
        with self._lock:
            if self._names.get(name, []) == list(ips):
                return
            if ips:
                self._names[name] = list(ips)
            else:
                self._names.pop(name, None)
            self._write_hosts()

    def _write_hosts(self) -> None:
        lines = ["127.0.0.1 localhost", f"{NODE_IP} sim-node"]
        lines += [f"{ip} {name}" for name, ips in sorted(self._names.items()) for ip in ips]
        with open(self.hosts_file, "r+") as f:  # in place: the bind mount follows the inode
            f.seek(0)
            f.write("\n".join(lines) + "\n")
            f.truncate()

    def close(self) -> None:
        for pod in list(self._sandboxes):
            self.remove(pod)


def _wait_own_netns(pid: int, timeout: float = 5.0) -> None:
    """Until ``pid`` has left our network namespace (unshare has run)."""
    ours = os.readlink("/proc/self/ns/net")  # "net:[inode]"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.readlink(f"/proc/{pid}/ns/net") != ours:
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise NetworkError(f"process {pid} did not enter a network namespace of its own")
