"""One member of a streams group: joins with its topology, heartbeats at the interval the broker
dictates, follows its member epoch, and takes the tasks and the endpoint map the broker sends.

Single-threaded: the owner calls :meth:`StreamsGroupMember.poll` often (a stream thread's loop, a
test's wait); it sends a heartbeat when one is due. A new assignment is handed to the listener
(where the runtime would revoke and take tasks) and acknowledged by the next heartbeat, which is
sent at once rather than an interval later, so the broker can move revoked tasks on.

The request sends what changed only (the protocol's "null if unchanged"): the topology and the
member's identity (process id, endpoint, rack, client tags, instance id, rebalance timeout) when
joining or after a new coordinator connection, the owned tasks when they changed.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from instance.kafka_wire.apis import STREAMS_GROUP_HEARTBEAT
from instance.kafka_wire.connection import Connection
from instance.kafka_wire.coordinator import connect_coordinator
from instance.kafka_wire.errors import BrokerConnectionError
from instance.kafka_wire.generated import streams_group_heartbeat_request as hb
from instance.kafka_wire.generated import streams_group_heartbeat_response as hbr
from instance.kafka_wire.wire_auth import PLAINTEXT, BrokerAuth
from instance.runtime.streams_group.assignment import EMPTY, Assignment, PartitionsByEndpoint, task_entries, task_ids
from instance.runtime.streams_group.declaration import Declaration
from instance.runtime.streams_group.errors import MemberFencedError, Reaction, error_for, reaction
from instance.runtime.streams_group.status import GroupStatus, StatusReport
from kernel.metadata import HostInfo
from kernel.task_id import TaskId

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
#: a static member leaving for a while (it keeps its tasks until the session times out)
STATIC_LEAVE_EPOCH = -2
#: wait before reconnecting after a broken connection
RECONNECT_BACKOFF_S = 0.5
#: a static member asks for its group.instance.id this often while the broker still holds it for
#: the previous run's member, and gives up after this long (the group's session timeout is at
#: most group.streams.max.session.timeout.ms, 60 s by default)
RELEASE_RETRY_S = 1.0
RELEASE_WAIT_S = 300.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberIdentity:
    """Who the member is: its group (``application.id``), the process it runs in (several stream
    threads share one), its ``application.server`` endpoint, and what the assignor may use."""

    group_id: str
    process_id: str
    user_endpoint: HostInfo | None = None
    instance_id: str | None = None
    rack_id: str | None = None
    client_tags: Mapping[str, str] = field(default_factory=dict)
    rebalance_timeout_ms: int = 300_000


#: per task, (sum of its changelog positions, sum of its changelog end offsets): what the member
#: reports every ``task_offset_interval_ms`` (the broker's lag of a warm-up, a describe's lag)
TaskOffsets = Callable[[], tuple[Mapping[TaskId, int], Mapping[TaskId, int]]]


class AssignmentListener(Protocol):
    """Told of every change of this member's tasks, before the broker hears it was acted on."""

    def on_assignment(self, new: Assignment, old: Assignment) -> None: ...


@dataclass(frozen=True)
class MemberState:
    """A snapshot of the member: what a caller or a test waits on."""

    member_id: str
    epoch: int
    assignment: Assignment
    endpoints: PartitionsByEndpoint
    statuses: tuple[StatusReport, ...]
    heartbeat_interval_ms: int


