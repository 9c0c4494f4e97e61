"""`iqmesh reset` (issue 31 point 2), Kafka's kafka-streams-application-reset for an iqmesh
application, on the session's broker (the dev broker, or Apache Kafka with IQMESH_BROKER=kafka):

* a word count counted, stopped, reset (input offsets to the start, internal topics and local
  state gone) and started again answers the same counts, not doubled; its dry run changed nothing;
* while the group has members the reset refuses in one line and changes nothing; the members of
  stopped static instances (which stay listed) are removed by --force;
* each position flag moves the input offsets where Kafka's resetter moves them, intermediate topics
  go to their end, only the application's internal topics are deleted, and a state directory a
  running instance holds is refused;
* on a SASL_SSL Apache Kafka (IQMESH_BROKER=kafka only) the client.properties given with
  --config-file serves every step, the members' removal included.

The installed script runs as a subprocess, as a user runs it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from devtools.suite_broker import suite_engine
from instance.local import kafka_broker
from instance.local.cluster import LocalCluster, produce, sample_lines
from instance.state.checkpoint import TaskDirLock
from kernel.kafka_log import client_logging
from tests.integration.helpers import query_all, static_membership, wait_until, word_counts, wordcount_cluster
from tests.integration.test_cli import _one_error_line

pytestmark = pytest.mark.integration

IQMESH = str(Path(sys.executable).parent / "iqmesh")
Offsets = dict[tuple[str, int], int]


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    """This test's own admin client, its librdkafka lines through Python logging (the session's
    would report the broker's stop at the session's end)."""
    return AdminClient({"bootstrap.servers": bootstrap, **client_logging()})


def _reset(bootstrap: str, app: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([IQMESH, "reset", "--application-id", app, "--bootstrap", bootstrap, *args],
                          capture_output=True, text=True, timeout=180)


def _done(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object a reset that succeeded prints."""
    assert run.returncode == 0, run
    lines = run.stdout.splitlines()
    assert len(lines) == 1, run.stdout
    out: dict[str, Any] = json.loads(lines[0])
    return out


