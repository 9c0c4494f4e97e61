"""Finding a group's coordinator (FindCoordinator, key type GROUP) and connecting to it."""

from __future__ import annotations

import time

from instance.kafka_wire.apis import FIND_COORDINATOR
from instance.kafka_wire.connection import CLIENT_ID, Connection, connect_any
from instance.kafka_wire.error_codes import COORDINATOR_MOVED, ErrorCode, error_name
from instance.kafka_wire.errors import BrokerConnectionError
from instance.kafka_wire.generated.find_coordinator_request import FindCoordinatorRequest
from instance.kafka_wire.wire_auth import PLAINTEXT, BrokerAuth

GROUP_KEY_TYPE = 0
#: FindCoordinator v4 batches keys (KIP-699): the answer is a list
_BATCHED_FROM = 4


class CoordinatorNotFoundError(BrokerConnectionError):
    """No broker named a coordinator for the group before the deadline."""


def find_coordinator(conn: Connection, group_id: str) -> tuple[str, int, int]:
    """(host, port, error code) of ``group_id``'s coordinator as ``conn``'s broker answers."""
    version = conn.version_for(FIND_COORDINATOR)
    if version >= _BATCHED_FROM:
        request = FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, coordinator_keys=(group_id,))
        answer = conn.call(FIND_COORDINATOR, request, version)
        if len(answer.coordinators) != 1:
            raise BrokerConnectionError(f"broker {conn.where} answered FindCoordinator with "
                                        f"{len(answer.coordinators)} coordinators for one group")
        c = answer.coordinators[0]
        return c.host, c.port, c.error_code
    old = conn.call(FIND_COORDINATOR, FindCoordinatorRequest(key=group_id, key_type=GROUP_KEY_TYPE), version)
    return old.host, old.port, old.error_code


def connect_coordinator(bootstrap: str, group_id: str, *, auth: BrokerAuth = PLAINTEXT,
                        client_id: str = CLIENT_ID, timeout: float = 10.0) -> Connection:
    """A connection to ``group_id``'s coordinator; asked again while it is loading or moving."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        conn = connect_any(bootstrap, auth=auth, client_id=client_id, timeout=timeout)
        try:
            host, port, code = find_coordinator(conn, group_id)
        except BaseException:
            conn.close()
            raise
        if code == ErrorCode.NONE:
            if f"{host}:{port}" == conn.where:
                return conn
            conn.close()
            return Connection(host, port, auth=auth, client_id=client_id, timeout=timeout)
        conn.close()
        last = error_name(code)
        if code not in COORDINATOR_MOVED:
            raise CoordinatorNotFoundError(f"FindCoordinator for group {group_id!r} on {bootstrap}: {last}")
        if time.monotonic() + 0.2 > deadline:
            raise CoordinatorNotFoundError(f"no coordinator for group {group_id!r} on {bootstrap} "
                                           f"after {timeout:.0f}s: {last}")
        time.sleep(0.2)