class StreamsGroupMember:
    """The heartbeat side of a streams group member (see the module docstring)."""

    def __init__(self, bootstrap: str, identity: MemberIdentity, declaration: Declaration, *,
                 auth: BrokerAuth = PLAINTEXT, listener: AssignmentListener | None = None,
                 member_id: str | None = None, timeout: float = 10.0, task_offsets: TaskOffsets | None = None) -> None:
        self.bootstrap = bootstrap
        self.identity = identity
        self.declaration = declaration
        self.auth = auth
        self.listener = listener
        self.timeout = timeout
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = JOIN_EPOCH
        self.assignment = EMPTY
        self.endpoints = PartitionsByEndpoint(-1)
        self.statuses: tuple[StatusReport, ...] = ()
        self.heartbeat_interval_ms = 0
        self.rejoins = 0
        self._conn: Connection | None = None
        self._send_identity = True
        self._sent_owned: Assignment | None = None
        self._next_heartbeat = 0.0
        self._left = False
        self._retrying_since: float | None = None
        self._waiting_release_since: float | None = None
        #: where the task offsets come from (None: never reported), and when they are due next
        self.task_offsets = task_offsets
        self._next_offsets = 0.0
        self._offsets_sent = False

    # -- reading ------------------------------------------------------------------------------------------
    @property
    def state(self) -> MemberState:
        return MemberState(self.member_id, self.epoch, self.assignment, self.endpoints, self.statuses,
                           self.heartbeat_interval_ms)

    def has(self, status: GroupStatus) -> bool:
        return any(s.status is status for s in self.statuses)

    def seconds_to_heartbeat(self) -> float:
        return max(0.0, self._next_heartbeat - time.monotonic())

    # -- heartbeats ---------------------------------------------------------------------------------------
    def poll(self) -> bool:
        """Send a heartbeat if one is due; True if one was sent. Raises StreamsGroupError when the
        broker refuses the member for good, BrokerConnectionError when no coordinator answers."""
        if self._left or time.monotonic() < self._next_heartbeat:
            return False
        self.heartbeat()
        return True

    def heartbeat(self) -> hbr.StreamsGroupHeartbeatResponse:
        """One heartbeat now, its answer applied."""
        request = self._request()
        try:
            response = self._connection().call(STREAMS_GROUP_HEARTBEAT, request)
        except BrokerConnectionError:
            self._disconnect()
            self._next_heartbeat = time.monotonic() + RECONNECT_BACKOFF_S
            raise
        self._apply(response)
        return response

    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = connect_coordinator(self.bootstrap, self.identity.group_id, auth=self.auth,
                                             client_id=f"{self.identity.group_id}-{self.member_id[:8]}",
                                             timeout=self.timeout)
            self._send_identity = True
        return self._conn

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _request(self) -> hb.StreamsGroupHeartbeatRequest:
        ident = self.identity
        joining = self.epoch == JOIN_EPOCH
        full = joining or self._send_identity
        owned = self.assignment
        send_owned = full or owned != self._sent_owned
        endpoint = ident.user_endpoint
        offsets, ends = self._due_offsets()
        return hb.StreamsGroupHeartbeatRequest(
            group_id=ident.group_id, member_id=self.member_id, member_epoch=self.epoch,
            endpoint_information_epoch=self.endpoints.epoch if self.endpoints.epoch >= 0 else 0,
            instance_id=ident.instance_id if full else None,
            rack_id=ident.rack_id if full else None,
            rebalance_timeout_ms=ident.rebalance_timeout_ms if full else -1,
            topology=self.declaration.topology if joining else None,
            active_tasks=task_entries(owned.active) if send_owned else None,
            standby_tasks=task_entries(owned.standby) if send_owned else None,
            warmup_tasks=task_entries(owned.warmup) if send_owned else None,
            process_id=ident.process_id if full else None,
            user_endpoint=hb.Endpoint(endpoint.host, endpoint.port) if full and endpoint else None,
            client_tags=tuple(hb.KeyValue(k, v) for k, v in sorted(ident.client_tags.items())) if full else None,
            task_offsets=offsets, task_end_offsets=ends,
        )

    def _due_offsets(self) -> tuple[tuple[hb.TaskOffset, ...] | None, tuple[hb.TaskOffset, ...] | None]:
        """The task offsets when their interval has passed (None, None otherwise)."""
        if self.task_offsets is None or self.epoch == JOIN_EPOCH or time.monotonic() < self._next_offsets:
            return None, None
        offsets, ends = self.task_offsets()
        self._offsets_sent = True

        def entries(by_task: Mapping[TaskId, int]) -> tuple[hb.TaskOffset, ...]:
            return tuple(hb.TaskOffset(str(t.subtopology), t.partition, o) for t, o in sorted(by_task.items()))

        return entries(offsets), entries(ends)

    def _apply(self, r: hbr.StreamsGroupHeartbeatResponse) -> None:
        now = time.monotonic()
        if r.error_code:
            what = reaction(r.error_code)
            if what is Reaction.REJOIN:
                self._rejoin()
                return
            if what is Reaction.FIND_COORDINATOR:
                self._disconnect()
                self._next_heartbeat = now + RECONNECT_BACKOFF_S
                return
            if what is Reaction.RETRY:
                self._retrying_since = self._retrying_since or now
                if now - self._retrying_since < self.timeout:
                    self._next_heartbeat = now + RECONNECT_BACKOFF_S
                    return
            if what is Reaction.WAIT_FOR_RELEASE:
                if self._waiting_release_since is None:
                    self._waiting_release_since = now
                    log.warning("streams group %r still holds group.instance.id %s for a previous member "
                                "(released at the group's session timeout): asking again every %.0f s",
                                self.identity.group_id, self.identity.instance_id, RELEASE_RETRY_S)
                if now - self._waiting_release_since < RELEASE_WAIT_S:
                    self._next_heartbeat = now + RELEASE_RETRY_S
                    return
            raise error_for(r.error_code, r.error_message, self.identity.group_id)
        self._retrying_since = self._waiting_release_since = None
        self._send_identity = False
        self._sent_owned = self.assignment
        if r.member_id:
            self.member_id = r.member_id
        self.epoch = r.member_epoch
        self.heartbeat_interval_ms = r.heartbeat_interval_ms
        if self._offsets_sent:  # reported: next after the interval the broker asks for
            self._offsets_sent = False
            self._next_offsets = now + max(r.task_offset_interval_ms, 1000) / 1000.0
        statuses = tuple(StatusReport(GroupStatus.of(s.status_code), s.status_code, s.status_detail)
                         for s in r.status or ())
        if statuses != self.statuses:
            # why an instance may run with no tasks (a source topic missing, ...): said once per change
            for report in statuses:
                log.warning("%s: the broker reports %s", self.identity.group_id, report)
            if self.statuses and not statuses:
                log.info("%s: the broker reports no problem any more", self.identity.group_id)
            self.statuses = statuses
        if r.partitions_by_user_endpoint is not None:
            self.endpoints = PartitionsByEndpoint.from_response(r.endpoint_information_epoch,
                                                                r.partitions_by_user_endpoint)
        self._next_heartbeat = now + max(r.heartbeat_interval_ms, 0) / 1000.0
        if r.active_tasks is None and r.standby_tasks is None and r.warmup_tasks is None:
            return
        old = self.assignment
        new = Assignment(
            active=old.active if r.active_tasks is None else task_ids(r.active_tasks),
            standby=old.standby if r.standby_tasks is None else task_ids(r.standby_tasks),
            warmup=old.warmup if r.warmup_tasks is None else task_ids(r.warmup_tasks))
        if new != old:
            self._take(new)
            self._next_heartbeat = now  # acknowledge at once

    def _take(self, new: Assignment) -> None:
        old, self.assignment = self.assignment, new
        if self.listener is not None:
            self.listener.on_assignment(new, old)

    def _rejoin(self) -> None:
        """Fenced or forgotten: every task is gone; join again with epoch 0 and the same member id."""
        self.rejoins += 1
        self.epoch = JOIN_EPOCH  # before the listener hears: an empty assignment at epoch 0 is a loss
        self._take(EMPTY)
        self._sent_owned = None
        self._next_heartbeat = time.monotonic()

    # -- leaving -------------------------------------------------------------------------------------------
    def leave(self, for_good: bool = False) -> None:
        """Leave the group (epoch -1; a static member -2, so that its instance id may come back and
        find its tasks, unless ``for_good``: a scale-in) and drop every task. A member that never
        joined, or was forgotten, just stops."""
        if self._left:
            return
        self._left = True
        if self.epoch == JOIN_EPOCH:
            self._take(EMPTY)
            self._disconnect()
            return
        epoch = STATIC_LEAVE_EPOCH if self.identity.instance_id and not for_good else LEAVE_EPOCH
        request = hb.StreamsGroupHeartbeatRequest(group_id=self.identity.group_id, member_id=self.member_id,
                                                  member_epoch=epoch, instance_id=self.identity.instance_id)
        try:
            answer = self._connection().call(STREAMS_GROUP_HEARTBEAT, request)
            if answer.error_code and reaction(answer.error_code) is not Reaction.REJOIN:
                raise error_for(answer.error_code, answer.error_message, self.identity.group_id)
        finally:
            self._take(EMPTY)
            self.epoch = epoch
            self._disconnect()

    def close(self) -> None:
        """Stop without leaving (the broker times the member out, as after a crash)."""
        self._left = True
        self._disconnect()


__all__ = ["AssignmentListener", "MemberFencedError", "MemberIdentity", "MemberState", "StreamsGroupMember"]