def _committed(admin: AdminClient, group: str) -> Offsets:
    try:
        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    except KafkaException:
        return {}  # no such group
    return {(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions or [] if tp.offset >= 0}


def _topics(admin: AdminClient) -> dict[str, int]:
    return {name: len(t.partitions) for name, t in admin.list_topics(timeout=10).topics.items()
            if not name.startswith("__")}


def _ends(admin: AdminClient, topics: Iterable[str]) -> Offsets:
    counts = _topics(admin)
    tps = {TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(counts.get(t, 0))}
    if not tps:
        return {}
    return {(tp.topic, tp.partition): f.result().offset for tp, f in admin.list_offsets(tps).items()}


def _members(admin: AdminClient, group: str) -> list[str]:
    described = admin.describe_consumer_groups([group])[group].result()
    return [m.group_instance_id or m.client_id for m in described.members]


def _caught_up(admin: AdminClient, group: str, topics: list[str]) -> bool:
    """Whether the group has committed every record of ``topics`` (each partition at its end). The
    offsets are read before the ends: equal, nothing written by then was left uncommitted."""
    committed = _committed(admin, group)
    ends = _ends(admin, topics)
    return bool(ends) and all(committed.get(tp, 0) == end for tp, end in ends.items())


def _answers(cluster: LocalCluster, words: list[str]) -> dict[str, Any]:
    """Every word's count through the second instance, once each word has an answer (a count
    that differs is returned, not waited out)."""
    target = cluster.instances[1].target

    def answered() -> dict[str, Any] | None:
        got = query_all(target, words)
        return got if None not in got.values() else None
    result: dict[str, Any] = wait_until(answered, 60, "an answer for every word", cluster.logs)
    return result


def _internal(app: str) -> set[str]:
    return {f"{app}-counts-changelog", f"{app}-counts-repartition", f"{app}-iqmesh-instances"}


@pytest.mark.timeout(600)
def test_a_reset_word_count_counts_the_same_again_and_its_dry_run_changes_nothing(
        bootstrap: str, admin: AdminClient, tmp_path: Path, unique: str) -> None:
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "commit.interval.ms=300", partitions=4)
    app = cluster.application_id
    repartition = f"{app}-counts-repartition"
    lines = sample_lines(2000, seed=31)
    truth = word_counts(lines)
    state_dirs = [inst.state_dir for inst in cluster.instances]
    flags = ["--input-topics", topic, *[a for d in state_dirs for a in ("--state-dir", str(d))]]
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        wait_until(lambda: _caught_up(admin, app, [topic, repartition]), 180, "the first count", cluster.logs)
        assert _answers(cluster, sorted(truth)) == dict(truth)

        # running: refused in one line naming the members, and nothing changed
        before = (_committed(admin, app), _topics(admin))
        line = _one_error_line(_reset(bootstrap, app, *flags), "reset", "NON_EMPTY_GROUP")
        assert "2 active members" in line and f"{app}-0-StreamThread-1" in line and "--force" in line, line
        assert (_committed(admin, app), _topics(admin)) == before
        assert all((d / app).is_dir() for d in state_dirs)
    finally:
        cluster.stop()
    wait_until(lambda: _members(admin, app) == [], 30, "the members gone")  # dynamic members leave when they stop

    # the dry run: the plan, and nothing changed (offsets, topics and what they hold, local state)
    internal = _internal(app)
    before_dry = (_committed(admin, app), _topics(admin), _ends(admin, internal))
    plan = _done(_reset(bootstrap, app, *flags, "--dry-run"))
    assert plan["dry_run"] is True and plan["members_removed"] == [] and plan["input_position"] == "to-earliest"
    assert {(m["topic"], m["partition"], m["from"], m["to"]) for m in plan["input_offsets"]} == \
        {(t, p, o, 0) for (t, p), o in before_dry[0].items() if t == topic}
    assert len(plan["input_offsets"]) == 4
    assert set(plan["internal_topics_deleted"]) == internal
    assert {(m["topic"], m["to"]) for m in plan["internal_offsets"]} == {(repartition, 0)}
    assert [d["existed"] for d in plan["state_dirs_removed"]] == [True, True]
    assert (_committed(admin, app), _topics(admin), _ends(admin, internal)) == before_dry
    assert all((d / app).is_dir() for d in state_dirs)

    # the reset itself does what the dry run said
    done = _done(_reset(bootstrap, app, *flags))
    assert done == {**plan, "dry_run": False}
    committed = _committed(admin, app)
    assert {o for (t, _), o in committed.items() if t == topic} == {0}
    # Apache Kafka drops a deleted topic's offsets; the dev broker keeps them, set to 0 first
    assert {o for (t, _), o in committed.items() if t == repartition} <= {0}
    assert not internal & set(_topics(admin))
    assert not any((d / app).exists() for d in state_dirs) and all(d.is_dir() for d in state_dirs)

    # started again: everything counted once more, from nothing: the same answers, not doubled
    cluster.start()
    try:
        cluster.wait_running(120)
        wait_until(lambda: _caught_up(admin, app, [topic, repartition]), 180, "the second count", cluster.logs)
        got = _answers(cluster, sorted(truth))
        assert got == dict(truth), {w: (n, truth[w]) for w, n in got.items() if n != truth[w]}
    finally:
        cluster.stop()


@pytest.mark.timeout(400)
def test_members_refuse_the_reset_and_force_removes_those_stopped_instances_left(
        bootstrap: str, admin: AdminClient, tmp_path: Path, unique: str) -> None:
    # static members stay listed after their instance stops, until session.timeout.ms (5 minutes)
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 1, "session.timeout.ms=300000",
                                       "commit.interval.ms=300", partitions=2)
    static_membership(cluster)
    app = cluster.application_id
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, [(None, b"kafka streams reset")])
        wait_until(lambda: _caught_up(admin, app, [topic]), 120, "the input counted", cluster.logs)
    finally:
        cluster.stop()
    static_id = f"{app}-0-1"  # group.instance.id of the instance's first stream thread
    assert _members(admin, app) == [static_id]
    before = (_committed(admin, app), _topics(admin))

    line = _one_error_line(_reset(bootstrap, app, "--input-topics", topic), "reset", "NON_EMPTY_GROUP")
    assert f"group.instance.id {static_id}" in line and "nothing was changed" in line, line
    plan = _done(_reset(bootstrap, app, "--input-topics", topic, "--force", "--dry-run"))
    assert [m["group_instance_id"] for m in plan["members_removed"]] == [static_id]
    assert _members(admin, app) == [static_id]
    assert (_committed(admin, app), _topics(admin)) == before

    done = _done(_reset(bootstrap, app, "--input-topics", topic, "--force"))
    assert [m["group_instance_id"] for m in done["members_removed"]] == [static_id]
    assert _members(admin, app) == []
    assert {o for (t, _), o in _committed(admin, app).items() if t == topic} == {0}
    assert not _internal(app) & set(_topics(admin))


def _create(admin: AdminClient, topics: dict[str, int]) -> None:
    for fut in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        fut.result()
    wait_until(lambda: all(_topics(admin).get(t) == n for t, n in topics.items()), 30, f"topics {sorted(topics)}")


