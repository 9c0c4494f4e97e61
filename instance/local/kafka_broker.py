"""Apache Kafka itself as a local broker: resolved from Maven Central, KRaft, one or three nodes.

The release is pinned in ``instance/local/kafka/pom.xml`` and resolved once with Maven
(``dependency:copy-dependencies``) into ``$IQMESH_CACHE`` (default ``~/.cache/iqmesh``); later starts
run ``java -cp`` on that folder and touch no network. Each node is a combined broker + controller
(``process.roles=broker,controller``) with a static voter set, formatted once with Kafka's
``StorageTool``; a data directory that was formatted before is started as it is, so a stopped
cluster comes back with its topics, offsets and transactions.

Layout of ``DATA_DIR``: ``iqmesh-broker.json`` (engine, cluster id, ports, pids: what ``status`` and
``stop`` read), ``node-N/server.properties``, ``node-N/data`` (the log dirs) and ``node-N/broker.log``.
``brokers=3`` gives three nodes on consecutive ports with replication factor 3 and
``min.insync.replicas=2``, for failure tests; ``stop_node`` / ``start_node`` take one node down and
back up. ``sasl_ssl=True`` makes the client listener SASL_SSL with SCRAM-SHA-512 (a self-signed
certificate made with openssl, one user) as a secured production cluster is; the settings a client
needs are in ``DATA_DIR/client.properties`` (``client_properties``). Brokers talk to each other on a
plaintext loopback listener.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from instance.local.broker import HOST, STATE_FILE, BrokerError, BrokerHandle, free_port, wait_for_broker

__all__ = [
    "KAFKA_VERSION",
    "broker_status",
    "kafka_classpath",
    "maven_classpath",
    "node_pids",
    "start_broker",
    "start_node",
    "wanted_version",
    "stop_broker",
    "stop_node",
]

POM = Path(__file__).with_name("kafka") / "pom.xml"
KAFKA_VERSION = "4.4.0"  # keep equal to kafka.version in the pom
VERSION_ENV = "IQMESH_KAFKA_VERSION"  # another release for a new cluster (CI's oldest supported one)
ENGINE = "kafka"
_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c{1})%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
# one line when a node is up, nothing per request
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = info
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = info
"""
_HEAP = ["-Xms128m", "-Xmx768m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true"]


def _cache_dir() -> Path:
    return Path(os.environ.get("IQMESH_CACHE") or Path.home() / ".cache" / "iqmesh")


