"""Word counts on three instances under ``group.protocol=streams`` (KIP-1071) on Apache Kafka 4.4:
the broker assigns the tasks, each stream thread is a streams group member whose consumer is
assigned by hand, offsets are committed with the member's epoch. Every word is asked of every
instance, and every count must be exact against the input after the start, after an instance is
killed with SIGKILL (at-least-once: nothing committed since its tasks were assigned, a long commit
interval), after an instance is added, after a clean stop and after that instance's restart, under
both processing guarantees. Real broker; every wait has a deadline."""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

from instance.local.broker import free_port
from instance.local.cluster import LocalCluster, ensure_topic, produce, sample_lines
from instance.runtime.streams_group.describe import describe_streams_group
from instance.runtime.streams_group.group_config import NUM_STANDBY_REPLICAS, set_group_config
from kernel.local_read import Role
from kernel.wire_enums import role_of
from router.client.sync_client import QueryClient
from tests.conformance.kafka_tools import STREAMS_GROUPS, run_tool
from tests.conformance.test_broker import NO_STREAMS_PROTOCOL
from tests.integration.helpers import APP, query_all, wait_until, word_counts, wordcount_cluster

pytestmark = [pytest.mark.integration, pytest.mark.skipif(bool(NO_STREAMS_PROTOCOL), reason=NO_STREAMS_PROTOCOL)]

IQMESH = str(Path(sys.executable).parent / "iqmesh")
#: the broker's session timeout for streams groups (group.streams.session.timeout.ms, 45 s) and the
#: rebalances after it, on two cores
RECOVERY_S = 150.0


def _wrong(cluster: LocalCluster, truth: collections.Counter[str], which: list[int]) -> dict[str, list[str]]:
    """Instance -> words it answered wrongly (asked of every instance in ``which``)."""
    words = sorted(truth)
    out: dict[str, list[str]] = {}
    for i in which:
        got = query_all(cluster.instances[i].target, words)
        bad = [w for w in words if got[w] != truth[w]]
        if bad:
            out[cluster.instances[i].instance_id] = bad[:5]
    return out


def _all_exact(cluster: LocalCluster, truth: collections.Counter[str], which: list[int], what: str,
               timeout: float = RECOVERY_S) -> None:
    last: list[dict[str, list[str]]] = [{}]

    def exact() -> bool:
        last[0] = _wrong(cluster, truth, which)
        return not last[0]

    wait_until(exact, timeout, f"every count exact on every instance {what} (wrong: {last[0]})",
               lambda: f"wrong: {last[0]}\n{cluster.logs()}")


def _members(bootstrap: str, app: str) -> int:
    try:
        return len(describe_streams_group(bootstrap, app, timeout=10).members)
    except Exception:  # not there yet
        return -1


@pytest.mark.parametrize("guarantee", [
    # at-least-once: a ten-minute commit interval, so the killed instance committed nothing since its
    # tasks were assigned (offsets are committed only at revocations)
    ("processing.guarantee=at_least_once", "commit.interval.ms=600000"),
    # exactly-once: transactions carry the member's id and epoch (runtime/streams_group/txn_metadata.py)
    ("processing.guarantee=exactly_once_v2",),
], ids=["at_least_once", "exactly_once_v2"])
def test_word_counts_exact_through_kill_add_and_stop(bootstrap: str, tmp_path: Path, unique: str,
                                                     guarantee: tuple[str, ...]) -> None:
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 4, "group.protocol=streams", *guarantee)
    app = cluster.application_id
    lines = sample_lines(6_000, seed=28)
    truth = word_counts(lines)
    try:
        cluster.start([0, 1, 2])
        wait_until(lambda: _members(bootstrap, app) == 3, RECOVERY_S, "three streams group members", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[:3000]))
        first = word_counts(lines[:3000])
        _all_exact(cluster, first, [0, 1, 2], "after the start")
        wait_until(lambda: (d := describe_streams_group(bootstrap, app)).state == "Stable"
                   and all(not m.assignment.empty for m in d.members), 60, "a stable group, every member with tasks",
                   cluster.logs)

        # (b) SIGKILL, with nothing committed since (commit.interval.ms is ten minutes): the broker
        # moves its tasks after its session timeout; the survivors re-process from the last commit
        cluster.signal(2, signal.SIGKILL)
        cluster.wait_exit(2, 30)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[3000:4500]))
        second = word_counts(lines[:4500])
        wait_until(lambda: _members(bootstrap, app) == 2, RECOVERY_S, "the killed member to time out", cluster.logs)
        _all_exact(cluster, second, [0, 1], "after an instance was killed")

        # (c) an instance added (a new one, no state)
        cluster.start([3])
        wait_until(lambda: _members(bootstrap, app) == 3, RECOVERY_S, "the added member to join", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[4500:5200]))
        third = word_counts(lines[:5200])
        _all_exact(cluster, third, [0, 1, 3], "after an instance was added")
        wait_until(lambda: all(not m.assignment.empty for m in describe_streams_group(bootstrap, app).members),
                   RECOVERY_S, "the added member to hold tasks", cluster.logs)
        _all_exact(cluster, third, [0, 1, 3], "once the added instance holds tasks")

        # (d) a clean stop: it commits, leaves the group (epoch -1), its tasks move at once
        cluster.signal(0, signal.SIGTERM)
        assert cluster.wait_exit(0, 60) == 0, cluster.logs()
        wait_until(lambda: _members(bootstrap, app) == 2, 30, "the stopped member to leave the group", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[5200:5600]))
        fourth = word_counts(lines[:5600])
        _all_exact(cluster, fourth, [1, 3], "after a clean stop")

        # (e) the stopped instance restarted (its state directory kept, a new member)
        cluster.start([0])
        wait_until(lambda: _members(bootstrap, app) == 3, RECOVERY_S, "the restarted member to join", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[5600:]))
        _all_exact(cluster, truth, [0, 1, 3], "after the stopped instance was restarted")
    finally:
        cluster.stop()


