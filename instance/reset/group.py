"""The application's consumer group during a reset: who is in it, the refusal while anyone is, and
``--force``'s removal of the members (Kafka's remove-members operation, KIP-345, which
instance/runtime/group_admin.py frames by hand: confluent-kafka lacks it; with the command's TLS
and SASL settings, instance/kafka_wire/wire_auth.py).

Both brokers support the removal: Apache Kafka (4.1: groups of either ``group.protocol``) and the
dev broker answer LeaveGroup for other members, static ones (a ``group.instance.id``) included.
It is what ``--force`` is for: members of instances that stopped yet are still listed, because a
static member sends no LeaveGroup when it stops and waits out ``session.timeout.ms``, and because
the dev broker never expires a member whose instance crashed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from instance.kafka_errors import error_name, kafka_error
from instance.kafka_wire.wire_auth import WireAuthError
from instance.reset.errors import ResetError
from instance.runtime.group_admin import GroupAdminError, GroupMember, remove_members

#: seconds the coordinator has to answer, and removed members to leave the description
GROUP_TIMEOUT_S = 30.0
#: members a message names before "and N more"
_NAMED = 3


def members(admin: AdminClient, group: str) -> tuple[GroupMember, ...]:
    """The members the group's coordinator lists (none for a group that does not exist)."""
    try:
        described = admin.describe_consumer_groups([group], request_timeout=GROUP_TIMEOUT_S)[group].result()
    except KafkaException as e:
        err = kafka_error(e)
        if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
            return ()
        raise ResetError(error_name(e), f"describing group {group!r} failed: "
                         f"{err.str() if err is not None else e}; nothing was changed") from None
    return tuple(GroupMember(m.member_id, m.client_id, m.group_instance_id, (m.host or "").lstrip("/"))
                 for m in described.members)


def who(found: Sequence[GroupMember]) -> str:
    """The members for a message: client id (static id) on host, the first few."""
    named = [f"{m.client_id or m.member_id}"
             + (f" (group.instance.id {m.group_instance_id})" if m.group_instance_id else "")
             + (f" on {m.host}" if m.host else "") for m in found[:_NAMED]]
    more = f" and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
    return ", ".join(named) + more


def refusal(group: str, found: Sequence[GroupMember]) -> ResetError:
    return ResetError("NON_EMPTY_GROUP", (
        f"group {group!r} still has {len(found)} active member{'s' if len(found) != 1 else ''}: {who(found)}. "
        "Stop every instance of the application first; --force removes members of instances that stopped "
        "but are still listed (static members until session.timeout.ms, crashed ones on the dev broker); "
        "nothing was changed"))


def remove(bootstrap: str, group: str, found: Sequence[GroupMember], client_config: Mapping[str, Any],
           admin: AdminClient) -> None:
    """Remove ``found`` from ``group`` and wait until the coordinator lists no member; a member
    that could not be removed, or members listed still (instances that are running rejoin), is a
    ResetError saying nothing else was changed."""
    try:
        answers = remove_members({**client_config, "bootstrap.servers": bootstrap}, group, found,
                                 timeout=GROUP_TIMEOUT_S)
    except (GroupAdminError, WireAuthError) as e:
        raise ResetError("MEMBERS_NOT_REMOVED", f"--force could not remove the members of group {group!r}: {e}; "
                         "nothing was changed") from None
    # UNKNOWN_MEMBER_ID: it left meanwhile
    failed = {member: code for member, code in answers.items() if code not in ("NONE", "UNKNOWN_MEMBER_ID")}
    if failed:
        member, code = next(iter(sorted(failed.items())))
        raise ResetError(code, f"--force could not remove {len(failed)} member(s) of group {group!r}, e.g. "
                         f"{member[:64]!r}: {code}; nothing else was changed")
    deadline = time.monotonic() + GROUP_TIMEOUT_S
    while True:
        left = members(admin, group)
        if not left:
            return
        if time.monotonic() > deadline:
            raise ResetError("NON_EMPTY_GROUP", (
                f"group {group!r} lists {len(left)} member(s) {GROUP_TIMEOUT_S:.0f}s after --force removed them: "
                f"{who(left)}; are instances still running? Stop them; nothing else was changed"))
        time.sleep(0.2)
