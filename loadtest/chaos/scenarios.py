"""Membership scenarios and ``run_scenario``: one chaos run on a fresh word-count cluster.

Every run gets a new application id and input topic (6 partitions) and runs ``examples.wordcount``
as real ``iqmesh run`` processes (instance.local's LocalCluster), default settings unless the scenario says
otherwise. Instance 0 is started alone and waited for until RUNNING before instances 1 and 2 are
started, so instance 0 is the first member of the consumer group, which makes it the group leader
(the coordinator elects the first member that joins and keeps it while it stays a member; an
instance that rejoins with a new consumer after a stuck rebalance may lose it). Then a producer
writes sample lines at a steady rate, a query thread asks random words through random live
instances, the scenario's action happens at a random moment in the middle of the input, and the run
waits (with a deadline) until the cluster has settled and the counts are right.

Scenarios (dynamic membership unless said):

- ``clean-leave``: SIGTERM one random instance.
- ``crash``: kill -9 one random instance, not restarted.
- ``crash-leader``: kill -9 instance 0, the group leader (see above), not restarted.
- ``crash-restart-static``: static membership (``group.instance.id``) for all; kill -9 one random
  instance and restart it with the same ``group.instance.id``, instance id and state dir.
- ``crash-restart-dynamic``: kill -9 one random instance and restart it with the same instance id
  and state dir.
- ``scale-out-in``: start a 4th instance while input flows, later SIGTERM it, still while input
  flows; convergence is timed from the SIGTERM.
- ``warm-takeover``: ``num.standby.replicas=1``; kill -9 one random instance, not restarted. Also
  measured: the changelog records the survivors restore into the victim's partitions after the kill
  (``restore-end`` lines of their logs), against the changelog records of those partitions written
  since the victim's last commit (end offset at the kill minus the victim's ``.checkpoint`` offset
  under at_least_once, minus the last stable offset under exactly_once_v2; no checkpoint: from 0).
- ``random-membership``: three times at random moments of the input, a random instance is killed
  (kill -9) or stopped (SIGTERM), at random, and started again (same instance id and state dir)
  after a random 0-3 s, so a change can land while the group still settles from the last one;
  timed from the last restart.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
from confluent_kafka.admin import AdminClient

from examples.wordcount import STORE
from instance.config import StreamsConfig
from instance.local.cluster import WORDS, LocalCluster, ensure_topic, sample_lines
from instance.runtime.rebalance_protocol import BROKER_SESSION_TIMEOUT_MS, CONSUMER, STREAMS
from instance.runtime.streams_group.group_config import standbys_on_the_group
from loadtest.chaos import observe
from loadtest.chaos.result import AT_LEAST_ONCE, EXACTLY_ONCE_V2, RunResult
from loadtest.chaos.traffic import Clients, LineProducer, LiveTargets, PauseProbe, QueryProber, wall_clock

APP = "examples.wordcount"
PARTITIONS = 6
GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE_V2)


class ChaosError(RuntimeError):
    """The run could not be carried out (cluster did not start, an instance would not stop...)."""


@dataclass(frozen=True)
class Takeover:
    """warm-takeover: where to read the restores back once the run has settled."""

    changelog: str
    partitions: set[int]
    #: survivor id -> (its log, its size in bytes at the kill)
    logs: dict[str, tuple[Path, int]]


@dataclass
class Run:
    """A run in progress, as the scenario's action sees it."""

    cluster: LocalCluster
    live: LiveTargets
    clients: Clients
    rnd: random.Random
    result: RunResult
    bootstrap: str
    input_start: float
    seconds: float
    action_time: float = 0.0
    takeover: Takeover | None = None

    def at(self, lo: float, hi: float) -> None:
        """Sleep until a random moment between fractions ``lo`` and ``hi`` of the input."""
        due = self.input_start + self.rnd.uniform(lo, hi) * self.seconds
        time.sleep(max(0.0, due - time.monotonic()))

    def iid(self, i: int) -> str:
        return self.cluster.instances[i].instance_id

    def stop(self, i: int, sig: signal.Signals) -> None:
        """Take instance ``i`` out of the query rotation, signal it and wait for its exit."""
        self.live.remove(self.iid(i))
        self.result.victim = self.iid(i)
        self.cluster.signal(i, sig)
        self.action_time = time.monotonic()
        self.result.action_at_s = round(self.action_time - self.input_start, 1)
        self.result.notes.append(f"{wall_clock()} {sig.name} {self.iid(i)}")
        timeout = 60.0 if sig == signal.SIGTERM else 15.0
        try:
            self.cluster.wait_exit(i, timeout)
        except subprocess.TimeoutExpired:
            self.cluster.signal(i, signal.SIGKILL)
            self.cluster.wait_exit(i, 15)
            self.result.notes.append(f"{self.iid(i)} did not exit within {timeout:.0f}s of {sig.name}; killed")

    def start(self, i: int, timeout: float = 60.0) -> None:
        """Start instance ``i`` (same id and state dir as before) and add it to the rotation once
        its query server answers."""
        self.cluster.start([i])
        inst = self.cluster.instances[i]
        self.result.notes.append(f"{wall_clock()} started {inst.instance_id}")
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.clients(inst.target).metadata()
                break
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    self.result.notes.append(f"{inst.instance_id}: no query server {timeout:.0f}s after start")
                    break
                time.sleep(0.2)
        self.live.add(inst.instance_id, inst.target)


