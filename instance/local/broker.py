"""Manage the Kafka-protocol dev broker ``noida-db`` for development and tests.

``noida-db`` is a Rust binary shipped in the ``noida-db`` wheel (pinned in the ``dev`` extra). It is
started detached, one broker per data directory::

    noida-db start --only kafka --host 127.0.0.1 --kafka-port PORT --data-dir DIR

``--data-dir`` is always passed: without it the broker uses ``./.noida-db`` relative to whatever the
current directory happens to be. The broker's stdout/stderr go to ``DIR/broker.log`` (the binary
prints a harmless GLIBC "weak version" warning there on some systems), and this module records the
pid and port in ``DIR/iqmesh-broker.json`` so that ``broker_status``/``stop_broker`` can find it
again from another process.

The production target is Apache Kafka; nothing in the runtime depends on this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BrokerError",
    "BrokerHandle",
    "LOG_FILE",
    "STATE_FILE",
    "broker_status",
    "find_noida_binary",
    "free_port",
    "start_broker",
    "stop_broker",
    "wait_for_broker",
]

STATE_FILE = "iqmesh-broker.json"
LOG_FILE = "broker.log"
HOST = "127.0.0.1"
_BINARY_NAME = "noida-db.exe" if os.name == "nt" else "noida-db"
_INSTALL_HINT = "install it with `pip install -e '.[dev]'` (or `pip install noida-db==0.2.3`)"

# Brokers started by this process: kept so they can be reaped (no zombies, no ResourceWarning).
_children: dict[int, subprocess.Popen[bytes]] = {}


class BrokerError(RuntimeError):
    """The dev broker could not be found, started, reached or stopped."""


@dataclass(frozen=True)
class BrokerHandle:
    """A running dev broker: where to connect, its process id and its data directory."""

    bootstrap: str
    pid: int
    data_dir: Path


def find_noida_binary() -> str:
    """Return the path of the ``noida-db`` executable.

    Looks, in order, at the binary inside the installed ``noida_db`` package (the console script
    is only a Python wrapper that runs it as a child process), next to ``sys.executable`` (the
    active virtualenv's ``bin``), then on ``PATH``.
    """
    candidates: list[Path] = []
    try:
        import noida_db  # type: ignore[import-not-found]

        candidates.append(Path(noida_db.__file__).parent / _BINARY_NAME)
    except ImportError:
        pass
    candidates.append(Path(sys.executable).parent / _BINARY_NAME)
    for candidate in candidates:
        if candidate.is_file():
            if not os.access(candidate, os.X_OK):
                with contextlib.suppress(OSError):
                    candidate.chmod(candidate.stat().st_mode | 0o111)
            if os.access(candidate, os.X_OK):
                return str(candidate)
    on_path = shutil.which(_BINARY_NAME)
    if on_path:
        return on_path
    raise BrokerError(
        f"the dev broker binary {_BINARY_NAME!r} was not found (looked in the noida_db package, "
        f"next to {sys.executable} and on PATH); {_INSTALL_HINT}"
    )


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _split_bootstrap(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit():
        raise BrokerError(f"bootstrap {bootstrap!r} is not of the form host:port")
    return host.strip("[]") or HOST, int(port)


def _tcp_ok(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=max(timeout, 0.05)):
            return True
    except OSError:
        return False


def wait_for_broker(bootstrap: str, timeout: float) -> None:
    """Block until ``bootstrap`` accepts TCP connections and answers a metadata request.

    Raises ``BrokerError`` if that does not happen within ``timeout`` seconds.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    host, port = _split_bootstrap(bootstrap)
    deadline = time.monotonic() + timeout
    last_error = "no TCP connection"
    admin: AdminClient | None = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if _tcp_ok(host, port, min(1.0, remaining)):
            if admin is None:
                # Created only once TCP works, so librdkafka does not log connection-refused noise.
                admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
            try:
                admin.list_topics(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                return
            except KafkaException as exc:
                last_error = f"metadata request failed: {exc}"
        else:
            last_error = f"no TCP connection to {host}:{port}"
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    raise BrokerError(
        f"Kafka broker at {bootstrap} not ready after {timeout:.1f}s ({last_error}); "
        "is it running and is the address right?"
    )


def _pid_alive(pid: int) -> bool:
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        _children.pop(pid, None)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie still answers kill(0); it is not a running broker
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _is_our_broker(pid: int, data_dir: Path) -> bool:
    """Guard against pid reuse: the process must be noida-db serving ``data_dir`` (where /proc exists)."""
    if not _pid_alive(pid):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (e.g. macOS): trust the pid file
    args = [a.decode(errors="replace") for a in argv if a]
    return any("noida-db" in a for a in args[:2]) and str(data_dir) in args


def _read_state(data_dir: Path) -> dict[str, object] | None:
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _write_state(data_dir: Path, state: dict[str, object]) -> None:
    tmp = data_dir / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, data_dir / STATE_FILE)


def _log_tail(data_dir: Path, start: int = 0, lines: int = 25) -> str:
    try:
        with open(data_dir / LOG_FILE, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
    except OSError:
        return "(no broker.log)"
    tail = [line for line in text.splitlines() if "weak version" not in line][-lines:]
    return "\n".join(tail) if tail else "(broker.log is empty)"


def broker_status(data_dir: Path) -> BrokerHandle | None:
    """Return the broker recorded in ``data_dir`` if its process is alive, else ``None``.

    Only the process is checked; use ``wait_for_broker`` to know it answers requests.
    """
    data_dir = Path(data_dir).resolve()
    state = _read_state(data_dir)
    if state is None:
        return None
    try:
        pid = int(str(state["pid"]))
        bootstrap = str(state["bootstrap"])
    except (KeyError, ValueError):
        return None
    if not _is_our_broker(pid, data_dir):
        return None
    return BrokerHandle(bootstrap=bootstrap, pid=pid, data_dir=data_dir)


def start_broker(data_dir: Path, port: int | None = None, timeout: float = 30.0) -> BrokerHandle:
    """Start a detached noida-db Kafka broker on 127.0.0.1 with its data in ``data_dir``.

    Returns once the broker answers a metadata request. If a broker recorded in ``data_dir`` is
    already alive it is returned instead (``port`` must then be ``None`` or its port). ``port``
    defaults to a free port. Raises ``BrokerError`` with the tail of ``broker.log`` on failure.
    """
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)

    existing = broker_status(data_dir)
    if existing is not None:
        existing_port = _split_bootstrap(existing.bootstrap)[1]
        if port is not None and port != existing_port:
            raise BrokerError(
                f"a broker for {data_dir} is already running on port {existing_port} (pid "
                f"{existing.pid}); stop it first (stop_broker) or ask for port {existing_port}"
            )
        wait_for_broker(existing.bootstrap, timeout)
        return existing
    _check_foreign_server(data_dir)

    if port is None:
        port = free_port()
    elif _tcp_ok(HOST, port, 0.2):
        raise BrokerError(f"port {port} on {HOST} is already in use: pick another --port (or leave --port out "
                          "and a free one is picked)")

    binary = find_noida_binary()
    cmd = [binary, "start", "--only", "kafka", "--host", HOST, "--kafka-port", str(port),
           "--data-dir", str(data_dir)]
    log_path = data_dir / LOG_FILE
    with open(log_path, "ab") as log:
        log_start = log.tell()
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=data_dir, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            raise BrokerError(f"could not run {binary}: {exc}; {_INSTALL_HINT}") from exc
    _children[proc.pid] = proc
    bootstrap = f"{HOST}:{port}"
    _write_state(data_dir, {"pid": proc.pid, "port": port, "bootstrap": bootstrap,
                            "binary": binary, "started_at": time.time()})

    try:
        deadline = time.monotonic() + timeout
        host, _ = _split_bootstrap(bootstrap)
        while True:
            if proc.poll() is not None:
                raise BrokerError(
                    f"noida-db exited with code {proc.returncode} during start-up "
                    f"(command: {' '.join(cmd)}).\nLast lines of {log_path}:\n"
                    f"{_log_tail(data_dir, log_start)}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrokerError(
                    f"noida-db did not become ready on {bootstrap} within {timeout:.1f}s; "
                    f"raise the timeout or check {log_path}:\n{_log_tail(data_dir, log_start)}"
                )
            if _tcp_ok(host, port, min(0.5, remaining)):
                try:
                    wait_for_broker(bootstrap, max(0.1, deadline - time.monotonic()))
                except BrokerError as exc:
                    raise BrokerError(f"{exc}\nLast lines of {log_path}:\n"
                                      f"{_log_tail(data_dir, log_start)}") from None
                return BrokerHandle(bootstrap=bootstrap, pid=proc.pid, data_dir=data_dir)
            time.sleep(0.02)
    except BaseException:
        _terminate(proc.pid, 5.0)
        with contextlib.suppress(OSError):
            (data_dir / STATE_FILE).unlink()
        raise


def _check_foreign_server(data_dir: Path) -> None:
    """Refuse to start when a noida-db we did not record (e.g. ``noida-db up``) owns ``data_dir``."""
    try:
        control = json.loads((data_dir / "noida.control.json").read_text())
        pid = int(control["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if pid != os.getpid() and _pid_alive(pid) and _is_our_broker(pid, data_dir):
        raise BrokerError(
            f"another noida-db (pid {pid}) is already serving {data_dir}; stop it with "
            f"`noida-db down --data-dir {data_dir}` or use a different data dir"
        )


def _signal(pid: int, sig: signal.Signals) -> None:
    """Signal the broker's process group (it leads its own session), else the process alone."""
    try:
        if hasattr(os, "killpg") and os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_exit(pid: int, timeout: float) -> bool:
    child = _children.get(pid)
    if child is not None:
        try:
            child.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            return False
        _children.pop(pid, None)
        return True
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _terminate(pid: int, timeout: float) -> None:
    if not _pid_alive(pid):
        _children.pop(pid, None)
        return
    _signal(pid, signal.SIGTERM)
    if not _wait_exit(pid, timeout):
        _signal(pid, signal.SIGKILL)
        if not _wait_exit(pid, 5.0):
            raise BrokerError(f"noida-db (pid {pid}) survived SIGKILL; check the process by hand")


def stop_broker(data_dir: Path, timeout: float = 15.0) -> bool:
    """Stop the broker recorded in ``data_dir``: SIGTERM, then SIGKILL after ``timeout`` seconds.

    Returns ``True`` if a running broker was stopped, ``False`` if none was running.
    """
    data_dir = Path(data_dir).resolve()
    handle = broker_status(data_dir)
    if handle is not None:
        _terminate(handle.pid, timeout)
    with contextlib.suppress(OSError):
        (data_dir / STATE_FILE).unlink()
    return handle is not None