def _iso(ms: int, zone: dt.timezone = dt.UTC) -> str:
    """Kafka's --to-datetime format (milliseconds), in ``zone``."""
    return dt.datetime.fromtimestamp(ms / 1000, zone).isoformat(timespec="milliseconds")


@pytest.mark.timeout(400)
def test_position_flags_intermediate_and_internal_topics_and_locked_state(
        bootstrap: str, admin: AdminClient, tmp_path: Path, unique: str) -> None:
    app = f"rs-{unique}"
    source, mid, looks_internal = f"in-{unique}", f"mid-{unique}", f"{app}-lookalike-changelog"
    changelog, repartition, instances = f"{app}-store-changelog", f"{app}-x-repartition", f"{app}-iqmesh-instances"
    stranger = f"{app}2-store-changelog"  # another application's, whose id starts with this one's
    _create(admin, {source: 2, mid: 1, looks_internal: 1, changelog: 1, repartition: 1, instances: 1, stranger: 1})
    # 10 records a partition, an hour apart, the last an hour ago
    hour = 3_600_000
    first = int(time.time() * 1000) - 10 * hour
    p = Producer({"bootstrap.servers": bootstrap, **client_logging()})
    for i in range(10):
        for part in (0, 1):
            p.produce(source, f"r{i}".encode(), partition=part, timestamp=first + i * hour)
    for _ in range(5):
        p.produce(mid, b"m", partition=0)
    p.produce(looks_internal, b"l", partition=0)
    assert p.flush(30) == 0

    def inputs() -> dict[int, int]:
        return {part: o for (t, part), o in _committed(admin, app).items() if t == source}

    def reset(*args: str) -> dict[str, Any]:
        return _done(_reset(bootstrap, app, "--input-topics", source, *args))

    # a dry run commits nothing, not even for a group that does not exist yet
    plan = reset("--to-offset", "4", "--dry-run")
    assert [(m["partition"], m["from"], m["to"]) for m in plan["input_offsets"]] == [(0, None, 4), (1, None, 4)]
    assert _committed(admin, app) == {}
    assert set(_topics(admin)) >= {changelog, repartition, instances}

    # --internal-topics: only those (a subset of the inferred ones); an input topic named like an
    # internal one is an input topic (KAFKA-7930)
    also_input = ("--input-topics", looks_internal)
    done = reset("--to-offset", "4", *also_input, "--internal-topics", repartition)
    assert done["internal_topics_deleted"] == [repartition]
    assert inputs() == {0: 4, 1: 4} and _committed(admin, app)[(looks_internal, 0)] == 1  # 4: past its end
    assert repartition not in _topics(admin) and {changelog, instances, looks_internal} <= set(_topics(admin))

    # mistakes: one line each, before anything changed
    before = (_committed(admin, app), _topics(admin))
    line = _one_error_line(_reset(bootstrap, app, "--input-topics", f"{source},nope-{unique}"), "reset",
                           "UNKNOWN_TOPIC")
    assert f"'nope-{unique}'" in line and "nothing was changed" in line
    _one_error_line(_reset(bootstrap, app, "--input-topics", source, "--internal-topics", source), "reset",
                    "INVALID_CONFIG")
    _one_error_line(_reset(bootstrap, app, "--input-topics", source, "--by-duration", "5h"), "reset",
                    "INVALID_CONFIG")
    beyond = tmp_path / "beyond.csv"
    beyond.write_text(f"{source},0,1\n{source},2,1\n")
    line = _one_error_line(_reset(bootstrap, app, "--input-topics", source, "--from-file", str(beyond)), "reset",
                           "INVALID_CONFIG")
    assert f"partition 2 of '{source}', which has 2" in line
    both = _reset(bootstrap, app, "--to-offset", "1", "--to-latest")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    # a state directory a running instance holds (its task directory locked) refuses the reset
    state = tmp_path / "state"
    task_lock = TaskDirLock(state / app / "0_0")
    task_lock.acquire()
    try:
        line = _one_error_line(_reset(bootstrap, app, "--input-topics", source, "--state-dir", str(state)),
                               "reset", "STATE_DIR_LOCKED")
        assert str(state / app / "0_0") in line
    finally:
        task_lock.release()
    assert (_committed(admin, app), _topics(admin)) == before

    # the whole reset: every other internal topic of the application, its local state; nothing else
    done = reset(*also_input, "--state-dir", str(state), "--state-dir", str(tmp_path / "none"))
    assert done["internal_topics_deleted"] == sorted([changelog, instances])
    assert done["state_dirs_removed"] == [{"path": str(state / app), "existed": True},
                                          {"path": str(tmp_path / "none" / app), "existed": False}]
    assert not (state / app).exists() and state.is_dir()
    assert {source, mid, looks_internal, stranger} <= set(_topics(admin))
    assert not {changelog, repartition, instances} & set(_topics(admin))

    # the position flags (nothing internal is left to delete)
    assert inputs() == {0: 0, 1: 0}  # --to-earliest, the default
    reset("--shift-by", "-3")
    assert inputs() == {0: 0, 1: 0}  # not before the earliest
    reset("--shift-by", "4")
    assert inputs() == {0: 4, 1: 4}
    reset("--shift-by", "-3")
    assert inputs() == {0: 1, 1: 1}
    reset("--shift-by", "100")
    assert inputs() == {0: 10, 1: 10}  # not past the end
    reset("--to-datetime", _iso(first + 3 * hour))
    assert inputs() == {0: 3, 1: 3}
    reset("--to-datetime", _iso(first + 5 * hour - 1, dt.timezone(dt.timedelta(hours=5, minutes=30))))
    assert inputs() == {0: 5, 1: 5}
    reset("--to-datetime", _iso(first + 11 * hour))
    assert inputs() == {0: 10, 1: 10}  # no record that late: the end
    reset("--by-duration", "PT4H30M")
    assert inputs() == {0: 6, 1: 6}  # the first record of the last four and a half hours
    plan_file = tmp_path / "plan.csv"
    plan_file.write_text(f"{source},0,7\n")
    reset("--from-file", str(plan_file))
    assert inputs() == {0: 7, 1: 6}  # partition 1 not in the file: left as it was
    reset("--to-latest")
    assert inputs() == {0: 10, 1: 10}
    done = reset("--intermediate-topics", mid)
    assert inputs() == {0: 0, 1: 0}
    assert [(m["topic"], m["to"]) for m in done["intermediate_offsets"]] == [(mid, 5)]
    assert _committed(admin, app)[(mid, 0)] == 5