def test_a_frozen_instance_is_fenced_loses_its_tasks_and_rejoins(bootstrap: str, tmp_path: Path, unique: str) -> None:
    """SIGSTOP past the broker's session timeout: the group moves its tasks; on SIGCONT its member is
    unknown to the broker (UNKNOWN_MEMBER_ID), so its tasks are lost (closed dirty) and it joins
    again; the counts stay exact on every instance."""
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "group.protocol=streams")
    app = cluster.application_id
    lines = sample_lines(3_000, seed=29)
    try:
        cluster.start()
        wait_until(lambda: _members(bootstrap, app) == 2, RECOVERY_S, "two streams group members", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[:1500]))
        _all_exact(cluster, word_counts(lines[:1500]), [0, 1], "after the start")
        cluster.signal(1, signal.SIGSTOP)
        wait_until(lambda: _members(bootstrap, app) == 1, RECOVERY_S, "the frozen member to time out", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[1500:2200]))
        _all_exact(cluster, word_counts(lines[:2200]), [0], "while one instance is frozen")
        cluster.signal(1, signal.SIGCONT)
        wait_until(lambda: "fenced out of the streams group" in cluster.instances[1].log_path.read_text(), 60,
                   "the thawed instance to find itself fenced", cluster.logs)
        wait_until(lambda: _members(bootstrap, app) == 2, RECOVERY_S, "the thawed instance to rejoin", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[2200:]))
        _all_exact(cluster, word_counts(lines), [0, 1], "after the thawed instance rejoined")
    finally:
        cluster.signal(1, signal.SIGCONT)
        cluster.stop()


