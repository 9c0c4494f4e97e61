"""A stream thread as a streams group member (``group.protocol=streams``): the glue between the
member's heartbeats (member.py) and the thread's tasks.

Each stream thread is one member; the threads of an instance share its process id and its
``application.server`` endpoint, as Kafka Streams' do. The thread's consumer never subscribes: the
partitions of the ACTIVE tasks the broker assigns are taken with ``incremental_assign`` and given
up with ``incremental_unassign``, through the thread's own assignment and revocation code (the
classic path's: commit every task, then close the revoked ones). Standby and warm-up tasks are the
thread's standbys (a warm-up is a standby the broker promotes to active once it caught up). The
member is polled from the thread's loop; a new assignment is acted on inside that poll and
acknowledged by the heartbeat that follows at once.

Fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): the member joins again with epoch 0 and the thread
loses every task, closed dirty (Kafka Streams' onTasksLost). Offsets are committed with the member's
id and epoch (offset_commit.py); a transaction carries them in its group metadata (txn_metadata.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Literal, Protocol

from confluent_kafka import Consumer, TopicPartition

from instance.config import StreamsConfig
from instance.kafka_wire.errors import BrokerConnectionError, WireFormatError
from instance.kafka_wire.wire_auth import BrokerAuth
from instance.runtime.departure import static_member_id
from instance.runtime.streams_group.assignment import Assignment
from instance.runtime.streams_group.declaration import Declaration
from instance.runtime.streams_group.member import JOIN_EPOCH, MemberIdentity, StreamsGroupMember
from instance.runtime.streams_group.offset_commit import MemberOffsetCommitter
from instance.runtime.streams_group.txn_metadata import group_metadata
from kernel.metadata import HostInfo
from kernel.task_id import TaskId

log = logging.getLogger(__name__)


class ThreadHooks(Protocol):
    """What the stream thread does when its active tasks change (runtime/stream_thread.py)."""

    def take_partitions(self, partitions: list[TopicPartition]) -> None:
        """Assign ``partitions`` to the consumer and create their tasks (may be empty: the first
        assignment, or one that changed only standbys)."""

    def give_up_partitions(self, partitions: list[TopicPartition]) -> None:
        """Commit every task, close those of ``partitions``, unassign them."""

    def lose_all(self) -> None:
        """Every task is gone (the member was fenced): close them dirty, unassign everything."""

    def task_offsets(self) -> tuple[dict[TaskId, int], dict[TaskId, int]]:
        """Per stateful task held (active or standby): the sum of its changelog positions and of
        their end offsets (what Kafka Streams reports as task offsets and end offsets)."""


class ThreadMember:
    """One stream thread's streams group member and what it was assigned."""

    def __init__(self, member: StreamsGroupMember, declaration: Declaration, hooks: ThreadHooks) -> None:
        self.member = member
        self.declaration = declaration
        self.hooks = hooks
        #: the standby and warm-up tasks the broker gave this member (the thread's standbys)
        self.standbys: frozenset[TaskId] = frozenset()
        self._leaving = False
        self._took_first = False
        member.listener = self

    @property
    def member_id(self) -> str:
        return self.member.member_id

    def ids(self) -> tuple[str, int, str | None]:
        """(member id, epoch, group.instance.id): what a commit names."""
        m = self.member
        return m.member_id, m.epoch, m.identity.instance_id

    def seconds_to_heartbeat(self) -> float:
        return self.member.seconds_to_heartbeat()

    def poll(self) -> None:
        """Heartbeat if due (acting on what the answer assigns). A broker that does not answer is
        retried at the next turn; a refusal for good (StreamsGroupError) is raised."""
        try:
            self.member.poll()
        except (BrokerConnectionError, WireFormatError) as e:  # a broker going away may cut an answer short
            log.warning("%s: no heartbeat answer (%s); retrying", self.member.identity.group_id, e)
            return
        if not self._took_first and self.member.epoch > JOIN_EPOCH:
            self._took_first = True  # joined with nothing assigned yet: the thread runs, idle
            self.hooks.take_partitions([])

    def _partitions(self, tasks: Iterable[TaskId]) -> list[TopicPartition]:
        pairs = sorted({tp for t in tasks for tp in self.declaration.partitions_of(t)})
        return [TopicPartition(topic, p) for topic, p in pairs]

    def on_assignment(self, new: Assignment, old: Assignment) -> None:
        """The member's tasks changed (member.py's listener): act on it before the broker hears."""
        if self._leaving:
            return
        self.standbys = new.standby | new.warmup
        if self.member.epoch == JOIN_EPOCH and new.empty:  # fenced or forgotten
            self._took_first = False
            self.hooks.lose_all()
            return
        revoked = self._partitions(old.active - new.active)
        if revoked:
            self.hooks.give_up_partitions(revoked)
        self._took_first = True
        self.hooks.take_partitions(self._partitions(new.active - old.active))

    def leave(self, for_good: bool = False) -> None:
        """Leave the group (epoch -1; a static member -2 unless ``for_good``); the thread closed
        its tasks already."""
        self._leaving = True
        try:
            self.member.leave(for_good)
        except (BrokerConnectionError, Exception) as e:  # the broker times the member out instead
            log.warning("%s: leaving the streams group failed: %s", self.member.identity.group_id, e)
            self.member.close()


class StreamsGroupConsumer(Consumer):
    """A stream thread's consumer under the streams protocol: partitions assigned by hand; commits
    and transactional group metadata name the thread's member (its id and current epoch)."""

    def __init__(self, config: dict[str, Any], group_id: str, member: ThreadMember,
                 committer: MemberOffsetCommitter) -> None:
        super().__init__(config)
        self._group_id = group_id
        self._member = member
        self._committer = committer

    def commit(self, *args: Any, offsets: list[TopicPartition] | None = None,  # type: ignore[override]
               asynchronous: Literal[False] = False, **kwargs: Any) -> list[TopicPartition]:
        offsets = list(offsets or [])
        self._committer.commit(offsets)
        return offsets

    def consumer_group_metadata(self) -> bytes:
        member_id, epoch, instance_id = self._member.ids()
        return group_metadata(self._group_id, member_id, epoch, instance_id)

    def memberid(self) -> str:
        return self._member.member_id

    def close(self, *args: Any, **kwargs: Any) -> None:
        self._committer.close()
        super().close(*args, **kwargs)


def thread_member(config: StreamsConfig, declaration: Declaration, process_id: str, index: int,
                  consumer_config: dict[str, Any], hooks: ThreadHooks) -> tuple[ThreadMember, StreamsGroupConsumer]:
    """Stream thread ``index``'s member and its consumer (``consumer_config``: the main consumer's
    librdkafka settings, whose security settings the member's own connections use too)."""
    server = config.application_server
    identity = MemberIdentity(
        group_id=config.application_id, process_id=process_id,
        user_endpoint=HostInfo.parse(server) if server else None,
        instance_id=static_member_id(config.group_instance_id, index) if config.group_instance_id else None,
        rebalance_timeout_ms=config.max_poll_interval_ms)
    auth = BrokerAuth.from_client_config(consumer_config)
    member = StreamsGroupMember(config.bootstrap_servers, identity, declaration, auth=auth, timeout=30.0,
                                task_offsets=hooks.task_offsets)
    glue = ThreadMember(member, declaration, hooks)
    committer = MemberOffsetCommitter(config.bootstrap_servers, config.application_id, glue.ids, auth=auth,
                                      client_id=f"{consumer_config.get('client.id', 'iqmesh')}-offsets")
    return glue, StreamsGroupConsumer(consumer_config, config.application_id, glue, committer)
