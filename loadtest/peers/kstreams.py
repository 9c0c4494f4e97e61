"""Kafka Streams on the JVM as the throughput benchmark's peer (issue 17).

The Maven module beside this file (``kstreams/``) is built once into ``$IQMESH_CACHE`` (default
``~/.cache/iqmesh``) under a folder named by a digest of its pom and sources: the jar and every
runtime dependency, so later runs start ``java -cp`` without Maven or the network, and an edited
source builds anew. A file lock keeps concurrent builds (tests, benchmarks) from racing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from instance.local.kafka_broker import file_lock

__all__ = ["MAIN", "JVM_OPTS", "PeerUnavailable", "build", "command"]

MODULE = Path(__file__).with_name("kstreams")
MAIN = "iqmesh.bench.KStreamsBench"
# a bounded heap, as one sets it in production; G1 is the JVM's default collector
JVM_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]


class PeerUnavailable(RuntimeError):
    """Java or Maven is missing, or the module did not build."""


def _cache_root() -> Path:
    return Path(os.environ.get("IQMESH_CACHE") or Path.home() / ".cache" / "iqmesh")


def _sources() -> list[Path]:
    return [MODULE / "pom.xml", *sorted((MODULE / "src").rglob("*.java"))]


def _digest() -> str:
    h = hashlib.sha256()
    for f in _sources():
        h.update(str(f.relative_to(MODULE)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build() -> Path:
    """The folder holding ``kstreams-peer.jar`` and ``lib/``: built with Maven on first use."""
    if shutil.which("java") is None:
        raise PeerUnavailable("the Kafka Streams peer needs Java 17+ (java) on PATH "
                              "(Debian: apt-get install openjdk-17-jre-headless)")
    home = _cache_root() / f"kstreams-peer-{_digest()}"
    done = home / "built"
    if done.is_file():
        return home
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PeerUnavailable("the Kafka Streams peer is built with Maven (mvn), not found on PATH "
                              "(Debian: apt-get install maven)")
    with file_lock(home.parent / ".kstreams-peer.lock"):
        if done.is_file():
            return home
        with tempfile.TemporaryDirectory(prefix="kstreams-peer-build-", dir=home.parent) as tmp:
            src = Path(tmp) / "module"
            shutil.copytree(MODULE, src, ignore=shutil.ignore_patterns("target"))
            proc = subprocess.run([mvn, "-q", "-B", "package"], cwd=src, capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=1200)
            jar = src / "target" / "kstreams-peer.jar"
            if proc.returncode != 0 or not jar.is_file():
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
                raise PeerUnavailable(f"mvn package of {MODULE} failed ({proc.returncode}):\n{tail}")
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            shutil.move(str(jar), home / jar.name)
            shutil.move(str(src / "target" / "lib"), home / "lib")
        done.write_text(_digest() + "\n")
    return home


def command(bootstrap: str, topic: str, n: int, mode: str, out: str, guarantee: str = "at-least-once",
            cache: bool = False, target: int | None = None, tag: str = "",
            timeout_s: int = 900, jvm_opts: list[str] | None = None) -> list[str]:
    """The ``java`` command line of one run (builds the peer first if needed); ``jvm_opts``: more
    JVM options after ``JVM_OPTS`` (a JFR recording, say)."""
    home = build()
    cmd = ["java", *JVM_OPTS, *(jvm_opts or []), "-cp", f"{home / 'kstreams-peer.jar'}{os.pathsep}{home / 'lib'}/*",
           MAIN,
           "--bootstrap", bootstrap, "--topic", topic, "-n", str(n), "--mode", mode, "--out", out,
           "--guarantee", guarantee, "--tag", tag, "--timeout-s", str(timeout_s)]
    if cache:
        cmd.append("--cache")
    if target is not None:
        cmd += ["--target", str(target)]
    return cmd