def test_broker_placed_standby_answers_stale_then_takes_over(bootstrap: str, tmp_path: Path, unique: str) -> None:
    """Standbys placed by the broker (the group's streams.num.standby.replicas=1): after a kill -9
    of a key's active owner, the standby answers at once, flagged STANDBY and stale; after the
    broker's session timeout the task is active again, where its standby was (the routing from the
    broker's endpoint map), and answers not stale."""
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 3, "group.protocol=streams",
                                       "commit.interval.ms=300")
    app = cluster.application_id
    set_group_config(bootstrap, app, {NUM_STANDBY_REPLICAS: "1"})
    lines = sample_lines(4000, seed=31)
    truth = word_counts(lines)
    try:
        cluster.start()
        wait_until(lambda: _members(bootstrap, app) == 3, RECOVERY_S, "three streams group members", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        _all_exact(cluster, truth, [0, 1, 2], "after the start")
        with QueryClient(cluster.instances[0].target) as q:
            def standbys_warm() -> bool:
                md = q.metadata()
                stores = [s for i in md.instances for s in i.stores]
                active = {s.partition: s.position for s in stores if role_of(s.role) is Role.ACTIVE}
                standby = {s.partition: s.position for s in stores if role_of(s.role) is Role.STANDBY}
                return len(active) == 6 and all(standby.get(p, -1) >= pos for p, pos in active.items())
            wait_until(standbys_warm, 60, "every stateful task to have a caught-up standby", cluster.logs)
            owned = [w for w in truth if q.get("counts", w).metadata["served_by"] == cluster.instances[2].instance_id]
            assert owned
            word = owned[0]

            cluster.signal(2, signal.SIGKILL)
            seen: list[object] = []

            def standby_answer() -> dict[str, Any] | None:
                try:
                    r = q.get("counts", word, allow_stale=True)
                except grpc.RpcError as e:
                    seen.append(e.details())
                    return None
                seen.append((r.value, r.metadata))
                return r.metadata if r.metadata["role"] is Role.STANDBY and r.value == truth[word] else None

            meta = wait_until(standby_answer, 40, "an answer from the standby before the takeover",
                              lambda: f"answers {seen[:3]} ... {seen[-3:]}\n{cluster.logs()}")
            assert meta["stale"] is True and meta["served_by"] != cluster.instances[2].instance_id
            heir = meta["served_by"]

            def active_answer() -> dict[str, Any] | None:
                try:
                    r = q.get("counts", word)
                except grpc.RpcError:
                    return None
                return r.metadata if r.metadata["role"] is Role.ACTIVE and not r.metadata["stale"] \
                    and r.value == truth[word] else None

            meta = wait_until(active_answer, RECOVERY_S, "a non-stale answer from a new active", cluster.logs)
            assert meta["served_by"] == heir, (meta, heir)
        _all_exact(cluster, truth, [0, 1], "after the takeover")
    finally:
        cluster.stop()


def test_another_topology_in_the_group_stops_the_instance_in_one_line(bootstrap: str, tmp_path: Path,
                                                                     unique: str) -> None:
    """A member the broker refuses for good (here: another topology than the running group's,
    which Kafka 4.4 answers INVALID_REQUEST) ends its instance with the broker's reason in one line
    (as the thread's death is logged, then as the command's error), exit status 2, no traceback."""
    cluster, _ = wordcount_cluster(bootstrap, tmp_path, unique, 1, "group.protocol=streams")
    app = cluster.application_id
    other = f"other-lines-{unique}"
    ensure_topic(bootstrap, other, 6)
    try:
        cluster.start()
        wait_until(lambda: _members(bootstrap, app) == 1, RECOVERY_S, "the first member", cluster.logs)
        state = tmp_path / "other-state"
        done = subprocess.run(
            [IQMESH, "run", APP, "--application-id", app, "--bootstrap", bootstrap, "--grpc-port", str(free_port()),
             "--state-dir", str(state), "--config", "group.protocol=streams"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "WORDCOUNT_INPUT_TOPIC": other, "WORDCOUNT_OUTPUT_TOPIC": f"other-out-{unique}"})
        assert done.returncode == 2, done
        # the thread's death as logged, then the command's error: each one line with the broker's reason
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 2 and all("INVALID_REQUEST: Topology updates are not supported" in x for x in lines), \
            done.stderr
        assert "stream thread" in lines[0] and lines[1].startswith("iqmesh run: error: STREAMS_ERROR:"), done.stderr
        assert "Traceback" not in done.stdout + done.stderr, done.stdout[-3000:]
        # the running member was not disturbed
        assert _members(bootstrap, app) == 1
    finally:
        cluster.stop()


def test_static_members_stay_through_a_restart_and_leave_for_good_when_told(bootstrap: str, tmp_path: Path,
                                                                            unique: str) -> None:
    """Static members (group.instance.id, as the StatefulSet gives them): one stopped cleanly leaves
    with epoch -2, so the group keeps it and its tasks (a restart moves nothing) and it comes back
    to them; one killed and restarted at once waits until the broker lets go of its instance id
    (the dead run's member holds it until the session times out) and then serves again; one stopped
    leaving for good (``iqmesh.leave.group.on.close=true``: a scale-in) leaves
    with epoch -1, so its tasks move at once, long before the broker's 45 s session timeout; the
    counts stay exact on every instance."""
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "group.protocol=streams")
    for inst in cluster.instances:
        cluster.per_instance_config[inst.instance_id] = [f"group.instance.id={inst.instance_id}"]
    cluster.per_instance_config[cluster.instances[1].instance_id].append("iqmesh.leave.group.on.close=true")
    app = cluster.application_id
    lines = sample_lines(3_000, seed=33)

    def tasks_of(instance: int) -> frozenset[str]:
        held = [m for m in describe_streams_group(bootstrap, app).members
                if m.instance_id and m.instance_id.startswith(cluster.instances[instance].instance_id)]
        return frozenset(str(t) for m in held for t in m.assignment.active)
    try:
        cluster.start()
        wait_until(lambda: _members(bootstrap, app) == 2, RECOVERY_S, "two streams group members", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[:1000]))
        _all_exact(cluster, word_counts(lines[:1000]), [0, 1], "after the start")
        wait_until(lambda: tasks_of(0) and tasks_of(1), 60, "tasks on both members", cluster.logs)
        before = tasks_of(0)

        # a clean stop of a static member that is coming back: the group keeps it, with its tasks
        cluster.signal(0, signal.SIGTERM)
        assert cluster.wait_exit(0, 60) == 0, cluster.logs()
        assert _members(bootstrap, app) == 2 and tasks_of(0) == before  # -2: kept for the session timeout
        cluster.start([0])
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[1000:2000]))
        _all_exact(cluster, word_counts(lines[:2000]), [0, 1], "after the static member came back")
        assert tasks_of(0) == before

        # killed and restarted at once: the broker holds the instance id for the dead run's member
        # until the session times out; the new run asks again until it is let in (no crash loop)
        cluster.signal(0, signal.SIGKILL)
        cluster.wait_exit(0, 30)
        cluster.start([0])
        wait_until(lambda: "still holds group.instance.id" in cluster.instances[0].log_path.read_text(), 60,
                   "the restarted static member to be told its instance id is still held", cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[2000:2500]))
        _all_exact(cluster, word_counts(lines[:2500]), [0, 1], "after the killed static member came back")
        assert cluster.instances[0].proc is not None and cluster.instances[0].proc.poll() is None, cluster.logs()

        # leaving for good: epoch -1, the group forgets it and its tasks move now
        cluster.signal(1, signal.SIGTERM)
        assert cluster.wait_exit(1, 60) == 0, cluster.logs()
        wait_until(lambda: _members(bootstrap, app) == 1, 15, "the member leaving for good to be gone at once",
                   cluster.logs)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[2500:]))
        _all_exact(cluster, word_counts(lines), [0], "after the other left for good", timeout=30)
    finally:
        cluster.stop()