def _require(tool: str, what: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise BrokerError(f"{tool} was not found on PATH: Apache Kafka needs {what} "
                          "(Debian: apt-get install openjdk-17-jre-headless maven)")
    return path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (tests and CLI may resolve or start at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def wanted_version() -> str:
    """The release a new cluster runs: ``$IQMESH_KAFKA_VERSION``, else the pinned one."""
    return os.environ.get(VERSION_ENV) or KAFKA_VERSION


def kafka_classpath(version: str | None = None) -> Path:
    """The folder of jars of a Kafka release (the pinned one by default), resolved with Maven on
    first use."""
    version = version or wanted_version()
    return maven_classpath(POM, f"kafka-{version}", version, f"Apache Kafka {version}")


def maven_classpath(pom: Path, name: str, version: str, what: str) -> Path:
    """The runtime jars of ``pom`` (``-Dkafka.version=version``) copied once with Maven into
    ``$IQMESH_CACHE/<name>/lib`` (under a lock: tests and the CLI may ask at once); later calls
    touch no network."""
    lib = _cache_dir() / name / "lib"
    done = lib.parent / "resolved"
    if done.is_file():
        return lib
    _require("java", "a Java 17+ runtime")
    mvn = _require("mvn", "Maven to resolve it from Maven Central")
    with file_lock(lib.parent / ".lock"):
        if done.is_file():
            return lib
        tmp = lib.parent / "lib.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
               f"-Dkafka.version={version}", f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"]
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            out = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
            raise BrokerError(f"Maven could not resolve {what} ({' '.join(cmd)}):\n" + "\n".join(out))
        shutil.rmtree(lib, ignore_errors=True)
        os.replace(tmp, lib)
        done.write_text(version + "\n")
    return lib


@dataclass(frozen=True)
class _Node:
    node_id: int
    port: int
    controller_port: int
    internal_port: int = 0  # the brokers' own listener when clients go through SASL_SSL


SCRAM_USER = "iqmesh"
CLIENT_PROPERTIES = "client.properties"


def _cluster_id() -> str:
    """A random id, never one starting with "-": the storage tool would read it as an option
    (1 run in 64 failed so; Kafka's own Uuid.randomUuid redraws such ids too)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _listeners(data_dir: Path, node: _Node) -> dict[str, object]:
    if not node.internal_port:
        return {
            "listeners": f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{node.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        }
    return {
        "listeners": f"SASL_SSL://{HOST}:{node.port},INTERNAL://{HOST}:{node.internal_port},"
                     f"CONTROLLER://{HOST}:{node.controller_port}",
        "advertised.listeners": f"SASL_SSL://{HOST}:{node.port},INTERNAL://{HOST}:{node.internal_port}",
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": data_dir / "tls" / "keystore.pem",
    }


def _properties(data_dir: Path, node: _Node, nodes: list[_Node]) -> str:
    replicas = len(nodes)
    min_isr = 2 if replicas >= 3 else 1
    voters = ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in nodes)
    settings = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        **_listeners(data_dir, node),
        "log.dirs": data_dir / f"node-{node.node_id}" / "data",
        "num.partitions": 1,
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        # a test or a demo should not wait 3 s for the first rebalance of every group
        "group.initial.rebalance.delay.ms": 0,
        # the same for streams groups (KIP-1071; Kafka 4.2+, its GroupCoordinatorConfig)
        "group.streams.initial.rebalance.delay.ms": 0,
        "log.segment.bytes": 64 * 1024 * 1024,
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def _read_state(data_dir: Path) -> dict[str, object] | None:
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("engine") == ENGINE else None


def _write_state(data_dir: Path, state: dict[str, object]) -> None:
    tmp = data_dir / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, data_dir / STATE_FILE)


def _formatted_by(state: dict[str, object]) -> str:
    """The release that formatted the cluster: recorded since 4.4.0 became the default; every
    cluster formatted before ran 4.1.1."""
    return str(state.get("version") or "4.1.1")


def _nodes(state: dict[str, object]) -> list[_Node]:
    raw = state.get("nodes")
    assert isinstance(raw, list)
    return [_Node(int(n["node_id"]), int(n["port"]), int(n["controller_port"]), int(n.get("internal_port", 0)))
            for n in raw]


def _pid_of(data_dir: Path, node_id: int) -> int | None:
    """The live java process serving ``node-N`` of ``data_dir`` (pid files can outlive a reboot)."""
    try:
        pid = int((data_dir / f"node-{node_id}" / "pid").read_text())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    props = str(data_dir / f"node-{node_id}" / "server.properties").encode()
    if props not in argv or stat.rsplit(")", 1)[1].split()[0] == "Z":
        return None
    return pid


def node_pids(data_dir: Path) -> dict[int, int | None]:
    """node id -> pid of its running process (None when it is not running)."""
    data_dir = Path(data_dir).resolve()
    state = _read_state(data_dir)
    return {} if state is None else {n.node_id: _pid_of(data_dir, n.node_id) for n in _nodes(state)}


def _bootstrap(nodes: list[_Node]) -> str:
    return ",".join(f"{HOST}:{n.port}" for n in nodes)


def broker_status(data_dir: Path) -> BrokerHandle | None:
    """The cluster of ``data_dir`` when every node's process is alive, else ``None``."""
    data_dir = Path(data_dir).resolve()
    state = _read_state(data_dir)
    if state is None:
        return None
    pids = node_pids(data_dir)
    if not pids or any(p is None for p in pids.values()):
        return None
    return BrokerHandle(bootstrap=_bootstrap(_nodes(state)), pid=min(p for p in pids.values() if p),
                        data_dir=data_dir)


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def _java(lib: Path, main: str, *args: str) -> list[str]:
    return [_require("java", "a Java 17+ runtime"), *_HEAP, "-cp", f"{lib}/*", main, *args]


def _format(lib: Path, data_dir: Path, node: _Node, cluster_id: str, password: str) -> None:
    props = data_dir / f"node-{node.node_id}" / "server.properties"
    cmd = _java(lib, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
                "--ignore-formatted")
    if password:  # the SCRAM user is stored in the cluster metadata from the start
        cmd += ["--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={password}]"]
    env = {**os.environ, "KAFKA_LOG4J_OPTS": ""}
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
    if proc.returncode != 0:
        raise BrokerError(f"formatting KRaft storage of node {node.node_id} failed:\n"
                          f"{(proc.stdout + proc.stderr).strip()[-2000:]}")


def _spawn(lib: Path, data_dir: Path, node: _Node) -> None:
    node_dir = data_dir / f"node-{node.node_id}"
    (node_dir / "log4j2.properties").write_text(_LOG4J)
    cmd = _java(lib, "kafka.Kafka", str(node_dir / "server.properties"))
    cmd.insert(1, f"-Dlog4j2.configurationFile={node_dir / 'log4j2.properties'}")
    with open(node_dir / "broker.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=node_dir, start_new_session=True, close_fds=True)
    (node_dir / "pid").write_text(f"{proc.pid}\n")


def _wait_ready(data_dir: Path, nodes: list[_Node], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for node in nodes:
        while _pid_of(data_dir, node.node_id) is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        try:
            # the plaintext listener answers a plaintext probe: the internal one when clients use SASL_SSL
            wait_for_broker(f"{HOST}:{node.internal_port or node.port}", max(0.5, deadline - time.monotonic()))
        except BrokerError as exc:
            log = data_dir / f"node-{node.node_id}" / "broker.log"
            alive = _pid_of(data_dir, node.node_id) is not None
            raise BrokerError(f"Apache Kafka node {node.node_id} {'is not ready' if alive else 'exited'}: "
                              f"{exc}\nLast lines of {log}:\n{_log_tail(log)}") from None


def _make_tls(data_dir: Path) -> Path:
    """A self-signed certificate for 127.0.0.1/localhost; returns the CA file clients trust."""
    tls = data_dir / "tls"
    tls.mkdir(parents=True, exist_ok=True)
    cert, key = tls / "cert.pem", tls / "key.pem"
    openssl = shutil.which("openssl")
    if openssl is None:
        raise BrokerError("openssl was not found on PATH: it makes the SASL_SSL broker's certificate "
                          "(Debian: apt-get install openssl)")
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "365", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    (tls / "keystore.pem").write_text(key.read_text() + cert.read_text())
    return cert


def client_properties(data_dir: Path) -> dict[str, str]:
    """What a client needs to connect to the cluster of ``data_dir`` (empty for plaintext)."""
    path = Path(data_dir).resolve() / CLIENT_PROPERTIES
    if not path.is_file():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and line[0] != "#")
    return {k.strip(): v.strip() for k, v in pairs}


def start_broker(data_dir: Path, port: int | None = None, brokers: int = 1,
                 timeout: float = 120.0, sasl_ssl: bool = False) -> BrokerHandle:
    """Start (or return the running) Apache Kafka cluster of ``data_dir``, ready to serve.

    A new data directory is formatted (``brokers`` nodes on consecutive ports from ``port``, a free
    range by default; with ``sasl_ssl`` the client listener is SASL_SSL/SCRAM-SHA-512); one
    formatted before is started again with its recorded ports, security and data.
    """
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(data_dir / ".iqmesh-broker.lock"):
        state = _read_state(data_dir)
        # a formatted cluster comes back on the release that formatted it
        lib = kafka_classpath(_formatted_by(state) if state else None)
        if state is None:
            if (data_dir / STATE_FILE).exists():
                raise BrokerError(f"{data_dir} holds another broker's data; use another --data-dir")
            nodes = _new_nodes(port, brokers, sasl_ssl)
            state = {"engine": ENGINE, "version": wanted_version(), "cluster_id": _cluster_id(),
                     "nodes": [vars(n) for n in nodes], "bootstrap": _bootstrap(nodes)}
            password = ""
            if sasl_ssl:
                password = secrets.token_urlsafe(12)
                ca = _make_tls(data_dir)
                (data_dir / CLIENT_PROPERTIES).write_text(
                    "# what a client needs to reach this broker (iqmesh run/gateway --config-file)\n"
                    "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.username={SCRAM_USER}\nsasl.password={password}\nssl.ca.location={ca}\n")
            for node in nodes:
                node_dir = data_dir / f"node-{node.node_id}"
                node_dir.mkdir(parents=True, exist_ok=True)
                (node_dir / "server.properties").write_text(_properties(data_dir, node, nodes))
                _format(lib, data_dir, node, str(state["cluster_id"]), password)
            _write_state(data_dir, state)
        nodes = _nodes(state)
        if port is not None and port != nodes[0].port:
            raise BrokerError(f"{data_dir} holds a cluster on port {nodes[0].port}; ask for that port "
                              "or use another --data-dir")
        if brokers != len(nodes) and brokers != 1:
            raise BrokerError(f"{data_dir} holds a cluster of {len(nodes)} broker(s); use another --data-dir")
        for node in nodes:
            if _pid_of(data_dir, node.node_id) is None:
                _spawn(lib, data_dir, node)
        try:
            _wait_ready(data_dir, nodes, timeout)
        except BaseException:
            stop_broker(data_dir, timeout=10.0)
            raise
        handle = broker_status(data_dir)
        if handle is None:
            raise BrokerError(f"a node of {data_dir} exited right after start-up; see node-*/broker.log")
        return handle


def _port_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _new_nodes(port: int | None, brokers: int, sasl_ssl: bool = False) -> list[_Node]:
    if brokers < 1:
        raise BrokerError("--brokers must be at least 1")
    if port is None:
        for _ in range(50):
            first = free_port()
            if first + brokers < 65536 and all(_port_free(first + i) for i in range(brokers)):
                port = first
                break
        else:
            raise BrokerError(f"found no {brokers} consecutive free ports on {HOST}")
    busy = [p for p in range(port, port + brokers) if not _port_free(p)]
    if busy:
        raise BrokerError(f"port(s) {', '.join(map(str, busy))} on {HOST} already in use; pick another --port")
    others: list[int] = []  # controller (and internal) listeners
    wanted = brokers * (2 if sasl_ssl else 1)
    while len(others) < wanted:
        p = free_port()
        if not port <= p < port + brokers and p not in others:
            others.append(p)
    return [_Node(i + 1, port + i, others[i], others[brokers + i] if sasl_ssl else 0) for i in range(brokers)]


def _signal_node(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig) if os.getpgid(pid) == pid else os.kill(pid, sig)


def _wait_gone(data_dir: Path, node_id: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _pid_of(data_dir, node_id) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def stop_node(data_dir: Path, node_id: int, sig: signal.Signals = signal.SIGTERM,
              timeout: float = 30.0) -> bool:
    """Stop one node: ``sig`` (SIGTERM: a controlled shutdown; SIGKILL: a crash), then SIGKILL after
    ``timeout``. False if it was not running."""
    data_dir = Path(data_dir).resolve()
    pid = _pid_of(data_dir, node_id)
    if pid is None:
        return False
    _signal_node(pid, sig)
    if not _wait_gone(data_dir, node_id, timeout):
        _signal_node(pid, signal.SIGKILL)
        if not _wait_gone(data_dir, node_id, 10.0):
            raise BrokerError(f"Kafka node {node_id} (pid {pid}) survived SIGKILL")
    return True


def start_node(data_dir: Path, node_id: int, timeout: float = 120.0) -> None:
    """Start one stopped node of ``data_dir`` again and wait until it answers."""
    data_dir = Path(data_dir).resolve()
    state = _read_state(data_dir)
    if state is None:
        raise BrokerError(f"no Apache Kafka cluster in {data_dir}")
    node = next(n for n in _nodes(state) if n.node_id == node_id)
    if _pid_of(data_dir, node_id) is None:
        _spawn(kafka_classpath(_formatted_by(state)), data_dir, node)
    _wait_ready(data_dir, [node], timeout)


def stop_broker(data_dir: Path, timeout: float = 30.0) -> bool:
    """Stop every node of ``data_dir`` (controlled shutdown, SIGKILL after ``timeout``); the data stays.

    True if any node was running."""
    data_dir = Path(data_dir).resolve()
    pids = node_pids(data_dir)
    running = [n for n, p in pids.items() if p is not None]
    # signal all first: a controlled shutdown of the last nodes waits for a quorum otherwise
    for node_id in running:
        pid = _pid_of(data_dir, node_id)
        if pid is not None:
            _signal_node(pid, signal.SIGTERM)
    for node_id in running:
        stop_node(data_dir, node_id, timeout=timeout)
    return bool(running)
