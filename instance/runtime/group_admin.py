"""Kafka admin operations confluent-kafka lacks: remove members from a group, list and fence
transactions.

``remove_members`` is Kafka's remove-members operation (KIP-345; Java's
``Admin.removeMembersFromConsumerGroup``): a LeaveGroup request naming other members, sent to the
group coordinator. confluent-kafka has no API for it, so it is framed here by hand: ApiVersions to
pick versions, FindCoordinator (key type GROUP), then LeaveGroup v3 (all members in one request)
or, where v3 is not supported, LeaveGroup v0-v2 once per member. Only non-flexible versions are
spoken (no tagged fields): Kafka 4.x dropped old versions of some APIs (KIP-896, baseline 2.1)
but still accepts FindCoordinator v2 and LeaveGroup v0-v3. The one exception is ListTransactions
(KIP-664), flexible from its first version: asked of every broker (each lists the transactions it
coordinates), to find the open transactions of a dead or earlier run of an instance and fence them.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from instance.errors import StreamsException
from instance.kafka_wire.wire_auth import BrokerAuth, WireAuthError, authenticate
from kernel.kafka_log import client_logging

__all__ = ["GroupAdminError", "GroupDescription", "GroupMember", "describe_group", "describe_group_members",
           "error_name", "fence_transactional_id", "fence_transactions", "list_transactions", "remove_members"]

API_VERSIONS, FIND_COORDINATOR, LEAVE_GROUP, LIST_TRANSACTIONS = 18, 10, 13, 66
_RETRIABLE = frozenset({14, 15, 16})  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
_CLIENT_ID = "iqmesh-group-admin"


class GroupAdminError(StreamsException):
    """A group admin request failed: no connection, no coordinator, or an unusable answer."""


@dataclass(frozen=True)
class GroupMember:
    """A member of a consumer group as DescribeGroups lists it."""

    member_id: str
    client_id: str
    group_instance_id: str | None
    host: str


@dataclass(frozen=True)
class GroupDescription:
    """A consumer group as DescribeGroups answers: its state (confluent-kafka's ConsumerGroupState
    name: ``STABLE``, ``PREPARING_REBALANCING``, ``COMPLETING_REBALANCING``, ``EMPTY``, ``DEAD``,
    ``UNKNOWN``) and members."""

    state: str
    members: tuple[GroupMember, ...]


def error_name(code: int) -> str:
    """Kafka's name of a protocol error code ("NONE" for 0)."""
    if code == 0:
        return "NONE"
    if code == -1:
        return "UNKNOWN_SERVER_ERROR"
    name = KafkaError(code).name()
    return name if not name.startswith("ERR_") else f"ERROR_{code}"


# -- wire framing (pure; unit-tested) ---------------------------------------------------------------


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    raw = s.encode()
    return _uvarint(len(raw) + 1) + raw


def encode_request(api_key: int, version: int, correlation_id: int, body: bytes,
                   client_id: str = _CLIENT_ID, flexible: bool = False) -> bytes:
    """A size-prefixed request with header v1, or v2 (empty tagged fields) when ``flexible``."""
    msg = struct.pack(">hhi", api_key, version, correlation_id) + _string(client_id) \
        + (b"\x00" if flexible else b"") + body
    return struct.pack(">i", len(msg)) + msg


def encode_list_transactions(states: Sequence[str]) -> bytes:
    """ListTransactions v0: the state filter, no producer id filter, no tagged fields."""
    return _uvarint(len(states) + 1) + b"".join(_compact_string(s) for s in states) + _uvarint(1) + b"\x00"


def encode_find_coordinator(group_id: str, version: int) -> bytes:
    return _string(group_id) + (b"\x00" if version >= 1 else b"")  # key_type 0: GROUP


def encode_leave_group(group_id: str, members: Sequence[GroupMember], version: int) -> bytes:
    """v0-v2 name one member (``members[0]``); v3 names them all with their group.instance.id."""
    if version < 3:
        return _string(group_id) + _string(members[0].member_id)
    out = [_string(group_id), struct.pack(">i", len(members))]
    out += [_string(m.member_id) + _string(m.group_instance_id) for m in members]
    return b"".join(out)


