"""Run ``iqmesh gateway`` as a local process (the demo and the gateway tests) and wait until it is ready."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from instance.local.broker import free_port


@dataclass
class GatewayProcess:
    """``iqmesh gateway --bootstrap B --application-id A --port P`` (``seeds`` instead when given)."""

    bootstrap: str
    application_id: str
    log_path: Path
    port: int = 0
    seeds: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.port = self.port or free_port()
        cmd = [sys.executable, "-m", "iqmesh", "gateway", "--port", str(self.port)]
        cmd += ["--seeds", ",".join(self.seeds)] if self.seeds else [
            "--bootstrap", self.bootstrap, "--application-id", self.application_id]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child process
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()

    def wait_ready(self, timeout: float = 60.0) -> dict[str, object]:
        """Until /readyz answers 200 (its body); raises with the last answer and the log."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}\n{self.logs()}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=2) as r:
                    body: dict[str, object] = json.loads(r.read())
                    return body
            except urllib.error.HTTPError as e:
                last = e.read().decode(errors="replace")
            except OSError as e:
                last = str(e)
            time.sleep(0.2)
        raise TimeoutError(f"gateway not ready within {timeout}s: {last}\n{self.logs()}")

    def logs(self) -> str:
        return self.log_path.read_text()[-4000:] if self.log_path.exists() else ""

    def stop(self, timeout: float = 15.0) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
