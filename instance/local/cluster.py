"""Run several instances of an application as local processes (the demo and integration tests).

Each instance is a real ``iqmesh run`` process with its own state dir and gRPC port.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from instance.kafka_errors import is_topic_exists
from instance.local.broker import free_port
from instance.runtime.holds import HOLDS_ENV, Hold
from kernel.instance_state import State
from kernel.kafka_clients import produce_when_room
from kernel.kafka_log import client_logging
from kernel.ports import PortInUseError, check_port_free
from kernel.security import Security
from kernel.wire_enums import state_of

WORDS = ("kafka streams table stream state store query mesh router partition task thread commit "
         "offset changelog standby replica rebalance restore window join cache punctuate record "
         "key value topic broker consumer producer group python rocksdb grpc instance").split()


def sample_lines(n: int, seed: int = 7) -> list[str]:
    """Lines of 3–12 words with punctuation and mixed case (the word-count demo input)."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rnd.choice(WORDS) for _ in range(rnd.randint(3, 12))]
        words = [w.upper() if rnd.random() < 0.1 else w for w in words]
        out.append(" ".join(words) + rnd.choice([".", "!", "?", ",", ""]))
    return out


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0,
                 kafka: Mapping[str, str] | None = None, replication: int = 1) -> None:
    """Create ``topic`` unless it exists; ``kafka``: client settings (security.protocol, sasl.*...)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(kafka or {})})
    if topic not in admin.list_topics(timeout=10).topics:
        fut = admin.create_topics([NewTopic(topic, partitions, replication)])[topic]
        try:
            fut.result()
        except Exception as e:
            if not is_topic_exists(e):
                raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready")


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes]],
            kafka: Mapping[str, str] | None = None) -> int:
    """Write ``records`` to ``topic``, each exactly once (idempotent: a retry under load never doubles
    one), and raise if any was not delivered; returns how many were written."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "partitioner": "murmur2_random",
                  "enable.idempotence": True, **client_logging(), **(kafka or {})})
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err)
    n = 0
    for k, v in records:
        produce_when_room(p, topic, v, k, on_delivery=delivered)
        n += 1
    if p.flush(60) or failed:
        raise RuntimeError(f"not every record was acknowledged: {failed[:1] or 'flush timed out'}")
    return n


@dataclass
class Instance:
    instance_id: str
    port: int
    state_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


def _still_free(port: int) -> bool:
    """Whether ``port`` on 127.0.0.1 may still be bound as the instance's server binds it."""
    try:
        check_port_free("127.0.0.1", port)
    except PortInUseError:
        return False
    return True


