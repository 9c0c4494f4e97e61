"""Kafka Streams as the oracle: build the Java program in ``tests/oracle/kstreams`` (once; the jar
is reused while it is newer than its sources) and run a batch of scenarios through Kafka Streams'
own TopologyTestDriver in one JVM."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

MODULE = Path(__file__).resolve().parent / "kstreams"
JAR = MODULE / "target" / "kstreams-oracle.jar"
LIB = MODULE / "target" / "lib"


class OracleUnavailable(RuntimeError):
    """Maven or Java is missing, or the build failed."""


def _sources_mtime() -> float:
    files = [MODULE / "pom.xml", *(MODULE / "src").rglob("*.java")]
    return max(f.stat().st_mtime for f in files)


def build_jar() -> Path:
    """``mvn -q -B package`` unless the jar is newer than the pom and every source file."""
    if JAR.exists() and LIB.is_dir() and JAR.stat().st_mtime >= _sources_mtime():
        return JAR
    mvn = shutil.which("mvn")
    if mvn is None or shutil.which("java") is None:
        raise OracleUnavailable("the Kafka Streams oracle needs Maven (mvn) and Java 17+ on PATH")
    # copy-dependencies adds to lib/ and never removes: a release bump would leave the old jars
    # beside the new ones on the classpath
    shutil.rmtree(LIB, ignore_errors=True)
    proc = subprocess.run([mvn, "-q", "-B", "package"], cwd=MODULE, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0 or not JAR.exists():
        raise OracleUnavailable(f"mvn package failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                                f"{proc.stderr[-4000:]}")
    os.utime(JAR)  # newer than every source even when Maven left the jar as it was
    return JAR


def run_batch(scenarios: list[dict[str, Any]], timeout: float | None = None) -> list[dict[str, Any]]:
    """Every scenario through Kafka Streams' driver, in one JVM; results in the same order.
    The default timeout grows with the batch (a long run of 2000 scenarios took over 600 s on a
    busy 2-core machine)."""
    if timeout is None:
        timeout = 600 + 2 * len(scenarios)
    jar = build_jar()
    proc = subprocess.run(["java", "-Xss4m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                           "-cp", f"{jar}{os.pathsep}{LIB}/*", "iqmesh.oracle.Oracle"],
                          input=json.dumps({"scenarios": scenarios}), capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the oracle failed ({proc.returncode}): {proc.stderr[-4000:]}")
    results: list[dict[str, Any]] = json.loads(proc.stdout)["results"]
    return results