@pytest.mark.skipif(suite_engine() != "kafka" or bool(os.environ.get("IQMESH_BOOTSTRAP")),
                    reason="starts a SASL_SSL Apache Kafka of its own (IQMESH_BROKER=kafka)")
@pytest.mark.timeout(400)
def test_the_config_file_of_a_sasl_ssl_cluster_serves_every_step_of_a_forced_reset(
        tmp_path: Path, unique: str) -> None:
    broker_dir = tmp_path / "broker"
    bootstrap = kafka_broker.start_broker(broker_dir, sasl_ssl=True).bootstrap
    try:
        kafka = kafka_broker.client_properties(broker_dir)
        props = str(broker_dir / kafka_broker.CLIENT_PROPERTIES)
        app, topic = f"sec-{unique}", f"in-{unique}"
        changelog = f"{app}-counts-changelog"
        admin = AdminClient({"bootstrap.servers": bootstrap, **kafka, **client_logging()})
        _create(admin, {topic: 2, changelog: 1})
        produce(bootstrap, topic, [(b"k", b"v")] * 3, kafka=kafka)
        # a stopped static member: listed until session.timeout.ms (5 minutes), its offsets committed
        consumer = Consumer({"bootstrap.servers": bootstrap, **kafka, **client_logging(), "group.id": app,
                             "group.instance.id": "pod-0-1", "session.timeout.ms": 300000,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        read = 0
        deadline = time.monotonic() + 60
        while read < 3:
            assert time.monotonic() < deadline, "the static member read nothing"
            m = consumer.poll(0.5)
            read += m is not None and m.error() is None
        consumer.commit(asynchronous=False)
        consumer.close()
        assert max(o for (t, _), o in _committed(admin, app).items() if t == topic) == 3

        wrong = _reset(bootstrap, app, "--input-topics", topic, "--force", "--config-file", props,
                       "--config", "sasl.password=not-the-password")
        assert "sasl.password" in _one_error_line(wrong, "reset", "INVALID_CONFIG")
        _one_error_line(_reset(bootstrap, app, "--input-topics", topic, "--config-file", props), "reset",
                        "NON_EMPTY_GROUP")
        done = _done(_reset(bootstrap, app, "--input-topics", topic, "--force", "--config-file", props))
        assert [m["group_instance_id"] for m in done["members_removed"]] == ["pod-0-1"]
        assert done["internal_topics_deleted"] == [changelog]
        assert _members(admin, app) == []
        assert {o for (t, _), o in _committed(admin, app).items() if t == topic} == {0}
        assert changelog not in _topics(admin)
    finally:
        kafka_broker.stop_broker(broker_dir)
