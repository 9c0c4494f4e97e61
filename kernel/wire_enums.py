"""The proto mirrors of the shared vocabularies: one mapping each way between a Python enum and
its enum in proto/iqmesh.proto, used only where a message is built or read (the gRPC edges).

``Role`` <-> ``Role`` (``ROLE_*``), ``State`` <-> ``InstanceState`` (``INSTANCE_STATE_*``),
``FailureReason`` <-> ``QueryRefusal.Reason``. The tables are built from the names when this module
is imported, so a member without a mirror fails at import (and tests/unit/test_wire_enums.py checks
the other way). A value this version does not know (UNSPECIFIED: a writer older or newer than the
contract) reads as the safe member: a state that is not routed to, a refusal worth retrying.
"""

from __future__ import annotations

from kernel.instance_state import State
from kernel.local_read import Role
from kernel.rpc import iqmesh_pb2 as pb
from kernel.unavailable import FailureReason

_ROLE_PB: dict[Role, pb.Role] = {r: pb.Role.Value(f"ROLE_{r.name}") for r in Role}
_ROLE_OF: dict[int, Role] = {v: r for r, v in _ROLE_PB.items()}
_STATE_PB: dict[State, pb.InstanceState] = {
    s: pb.InstanceState.Value(f"INSTANCE_STATE_{s.name}") for s in State}
_STATE_OF: dict[int, State] = {v: s for s, v in _STATE_PB.items()}
_REASON_PB: dict[FailureReason, pb.QueryRefusal.Reason] = {
    r: pb.QueryRefusal.Reason.Value(r.name) for r in FailureReason}
_REASON_OF: dict[int, FailureReason] = {v: r for r, v in _REASON_PB.items()}


def role_pb(role: Role) -> pb.Role:
    return _ROLE_PB[role]


def role_of(value: int) -> Role | None:
    """The role a message carries; None when unspecified or unknown (the replica is left out)."""
    return _ROLE_OF.get(value)


def state_pb(state: State) -> pb.InstanceState:
    return _STATE_PB[state]


def state_of(value: int) -> State:
    """The state a message carries; unspecified or unknown is NOT_RUNNING (not routed to)."""
    return _STATE_OF.get(value, State.NOT_RUNNING)


def reason_pb(reason: FailureReason) -> pb.QueryRefusal.Reason:
    return _REASON_PB[reason]


def reason_of(value: int) -> FailureReason:
    """The refusal reason a message carries; unspecified or unknown is NOT_AVAILABLE."""
    return _REASON_OF.get(value, FailureReason.NOT_AVAILABLE)