def _clean_leave(run: Run) -> None:
    run.at(0.3, 0.7)
    run.stop(run.rnd.randrange(3), signal.SIGTERM)


def _crash(run: Run) -> None:
    run.at(0.3, 0.7)
    run.stop(run.rnd.randrange(3), signal.SIGKILL)


def _crash_leader(run: Run) -> None:
    run.at(0.3, 0.7)
    run.stop(0, signal.SIGKILL)


def _crash_restart(run: Run) -> None:
    run.at(0.3, 0.7)
    victim = run.rnd.randrange(3)
    run.stop(victim, signal.SIGKILL)
    run.start(victim)


def _scale_out_in(run: Run) -> None:
    run.at(0.15, 0.35)
    run.start(3)
    run.at(0.6, 0.8)
    run.stop(3, signal.SIGTERM)


def _warm_takeover(run: Run) -> None:
    run.at(0.3, 0.7)
    victim = run.rnd.randrange(3)
    vid = run.iid(victim)
    parts = observe.active_store_partitions(run.live.snapshot(), run.clients).get(vid, [])
    logs = {x.instance_id: (x.log_path, x.log_path.stat().st_size)
            for x in run.cluster.instances if x.instance_id != vid and x.log_path.exists()}
    run.stop(victim, signal.SIGKILL)
    changelog = f"{run.cluster.application_id}-{STORE}-changelog"
    end = observe.changelog_offsets(run.bootstrap, changelog, parts, read_committed=False)
    if run.result.guarantee == EXACTLY_ONCE_V2:
        last = observe.changelog_offsets(run.bootstrap, changelog, parts, read_committed=True)
    else:
        last = observe.checkpointed(run.cluster.instances[victim].state_dir, changelog, parts)
    run.result.since_last_commit = sum(max(0, end[p] - last.get(p, 0)) for p in parts)
    run.takeover = Takeover(changelog, set(parts), logs)
    run.result.notes.append(f"{vid} held partitions {parts} of {STORE}; changelog end {end}, last commit {last}")


def _random_membership(run: Run) -> None:
    for k in range(3):
        run.at(0.1 + 0.25 * k, 0.3 + 0.25 * k)
        victim = run.rnd.randrange(3)
        run.stop(victim, run.rnd.choice([signal.SIGKILL, signal.SIGTERM]))
        time.sleep(run.rnd.uniform(0.0, 3.0))  # the moment of the restart is the scenario's choice
        run.start(victim)
        run.action_time = time.monotonic()


@dataclass(frozen=True)
class Scenario:
    act: Callable[[Run], None]
    config: tuple[str, ...] = ()
    static: bool = False
    #: instances created; the ones beyond 3 are started by the action
    size: int = 3