@dataclass
class LocalCluster:
    bootstrap: str
    app_file: str
    application_id: str
    base_dir: Path
    size: int = 3
    extra_config: Sequence[str] = ()
    env: dict[str, str] = field(default_factory=dict)
    #: instance id -> extra --config items for that instance only
    per_instance_config: dict[str, list[str]] = field(default_factory=dict)
    instances: list[Instance] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.instances:
            for i in range(self.size):
                iid = f"{self.application_id}-{i}"
                d = self.base_dir / iid
                self.instances.append(Instance(iid, free_port(), d / "state", d / "instance.log"))

    def start(self, which: Iterable[int] | None = None) -> None:
        for i in (range(len(self.instances)) if which is None else which):
            inst = self.instances[i]
            inst.state_dir.mkdir(parents=True, exist_ok=True)
            if not _still_free(inst.port):
                # picked at construction from the ephemeral range, where another process's
                # outgoing connection may have taken it since (a busy machine): a new one
                inst.port = free_port()
            cmd = [sys.executable, "-m", "iqmesh", "run", self.app_file,
                   "--application-id", self.application_id, "--instance-id", inst.instance_id,
                   "--bootstrap", self.bootstrap, "--grpc-port", str(inst.port),
                   "--state-dir", str(inst.state_dir)]
            for c in [*self.extra_config, *self.per_instance_config.get(inst.instance_id, [])]:
                cmd += ["--config", c]
            log = open(inst.log_path, "ab")  # noqa: SIM115 - owned by the child process
            env = {**os.environ, "PYTHONUNBUFFERED": "1", HOLDS_ENV: str(self._holds_dir(inst)), **self.env}
            inst.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            log.close()

    def _holds_dir(self, inst: Instance) -> Path:
        return inst.state_dir.parent / "holds"

    def hold(self, hold: Hold, which: Iterable[int] | None = None) -> None:
        """Keep the instances (all, or ``which``) from taking the step ``hold`` until
        :meth:`release` (instance/runtime/holds.py); may come before or after their start."""
        for i in (range(len(self.instances)) if which is None else which):
            d = self._holds_dir(self.instances[i])
            d.mkdir(parents=True, exist_ok=True)
            (d / hold.value).touch()

    def release(self, hold: Hold, which: Iterable[int] | None = None) -> None:
        for i in (range(len(self.instances)) if which is None else which):
            (self._holds_dir(self.instances[i]) / hold.value).unlink(missing_ok=True)

    def signal(self, i: int, sig: int = signal.SIGTERM) -> None:
        p = self.instances[i].proc
        if p is not None and p.poll() is None:
            p.send_signal(sig)

    def wait_stopped(self, i: int, timeout: float = 10.0) -> None:
        """After SIGSTOP: until every thread of instance ``i`` is stopped (Linux's ``T`` state in
        /proc; a thread busy in the kernel stops only when it leaves it)."""
        p = self.instances[i].proc
        assert p is not None
        deadline = time.monotonic() + timeout
        while True:
            states = []
            for stat in Path(f"/proc/{p.pid}/task").glob("*/stat"):
                try:
                    states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
                except (OSError, IndexError):
                    continue  # a thread that just ended
            if states and all(s == "T" for s in states):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.instances[i].instance_id} not stopped within {timeout}s: "
                                   f"thread states {sorted(states)}")
            time.sleep(0.01)

    def wait_exit(self, i: int, timeout: float = 60.0) -> int:
        p = self.instances[i].proc
        assert p is not None
        return p.wait(timeout)

    def running(self) -> list[Instance]:
        return [x for x in self.instances if x.proc is not None and x.proc.poll() is None]

    def stop(self, timeout: float = 60.0) -> None:
        for i, inst in enumerate(self.instances):
            if inst.proc is not None and inst.proc.poll() is None:
                self.signal(i, signal.SIGTERM)
        for inst in self.instances:
            if inst.proc is not None:
                try:
                    inst.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    inst.proc.kill()
                    inst.proc.wait(10)

    @property
    def client_security(self) -> Security:
        """What a client needs to reach these instances: their TLS and token settings."""
        return Security.from_properties(dict(c.split("=", 1) for c in self.extra_config if "=" in c))

    def logs(self) -> str:
        out = []
        for inst in self.instances:
            if inst.log_path.exists():
                out.append(f"--- {inst.instance_id}\n" + inst.log_path.read_text()[-4000:])
        return "\n".join(out)

    def wait_running(self, timeout: float = 90.0, expected: int | None = None,
                     progress: Callable[[str], None] | None = None) -> None:
        """Until every live instance reports RUNNING with all tasks assigned and restored (and,
        when the broker places them, every instance holding some); ``progress`` hears what is
        still awaited every 10 s."""
        from router.client.sync_client import QueryClient

        want = expected if expected is not None else len(self.running())
        started = time.monotonic()
        deadline = started + timeout
        next_report = started + 10
        last = ""
        while time.monotonic() < deadline:
            if progress is not None and last and time.monotonic() >= next_report:
                progress(f"still waiting after {time.monotonic() - started:.0f}s: {last}")
                next_report += 10
            running = self.running()
            if len(running) < want:
                last = f"{len(running)} of {want} instances alive"
                time.sleep(0.3)
                continue
            for inst in running:
                try:
                    with QueryClient(inst.target, timeout=2, security=self.client_security) as c:
                        md = c.metadata()
                except Exception as e:
                    last = str(e)
                    break
                alive = [i for i in md.instances if i.alive and state_of(i.state) is State.RUNNING]
                if len(alive) != want or any(i.restoring_tasks for i in alive):
                    seen = [(i.instance_id, state_of(i.state).name, i.alive) for i in md.instances]
                    last = f"{inst.instance_id} sees {seen}"
                    break
                owned = [t for i in alive for t in i.active_tasks]
                total = sum(md.store_partitions.values())
                if len(owned) < total or len(set(owned)) != len(owned):
                    last = f"tasks not settled: {sorted(owned)}"
                    break
                if self._broker_assigns and total >= want and any(not i.active_tasks for i in alive):
                    # the streams protocol gives the first member every task and the joiners
                    # theirs a heartbeat interval later: all owned is not yet settled
                    last = f"tasks not spread: {[(i.instance_id, len(i.active_tasks)) for i in alive]}"
                    break
            else:
                return
            time.sleep(0.3)
        raise TimeoutError(f"cluster not RUNNING within {timeout}s: {last}; {self.describe_group()}\n{self.logs()}")

    @property
    def _broker_assigns(self) -> bool:
        """The group's tasks are placed by the broker (``group.protocol=streams``), in steps."""
        return "group.protocol=streams" in self.extra_config

    def describe_group(self) -> str:
        """The consumer group as the coordinator describes it (for failure messages)."""
        try:
            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            g = admin.describe_consumer_groups([self.application_id], request_timeout=5)[self.application_id].result(10)
            members = ", ".join(f"{m.client_id}/{m.member_id[-12:]}"
                                f"({len(m.assignment.topic_partitions) if m.assignment else 0} parts)"
                                for m in g.members)
            return f"group {g.state.name}, coordinator {g.coordinator.id}, members [{members}]"
        except Exception as e:  # diagnostics only
            return f"group not described: {e}"