def test_kafka_streams_groups_describes_running_instances(bootstrap: str, tmp_path: Path, unique: str) -> None:
    """What users already run, ``kafka-streams-groups.sh --describe`` (StreamsGroupCommand from
    kafka-tools), lists running iqmesh instances as the streams group's members, with every task
    held by one of them, and the group's lag, 0 on every input partition once the input is counted
    and committed."""
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "group.protocol=streams",
                                       "commit.interval.ms=200")
    app = cluster.application_id
    lines = sample_lines(1_000, seed=34)
    try:
        cluster.start()
        cluster.wait_running(RECOVERY_S)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        _all_exact(cluster, word_counts(lines), [0, 1], "after the start")
        group = describe_streams_group(bootstrap, app)
        shown = run_tool(STREAMS_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", app,
                         "--members", "--verbose")
        assert shown.returncode == 0, shown.stderr[-2000:]
        rows = [line for line in shown.stdout.splitlines() if line.startswith(app)]
        assert len(rows) == len(group.members) == 2, shown.stdout
        for m in group.members:
            row = next((r for r in rows if m.member_id in r), None)
            assert row is not None and m.process_id in row.split(), f"{m.member_id} not in\n{shown.stdout}"
        listed = {f"{s}_{p}" for s, ps in re.findall(r"(\d+):\[([\d,]+)\];", " ".join(
            r.split("TARGET-ACTIVE:")[0] for r in rows)) for p in ps.split(",")}
        assert listed == {f"{s}_{p}" for s in (0, 1) for p in range(6)}, shown.stdout  # two sub-topologies

        def no_lag() -> bool:
            lag = run_tool(STREAMS_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", app,
                           "--offsets")
            found = {p: v for t, p, v in re.findall(rf"^{app}\s+(\S+)\s+(\d+)\s+(\S+)", lag.stdout, re.M)
                     if t == topic}
            return lag.returncode == 0 and found == {str(p): "0" for p in range(6)}
        wait_until(no_lag, 90, "the tool to show no lag on the input", cluster.logs)
    finally:
        cluster.stop()