SCENARIOS: Mapping[str, Scenario] = {
    "clean-leave": Scenario(_clean_leave),
    "crash": Scenario(_crash),
    "crash-leader": Scenario(_crash_leader),
    "crash-restart-static": Scenario(_crash_restart, static=True),
    "crash-restart-dynamic": Scenario(_crash_restart),
    "scale-out-in": Scenario(_scale_out_in, size=4),
    "warm-takeover": Scenario(_warm_takeover, config=("num.standby.replicas=1",)),
    "random-membership": Scenario(_random_membership),
}


def session_timeout_s(config: list[str]) -> float:
    """session.timeout.ms of instances run with these ``--config`` items, in seconds."""
    props = dict(c.split("=", 1) for c in config)
    props.update({"application.id": "chaos", "bootstrap.servers": "127.0.0.1:9092"})
    streams = StreamsConfig.from_properties(props)
    # the broker's setting then, not the client's (group.consumer.session.timeout.ms,
    # group.streams.session.timeout.ms: both 45 s by default)
    if streams.group_protocol in (CONSUMER, STREAMS):
        return BROKER_SESSION_TIMEOUT_MS / 1000
    return streams.session_timeout_ms / 1000


def run_scenario(name: str, bootstrap: str, workdir: Path, seed: int, guarantee: str = AT_LEAST_ONCE, *,
                 lines_per_s: float = 1000.0, seconds: float = 16.0, settle_timeout: float = 90.0,
                 extra_config: tuple[str, ...] = ()) -> RunResult:
    """One run of scenario ``name`` (see the module docstring) on ``bootstrap``, instance dirs and
    logs under ``workdir`` (state dirs are removed at the end, logs kept).

    ``lines_per_s * seconds`` lines are written; after the input ends the run waits up to
    ``settle_timeout`` seconds for the cluster to settle and the counts to be right.
    """
    sc = SCENARIOS[name]
    rnd = random.Random(f"{name}/{guarantee}/{seed}")
    tag = f"{name}-{seed}-{uuid.uuid4().hex[:6]}"
    app_id, topic = f"chaos-{tag}", f"chaos-in-{tag}"
    config = [f"processing.guarantee={guarantee}", *sc.config, *extra_config]
    result = RunResult(name, guarantee, seed, app_id, workdir, session_timeout_s(config))
    ensure_topic(bootstrap, topic, PARTITIONS)
    standbys_on_the_group(bootstrap, app_id, dict(c.split("=", 1) for c in config))
    cluster = LocalCluster(bootstrap, APP, app_id, workdir, size=sc.size, extra_config=config,
                           env={"WORDCOUNT_INPUT_TOPIC": topic, "WORDCOUNT_OUTPUT_TOPIC": f"chaos-out-{tag}"})
    if sc.static:
        for inst in cluster.instances:
            cluster.per_instance_config[inst.instance_id] = [f"group.instance.id={inst.instance_id}"]
    lines = sample_lines(int(lines_per_s * seconds), seed=seed)
    result.lines = len(lines)
    live, clients = LiveTargets(), Clients()
    producer = LineProducer(bootstrap, topic, lines, lines_per_s)
    prober = QueryProber(live, sorted(set(WORDS)), seed, clients)
    pauses = PauseProbe(live, clients)
    stayed: set[str] = set()
    try:
        tasks = _start(cluster, live, clients)
        stayed = set(live.snapshot())
        prober.start()
        producer.start()
        pauses.start()  # while the input flows: an instance with nothing to do is not paused
        run = Run(cluster, live, clients, rnd, result, bootstrap, producer.wait_started(), seconds)
        sc.act(run)
        producer.join(seconds + 120)
        pauses.stop()
        if producer.is_alive() or producer.error:
            result.notes.append(f"producer: {producer.error or 'still running after the deadline'}")
        truth = producer.truth()
        _settle(run, tasks, truth, deadline=max(producer.finished_at, time.monotonic()) + settle_timeout)
        if run.takeover is not None:
            t = run.takeover
            result.restored_at_takeover, result.restored_any_partition = observe.restores_after(
                t.logs, t.changelog, t.partitions)
    except ChaosError as e:
        result.problem = str(e)
    finally:
        producer.stop()
        for probe in (prober, pauses):
            probe.stop()
            if probe.is_alive():
                probe.join(10)
        cluster.stop(timeout=30)
        clients.close()
        _delete_topics(bootstrap, app_id, [topic, f"chaos-out-{tag}"])
        for inst in cluster.instances:
            shutil.rmtree(inst.state_dir, ignore_errors=True)
    s = prober.stats
    result.queries, result.queries_failed = s.asked, s.failed
    result.stale_flagged, result.stale_unflagged = s.flagged_stale, s.unflagged_stale
    result.failure_reasons = dict(s.failure_reasons)
    result.unflagged_examples = list(s.unflagged_examples)
    kept = [pauses.longest.get(i, 0.0) for i in stayed - {result.victim}]
    result.pause_s = round(max(kept), 1) if kept else None
    return result


