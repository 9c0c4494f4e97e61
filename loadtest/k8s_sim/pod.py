"""One pod and the kubelet's part for it: the container started in the pod's network namespace,
restarted when it exits or its liveness/startup probe fails (with Kubernetes' back-off), probes
run on their periods, readiness from the readiness probe once started, and termination as
Kubernetes does it: out of the endpoints, SIGTERM, SIGKILL after the grace period."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.k8s_sim.network import Sandbox
from loadtest.k8s_sim.probes import Probe

#: CrashLoopBackOff: a first restart at once, then 10 s doubling to 5 minutes, reset after 10 minutes
#: of running
BACKOFF_S, BACKOFF_MAX_S, BACKOFF_RESET_S = 10.0, 300.0, 600.0

EventSink = Callable[[str, str, str], None]  # (event, pod, detail)


@dataclass
class Pod:
    name: str
    ordinal: int
    revision: int
    argv: list[str]
    env: Mapping[str, str]
    probes: Mapping[str, Probe]
    grace_s: float
    box: Sandbox
    log_path: Path
    cwd: Path
    on_event: EventSink
    started: bool = False
    ready: bool = False
    ready_since: float | None = None
    restarts: int = 0
    terminating: bool = False
    exit_codes: list[int] = field(default_factory=list)
    #: probe kind -> executions so far, over every container of the pod (a test waits on these to
    #: know the kubelet has looked, instead of sleeping for some periods)
    probe_runs: dict[str, int] = field(default_factory=dict)
    _proc: subprocess.Popen[bytes] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._kubelet, name=f"kubelet-{self.name}", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int | None:
        p = self._proc
        return p.pid if p is not None and p.poll() is None else None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the container's process (kill -9 from outside: the kubelet restarts it)."""
        p = self._proc
        if p is not None and p.poll() is None:
            self.on_event("signal", self.name, signal.Signals(sig).name)
            p.send_signal(sig)

    def terminate(self, grace_s: float | None = None) -> int | None:
        """Delete the pod: not ready at once, SIGTERM, SIGKILL after the grace period. Returns the
        container's exit status (negative: killed by that signal)."""
        self.terminating = True
        self._set_ready(False, "terminating")
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        rc = self._stop_container(self.grace_s if grace_s is None else grace_s)
        self.on_event("terminated", self.name, f"exit {rc}")
        return rc

    # -- the kubelet ------------------------------------------------------------------------------
    def _kubelet(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            began = time.monotonic()
            self._run_container()
            if self._supervise():
                return
            ran = time.monotonic() - began
            # the first restart is at once, then 10 s, 20 s, ... (reset after a long run)
            backoff = 0.0 if ran > BACKOFF_RESET_S or self.restarts == 0 else \
                min(BACKOFF_MAX_S, max(BACKOFF_S, backoff * 2))
            self.restarts += 1
            self.on_event("back-off", self.name, f"restart {self.restarts} in {backoff:.0f} s")
            if self._stop.wait(backoff):
                return

    def _run_container(self) -> None:
        self.started = "startup" not in self.probes
        with self._lock:
            log = open(self.log_path, "ab")
            try:
                self._proc = subprocess.Popen([*self.box.enter(), *self.argv], env=dict(self.env), cwd=self.cwd,
                                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True)
            finally:
                log.close()
        self.on_event("container started", self.name, f"pid {self._proc.pid} at {self.box.ip}")

    def _supervise(self) -> bool:
        """Run the probes until the container must restart (False) or the pod is deleted (True)."""
        assert self._proc is not None
        t0 = time.monotonic()
        due = {k: t0 + p.initial_delay_s for k, p in self.probes.items()}
        fails = dict.fromkeys(self.probes, 0)
        oks = dict.fromkeys(self.probes, 0)
        while not self._stop.is_set():
            rc = self._proc.poll()
            if rc is not None:
                self.exit_codes.append(rc)
                self._set_ready(False, f"container exited {rc}")
                self.on_event("container exited", self.name, str(rc))
                return False
            now = time.monotonic()
            for kind in self._active_probes():
                if now < due[kind]:
                    continue
                probe = self.probes[kind]
                ok = probe.run(self.box, self.env)
                self.probe_runs[kind] = self.probe_runs.get(kind, 0) + 1
                due[kind] = time.monotonic() + probe.period_s
                fails[kind], oks[kind] = (0, oks[kind] + 1) if ok else (fails[kind] + 1, 0)
                if kind == "startup" and ok:
                    self.started = True
                    self.on_event("started", self.name, f"after {time.monotonic() - t0:.1f} s")
                elif kind == "readiness":
                    if ok and oks[kind] >= probe.success_threshold:
                        self._set_ready(True, "readiness probe")
                    elif not ok and fails[kind] >= probe.failure_threshold:
                        self._set_ready(False, "readiness probe failed")
                if kind in ("startup", "liveness") and fails[kind] >= probe.failure_threshold:
                    self.on_event(f"{kind} probe failed", self.name, f"{fails[kind]} times: restarting the container")
                    self._set_ready(False, f"{kind} probe failed")
                    self.exit_codes.append(self._stop_container(self.grace_s) or 0)
                    return False
            if self.started and "readiness" not in self.probes:
                self._set_ready(True, "started, no readiness probe")
            self._stop.wait(0.05)
        return True

    def _active_probes(self) -> list[str]:
        if not self.started:
            return ["startup"] if "startup" in self.probes else []
        return [k for k in ("liveness", "readiness") if k in self.probes]

    def _set_ready(self, ready: bool, why: str) -> None:
        if ready != self.ready:
            self.ready = ready
            self.ready_since = time.monotonic() if ready else None
            self.on_event("ready" if ready else "not ready", self.name, why)

    def _stop_container(self, grace_s: float) -> int | None:
        p = self._proc
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                return p.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.on_event("grace period over", self.name, f"SIGKILL after {grace_s:.0f} s")
                os.killpg(p.pid, signal.SIGKILL)
        return p.wait()
