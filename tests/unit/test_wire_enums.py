"""Each shared vocabulary is one Python enum mirrored once in the proto: every member has its proto
value and every proto value but UNSPECIFIED its member; names are the JSON's text."""

from __future__ import annotations

import json

from kernel.instance_state import State
from kernel.local_read import Role
from kernel.rpc import iqmesh_pb2 as pb
from kernel.unavailable import FailureReason
from kernel.wire_enums import reason_of, reason_pb, role_of, role_pb, state_of, state_pb


def test_every_member_round_trips_and_every_proto_value_has_a_member() -> None:
    assert [role_of(role_pb(r)) for r in Role] == list(Role)
    assert [state_of(state_pb(s)) for s in State] == list(State)
    assert [reason_of(reason_pb(r)) for r in FailureReason] == list(FailureReason)
    assert {role_pb(r) for r in Role} == set(pb.Role.values()) - {pb.ROLE_UNSPECIFIED}
    assert {state_pb(s) for s in State} == set(pb.InstanceState.values()) - {pb.INSTANCE_STATE_UNSPECIFIED}
    assert {reason_pb(r) for r in FailureReason} == set(pb.QueryRefusal.Reason.values()) - {
        pb.QueryRefusal.REASON_UNSPECIFIED}


def test_unknown_values_read_as_the_safe_member() -> None:
    """An older or newer writer: a replica left out, an instance not routed to, a refusal retried."""
    assert role_of(pb.ROLE_UNSPECIFIED) is None and role_of(99) is None
    assert state_of(pb.INSTANCE_STATE_UNSPECIFIED) is State.NOT_RUNNING and state_of(99) is State.NOT_RUNNING
    assert reason_of(pb.QueryRefusal.REASON_UNSPECIFIED) is FailureReason.NOT_AVAILABLE


def test_json_spells_the_names() -> None:
    """The REST API's text is each member's name, with no mapping of its own."""
    doc = {"role": Role.STANDBY, "state": State.PENDING_SHUTDOWN, "reason": FailureReason.NO_REPLICA_WITHIN_LAG}
    assert json.loads(json.dumps(doc)) == {"role": "STANDBY", "state": "PENDING_SHUTDOWN",
                                           "reason": "NO_REPLICA_WITHIN_LAG"}


def test_read_metadata_carries_enums() -> None:
    md = pb.ReadMetadata(role=role_pb(Role.RESTORING), instance_state=state_pb(State.REBALANCING))
    back = pb.ReadMetadata.FromString(md.SerializeToString())
    assert (role_of(back.role), state_of(back.instance_state)) == (Role.RESTORING, State.REBALANCING)