def _start(cluster: LocalCluster, live: LiveTargets, clients: Clients) -> set[str]:
    """Instance 0 alone until RUNNING (it becomes the group leader), then 1 and 2; the tasks."""
    try:
        cluster.start([0])
        cluster.wait_running(120, expected=1)
        cluster.start([1, 2])
        cluster.wait_running(120, expected=3)
    except TimeoutError as e:
        raise ChaosError(f"cluster did not start: {str(e).splitlines()[0]}") from None
    # (under the streams protocol wait_running also waits until every instance holds tasks: the
    # joiners get theirs a heartbeat after instance 0 took them all, and a joiner waiting for its
    # first tasks while the input flows would count as a member the scenario paused)
    for inst in cluster.instances[:3]:
        live.add(inst.instance_id, inst.target)
    tasks = {t for ts in observe.active_tasks(live.snapshot(), clients).values() for t in ts}
    if not tasks:
        raise ChaosError("no active tasks in the metadata after start-up")
    return tasks


def _settle(run: Run, tasks: set[str], truth: Mapping[str, int], deadline: float) -> None:
    """Poll until every task is owned by a live RUNNING instance and the counts check passes
    (equal to the truth, or >= it where at-least-once may redo work), or until ``deadline``; an
    exact run whose over-counts stay unchanged for 15 s with the tasks settled ends early."""
    result, words = run.result, sorted(truth)
    exact = result.exact
    last: dict[str, int | None] | None = None
    unchanged_since = time.monotonic()
    while True:
        now = time.monotonic()
        live = run.live.snapshot()
        problem = observe.settle_problem(live, tasks, run.clients) if live else "no live instance"
        if problem is None:
            if result.owned_s is None:
                result.owned_s = round(now - run.action_time, 1)
            counts = observe.read_counts(run.rnd.choice(sorted(live.values())), words, run.clients)
            if counts != last:
                unchanged_since = now
            last = counts
            off = {w: (counts[w], truth[w]) for w in words
                   if counts[w] is None or counts[w] != truth[w] and (exact or (counts[w] or 0) < truth[w])}
            if not off:
                result.converged, result.problem = True, ""
                result.converge_s = round(now - run.action_time, 1)
                result.notes.append(f"{wall_clock()} converged")
                break
            problem = f"{len(off)} counts off (got, truth), e.g. {dict(list(off.items())[:4])}"
            over = any(c is not None and c > truth[w] for w, c in counts.items())
            if exact and over and now - unchanged_since > 15:
                result.problem = problem + "; unchanged for 15 s with every task settled"
                break
        result.problem = problem
        if now > deadline:
            break
        time.sleep(0.5)
    if last is None:  # never settled: read what can be read
        live = run.live.snapshot()
        last = observe.read_counts(next(iter(live.values())), words, run.clients) if live else {}
    got = {w: last.get(w) for w in words}
    result.unreadable_words = sum(1 for v in got.values() if v is None)
    result.lost = sum(max(0, truth[w] - v) for w, v in got.items() if v is not None)
    result.double_counted = sum(max(0, v - truth[w]) for w, v in got.items() if v is not None)


def _delete_topics(bootstrap: str, app_id: str, topics: list[str]) -> None:
    """Best-effort clean-up of the run's topics (the broker may outlive many runs)."""
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(app_id + "-") or t in topics]
        for fut in admin.delete_topics(names, operation_timeout=10).values():
            fut.result(timeout=15)
    except Exception:  # noqa: BLE001 - clean-up only; the run's result does not depend on it
        pass
