"""What Kafka's own ``kafka-streams-groups.sh --describe`` (StreamsGroupCommand, kafka-tools
resolved from Maven) shows of a group whose members are iqmesh's streams-protocol member clients
(instance/runtime/streams_group): every member with its process id, its epoch and the tasks it
holds, and the group's input partitions with their lag once records wait."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from instance.runtime.streams_group.assignment import Assignment
from instance.runtime.streams_group.declaration import declare
from tests.conformance.kafka_tools import STREAMS_GROUPS, run_tool
from tests.conformance.test_broker import NO_STREAMS_PROTOCOL, create_topics
from tests.conformance.test_streams_group import PARTITIONS, new_member, settled, wait_for, word_count

pytestmark = [pytest.mark.integration, pytest.mark.skipif(bool(NO_STREAMS_PROTOCOL), reason=NO_STREAMS_PROTOCOL)]


def _tasks(assignment: Assignment) -> str:
    """The tool's spelling of a member's active tasks: ``0:[0,2]; 1:[0,2];``."""
    by_sub: dict[str, list[int]] = {}
    for t in assignment.active:
        by_sub.setdefault(str(t.subtopology), []).append(t.partition)
    return " ".join(f"{s}:[{','.join(map(str, sorted(ps)))}];" for s, ps in sorted(by_sub.items()))


def test_kafka_streams_groups_describe_lists_the_members_their_tasks_and_lag(
        bootstrap: str, admin: AdminClient, unique: str) -> None:
    app, source = f"sgt-{unique}", f"sgt-in-{unique}"
    create_topics(admin, {source: PARTITIONS})
    declaration = declare(word_count(source), app, replication_factor=1)
    members = [new_member(bootstrap, app, declaration, port) for port in (7301, 7302)]
    try:
        wait_for(lambda: settled(members, declaration), members, "both members to hold disjoint tasks")
        shown = run_tool(STREAMS_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", app,
                         "--members", "--verbose")
        assert shown.returncode == 0, shown.stderr[-2000:]
        rows = [line for line in shown.stdout.splitlines() if line.startswith(app)]
        assert len(rows) == 2, shown.stdout
        for m in members:
            row = next((r for r in rows if m.member_id in r), None)
            assert row is not None, f"{m.member_id} not in\n{shown.stdout}"
            assert "streams" in row.split() and m.identity.process_id in row.split()
            assert f"ACTIVE: {_tasks(m.assignment)} TARGET-ACTIVE: {_tasks(m.assignment)}" in row, row

        p = Producer({"bootstrap.servers": bootstrap})
        for i in range(7):
            p.produce(source, b"w", b"k", partition=i % 2)
        assert p.flush(30) == 0
        for m in members:
            m.poll()
        lag = run_tool(STREAMS_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", app, "--offsets")
        assert lag.returncode == 0, lag.stderr[-2000:]
        found = {int(p): v for t, p, v in re.findall(rf"^{app}\s+(\S+)\s+(\d+)\s+(\S+)", lag.stdout, re.M)
                 if t == source}
        # nothing committed by the group: every record on the input waits
        assert found == {0: "4", 1: "3", 2: "0", 3: "0"}, lag.stdout
    finally:
        for m in members:
            m.close()