class Reader:
    """Reads the big-endian primitives of a response body; raises GroupAdminError when short."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise GroupAdminError(f"truncated response ({len(self.data)} bytes)")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def i16(self) -> int:
        return int.from_bytes(self._take(2), "big", signed=True)

    def i32(self) -> int:
        return int.from_bytes(self._take(4), "big", signed=True)

    def i64(self) -> int:
        return int.from_bytes(self._take(8), "big", signed=True)

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode()

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


def decode_api_versions(body: bytes) -> tuple[int, dict[int, tuple[int, int]]]:
    """(error_code, {api_key: (min_version, max_version)}) of an ApiVersions v0 response."""
    r = Reader(body)
    error = r.i16()
    return error, {r.i16(): (r.i16(), r.i16()) for _ in range(max(r.i32(), 0))}


def decode_find_coordinator(body: bytes, version: int) -> tuple[int, int, str, int]:
    """(error_code, node_id, host, port)."""
    r = Reader(body)
    if version >= 1:
        r.i32()  # throttle_time_ms
    error = r.i16()
    if version >= 1:
        r.string()  # error_message
    return error, r.i32(), r.string() or "", r.i32()


def decode_leave_group(body: bytes, version: int) -> tuple[int, list[tuple[str, str | None, int]]]:
    """(top-level error_code, [(member_id, group_instance_id, error_code)] in the response's
    order); the list is empty below v3."""
    r = Reader(body)
    if version >= 1:
        r.i32()  # throttle_time_ms
    error = r.i16()
    members: list[tuple[str, str | None, int]] = []
    if version >= 3:
        for _ in range(max(r.i32(), 0)):
            member_id, instance = r.string() or "", r.string()
            members.append((member_id, instance, r.i16()))
    return error, members


def _answer_for(m: GroupMember, index: int, answers: list[tuple[str, str | None, int]], asked: int) -> int | None:
    """The error code answered for ``m``, the ``index``-th of ``asked`` members: by member id, or
    by group.instance.id for a member named by it alone. Apache Kafka echoes what was asked; the dev
    broker answers a static member under its member id without the instance id, in request order."""
    for member_id, instance, code in answers:
        if (m.member_id and member_id == m.member_id) or (not m.member_id and instance == m.group_instance_id):
            return code
    return answers[index][2] if len(answers) == asked and not m.member_id else None


def decode_list_transactions(body: bytes) -> tuple[int, list[tuple[str, int, str]]]:
    """(error_code, [(transactional_id, producer_id, state)]) of a ListTransactions v0 response
    (``body`` starts with the response header's tagged fields)."""
    r = Reader(body)
    r.skip_tagged_fields()
    r.i32()  # throttle_time_ms
    error = r.i16()
    for _ in range(max(r.uvarint() - 1, 0)):
        r.compact_string()  # unknown_state_filters
    states = []
    for _ in range(max(r.uvarint() - 1, 0)):
        tid, pid, state = r.compact_string() or "", r.i64(), r.compact_string() or ""
        r.skip_tagged_fields()
        states.append((tid, pid, state))
    return error, states


def pick_version(supported: dict[int, tuple[int, int]], api_key: int, highest: int) -> int | None:
    """The highest version <= ``highest`` the broker supports, or None."""
    low, high = supported.get(api_key, (0, -1))
    best = min(high, highest)
    return best if best >= low else None


# -- connection ---------------------------------------------------------------------------------------


class _Connection:
    def __init__(self, host: str, port: int, deadline: float, auth: BrokerAuth) -> None:
        self.where = f"{host}:{port}"
        self.deadline = deadline
        self.auth = auth
        self._next_id = 0
        try:
            self.sock = auth.wrap(socket.create_connection((host, port), timeout=self._left()), host)
        except (OSError, WireAuthError) as e:
            raise GroupAdminError(f"cannot connect to broker {self.where}: {e}") from e
        try:
            error, self.versions = decode_api_versions(self.call(API_VERSIONS, 0, b""))
            if error:
                raise GroupAdminError(f"broker {self.where} refused ApiVersions v0: {error_name(error)}")
            authenticate(self.call, auth, self.where)
        except WireAuthError as e:
            self.sock.close()
            raise GroupAdminError(str(e)) from e
        except BaseException:
            self.sock.close()
            raise

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise GroupAdminError(f"timed out talking to broker {self.where}")
        return left

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            self.sock.settimeout(self._left())
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise GroupAdminError(f"broker {self.where} closed the connection")
            buf += chunk
        return bytes(buf)

    def call(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> bytes:
        """Send one request and return the response body (after the correlation id)."""
        self._next_id += 1
        try:
            self.sock.settimeout(self._left())
            self.sock.sendall(encode_request(api_key, version, self._next_id, body, flexible=flexible))
            (size,) = struct.unpack(">i", self._read(4))
            frame = self._read(size)
        except OSError as e:
            raise GroupAdminError(f"request {api_key} v{version} to broker {self.where} failed: {e}") from e
        if len(frame) < 4 or struct.unpack_from(">i", frame)[0] != self._next_id:
            raise GroupAdminError(f"broker {self.where} answered with a wrong correlation id")
        return frame[4:]

    def close(self) -> None:
        self.sock.close()


def _connect_any(bootstrap: str, deadline: float, auth: BrokerAuth) -> _Connection:
    errors = []
    for entry in bootstrap.split(","):
        host, _, port = entry.strip().split("://")[-1].rpartition(":")
        if not port.isdigit():
            errors.append(f"bootstrap entry {entry!r} is not host:port")
            continue
        try:
            return _Connection(host.strip("[]") or "127.0.0.1", int(port), deadline, auth)
        except GroupAdminError as e:
            errors.append(str(e))
    raise GroupAdminError("; ".join(errors))


def _coordinator(bootstrap: str, group_id: str, deadline: float, auth: BrokerAuth) -> _Connection:
    """A connection to the group's coordinator (retried while the coordinator is not ready)."""
    while True:
        conn = _connect_any(bootstrap, deadline, auth)
        version = pick_version(conn.versions, FIND_COORDINATOR, 2)
        if version is None:
            conn.close()
            raise GroupAdminError(f"broker {conn.where} supports no non-flexible FindCoordinator version")
        error, _node, host, port = decode_find_coordinator(
            conn.call(FIND_COORDINATOR, version, encode_find_coordinator(group_id, version)), version)
        if error == 0:
            if f"{host}:{port}" == conn.where:
                return conn
            conn.close()
            return _Connection(host, port, deadline, auth)
        conn.close()
        if error not in _RETRIABLE or time.monotonic() + 0.2 > deadline:
            raise GroupAdminError(f"FindCoordinator on {conn.where}: {error_name(error)}")
        time.sleep(0.2)


# -- public API -----------------------------------------------------------------------------------------
#: How every function here reaches the cluster: a client's whole configuration
#: (``StreamsConfig.client_config("admin")``: bootstrap.servers, TLS, SASL, as every other client of
#: the instance), or bootstrap.servers alone (PLAINTEXT).
Kafka = str | Mapping[str, Any]


def _client(kafka: Kafka) -> dict[str, Any]:
    """The client configuration ``kafka`` stands for."""
    return {"bootstrap.servers": kafka, **client_logging()} if isinstance(kafka, str) else dict(kafka)


def describe_group(kafka: Kafka, group_id: str, timeout: float = 10.0) -> GroupDescription:
    """The group's state and the members the coordinator lists (DescribeGroups)."""
    client = _client(kafka)
    bootstrap = client["bootstrap.servers"]
    admin = AdminClient(client)
    try:
        described = admin.describe_consumer_groups([group_id], request_timeout=timeout)[group_id].result(timeout)
    except KafkaException as e:
        raise GroupAdminError(f"describing group {group_id!r} on {bootstrap} failed: {e}") from e
    members = tuple(GroupMember(m.member_id, m.client_id, m.group_instance_id, m.host) for m in described.members)
    return GroupDescription(described.state.name, members)


def describe_group_members(kafka: Kafka, group_id: str, timeout: float = 10.0) -> list[GroupMember]:
    """The members the coordinator lists for ``group_id`` (DescribeGroups)."""
    return list(describe_group(kafka, group_id, timeout).members)


def remove_members(kafka: Kafka, group_id: str, members: Sequence[GroupMember],
                   timeout: float = 10.0) -> dict[str, str]:
    """Remove ``members`` from ``group_id`` (KIP-345); member_id -> Kafka error name ("NONE": removed).
    A member named by its group.instance.id alone (member_id ``""``) is the static member with that
    id, and its result is under that id.

    Raises GroupAdminError when the coordinator cannot be reached or answers something unusable,
    WireAuthError when ``kafka``'s security settings are not supported by the hand-framed requests."""
    client = _client(kafka)
    bootstrap = client["bootstrap.servers"]
    auth = BrokerAuth.from_client_config(client)
    try:
        return _remove(bootstrap, group_id, list(members), time.monotonic() + timeout, auth)
    except GroupAdminError as e:
        raise GroupAdminError(f"removing members from group {group_id!r} (bootstrap {bootstrap}): {e}") from e


def _name(m: GroupMember) -> str:
    """What a member's result is listed under: its member id, else its group.instance.id."""
    return m.member_id or m.group_instance_id or ""


def _remove(bootstrap: str, group_id: str, members: list[GroupMember], deadline: float,
            auth: BrokerAuth) -> dict[str, str]:
    result: dict[str, str] = {}
    while members:
        conn = _coordinator(bootstrap, group_id, deadline, auth)
        try:
            version = pick_version(conn.versions, LEAVE_GROUP, 3)
            if version is None:
                raise GroupAdminError(f"broker {conn.where} supports no non-flexible LeaveGroup version")
            codes: dict[str, int] = {}
            for batch in [members] if version >= 3 else [[m] for m in members]:
                body = conn.call(LEAVE_GROUP, version, encode_leave_group(group_id, batch, version))
                error, per_member = decode_leave_group(body, version)
                for index, m in enumerate(batch):
                    code = _answer_for(m, index, per_member, len(batch)) if error == 0 and version >= 3 else error
                    if code is None:
                        raise GroupAdminError(f"broker {conn.where} did not answer for member {_name(m)!r}")
                    codes[_name(m)] = code
        finally:
            conn.close()
        result.update({mid: error_name(code) for mid, code in codes.items()})
        # the coordinator moved or was loading: ask again about those members
        members = [m for m in members if codes[_name(m)] in _RETRIABLE]
        if members:
            if time.monotonic() + 0.2 > deadline:
                break
            time.sleep(0.2)
    return result


def fence_transactional_id(kafka: Kafka, transactional_id: str, timeout: float = 30.0) -> None:
    """Fence every earlier producer of ``transactional_id`` and abort its open transaction.

    A producer with that id calls ``init_transactions()``: the coordinator bumps the epoch, which
    aborts whatever transaction a dead (or zombie) producer left open."""
    client = _client(kafka)
    producer = Producer({**client, "transactional.id": transactional_id})
    try:
        producer.init_transactions(timeout)
    except KafkaException as e:
        raise GroupAdminError(f"fencing transactional.id {transactional_id!r} on {client['bootstrap.servers']} "
                              f"failed: {e}") from e
    finally:
        producer.flush(1.0)


def list_transactions(kafka: Kafka, states: Sequence[str] = ("Ongoing",),
                      timeout: float = 10.0) -> list[tuple[str, int, str]]:
    """Every broker's transactions in ``states`` (all states if empty), as (transactional_id,
    producer_id, state) (ListTransactions, KIP-664). Raises GroupAdminError when a broker cannot
    answer."""
    deadline = time.monotonic() + timeout
    client = _client(kafka)
    bootstrap = client["bootstrap.servers"]
    auth = BrokerAuth.from_client_config(client)
    admin = AdminClient(client)
    try:
        brokers = admin.list_topics(timeout=timeout).brokers.values()
    except KafkaException as e:
        raise GroupAdminError(f"listing the brokers of {bootstrap} failed: {e}") from e
    found: list[tuple[str, int, str]] = []
    for broker in brokers:
        conn = _Connection(broker.host or "127.0.0.1", broker.port, deadline, auth)
        try:
            if pick_version(conn.versions, LIST_TRANSACTIONS, 0) is None:
                raise GroupAdminError(f"broker {conn.where} does not support ListTransactions (Kafka 3.0+)")
            error, listed = decode_list_transactions(
                conn.call(LIST_TRANSACTIONS, 0, encode_list_transactions(states), flexible=True))
        finally:
            conn.close()
        if error:
            raise GroupAdminError(f"ListTransactions on {conn.where}: {error_name(error)}")
        found += listed
    return found


def fence_transactions(kafka: Kafka, owned: Callable[[str], bool], timeout: float = 30.0,
                       producer: Kafka | None = None) -> list[str]:
    """Fence every open transaction whose transactional id is ``owned``: aborts them, so the last
    stable offset of what they wrote moves on. Returns the ids fenced. ``producer``: the fencing
    producers' configuration (default: ``kafka``'s)."""
    deadline = time.monotonic() + timeout
    ids = sorted({tid for tid, _pid, _state in list_transactions(kafka, timeout=timeout) if owned(tid)})
    for tid in ids:
        fence_transactional_id(kafka if producer is None else producer, tid, max(1.0, deadline - time.monotonic()))
    return ids
