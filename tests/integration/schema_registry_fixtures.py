"""What the Schema Registry tests share: a real registry (Apicurio, instance/local/schema_registry.py)
and the Java Avro peer (tests/integration/avro_peer), built once with Maven."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PEER = Path(__file__).resolve().parent / "avro_peer"
PEER_JAR = PEER / "target" / "avro-peer.jar"


def build_peer() -> str:
    """The peer's classpath; ``mvn -q -B package`` unless the jar is newer than its sources."""
    sources = [PEER / "pom.xml", *(PEER / "src").rglob("*.java")]
    if PEER_JAR.exists() and PEER_JAR.stat().st_mtime >= max(s.stat().st_mtime for s in sources):
        return f"{PEER_JAR}{os.pathsep}{PEER / 'target' / 'lib'}/*"
    mvn = shutil.which("mvn")
    assert mvn is not None, "the Avro peer needs Maven (mvn) and Java 17+"
    proc = subprocess.run([mvn, "-q", "-B", "package"], cwd=PEER, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and PEER_JAR.exists(), (
        f"mvn package failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    os.utime(PEER_JAR)
    return f"{PEER_JAR}{os.pathsep}{PEER / 'target' / 'lib'}/*"


def java_produce(classpath: str, bootstrap: str, registry_url: str, topic: str, schema: str,
                 records: Sequence[Mapping[str, object]]) -> int:
    """Writes ``records`` as the Java peer does; returns the schema id it registered."""
    proc = subprocess.run(["java", "-cp", classpath, "iqmesh.avropeer.AvroPeer", "produce", bootstrap,
                           registry_url, topic, schema],
                          input="".join(json.dumps(r) + "\n" for r in records), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return int(json.loads(proc.stdout.strip().splitlines()[-1])["schema_id"])


def java_consume(classpath: str, bootstrap: str, registry_url: str, topic: str, count: int,
                 timeout_ms: int = 60_000) -> list[dict[str, Any]]:
    """What the Java peer reads from ``topic`` (up to ``count`` records or the timeout)."""
    proc = subprocess.run(["java", "-cp", classpath, "iqmesh.avropeer.AvroPeer", "consume", bootstrap,
                           registry_url, topic, str(count), str(timeout_ms)],
                          capture_output=True, text=True, timeout=timeout_ms / 1000 + 60)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
