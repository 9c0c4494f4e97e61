"""A local Schema Registry: Apicurio Registry built from Maven Central, speaking Confluent's API.

The Maven project in ``instance/local/apicurio/`` turns the registry's application module into a
runnable Quarkus jar; it is built once with ``mvn package`` into ``$IQMESH_CACHE`` (default
``~/.cache/iqmesh``), keyed by a hash of the project's files, and later starts run ``java -jar`` on
it with no network. Storage is in memory (each start is an empty registry). Clients use
``handle.url`` (``http://127.0.0.1:PORT/apis/ccompat/v7``) as ``schema.registry.url``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from instance.local.broker import HOST, free_port
from instance.local.kafka_broker import file_lock

__all__ = ["APICURIO_VERSION", "RegistryError", "RegistryHandle", "registry_jar", "start_registry"]

PROJECT = Path(__file__).with_name("apicurio")
APICURIO_VERSION = "2.4.2.Final"  # keep equal to apicurio.version in the pom
CCOMPAT = "/apis/ccompat/v7"
_RUNNER = "iqmesh-apicurio-registry-1-runner.jar"
_HEAP = ["-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


class RegistryError(RuntimeError):
    """The registry could not be built or started; the message says why."""


def _cache_dir() -> Path:
    return Path(os.environ.get("IQMESH_CACHE") or Path.home() / ".cache" / "iqmesh")


def _project_files() -> list[Path]:
    return sorted(p for p in PROJECT.rglob("*") if p.is_file() and "target" not in p.parts)


def _project_hash() -> str:
    h = hashlib.sha256()
    for p in _project_files():
        h.update(str(p.relative_to(PROJECT)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise RegistryError(f"{tool} was not found on PATH: the Schema Registry needs Java 17+ and Maven "
                            "(Debian: apt-get install openjdk-17-jdk-headless maven)")
    return path


def registry_jar() -> Path:
    """The runnable registry jar (its ``lib/`` beside it), built with Maven on first use."""
    home = _cache_dir() / f"apicurio-{APICURIO_VERSION}-{_project_hash()}"
    jar = home / "app" / _RUNNER
    if jar.is_file():
        return jar
    _require("java")
    mvn = _require("mvn")
    with file_lock(home / ".lock"):
        if jar.is_file():
            return jar
        build = home / "build"
        shutil.rmtree(build, ignore_errors=True)
        for p in _project_files():
            dest = build / p.relative_to(PROJECT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest)
        cmd = [mvn, "-q", "-B", "package"]
        proc = subprocess.run(cmd, cwd=build, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            out = (proc.stdout + proc.stderr).strip().splitlines()[-20:]
            raise RegistryError(f"Maven could not build Apicurio Registry {APICURIO_VERSION} in {build}:\n"
                                + "\n".join(out))
        tmp = home / "app.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        shutil.copyfile(build / "target" / _RUNNER, tmp / _RUNNER)
        shutil.copytree(build / "target" / "lib", tmp / "lib")
        shutil.rmtree(home / "app", ignore_errors=True)
        os.replace(tmp, home / "app")
        shutil.rmtree(build, ignore_errors=True)
    return jar


@dataclass
class RegistryHandle:
    """A running registry. ``url`` is what ``schema.registry.url`` takes."""

    port: int
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{CCOMPAT}"

    def stop(self, timeout: float = 20) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def start_registry(data_dir: Path, port: int = 0, timeout: float = 120) -> RegistryHandle:
    """Start a registry on ``port`` (a free one if 0) and return once its API answers; its log is
    ``data_dir/registry.log``."""
    jar = registry_jar()
    java = _require("java")
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_path = data_dir / "registry.log"
    cmd = [java, *_HEAP, f"-Dquarkus.http.port={port}", f"-Dquarkus.http.host={HOST}",
           "-Dquarkus.log.level=WARN", "-jar", str(jar)]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=data_dir, start_new_session=True, close_fds=True)
    handle = RegistryHandle(port, log_path, proc)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RegistryError(f"the registry exited with {proc.returncode}:\n{handle.log_tail()}")
        try:
            with urllib.request.urlopen(f"{handle.url}/subjects", timeout=2) as r:
                if r.status == 200:
                    return handle
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            handle.stop()
            raise RegistryError(f"the registry did not answer on {handle.url} within {timeout:.0f}s:\n"
                                f"{handle.log_tail()}")
        time.sleep(0.3)
