"""The client's one core as steps, driven by hand (the seam both clients drive): what a Get asks,
in order, when a replica refuses, and which refusals end it at once."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from kernel.rpc import iqmesh_pb2 as pb
from kernel.status_details import refusal_of
from kernel.unavailable import FailureReason, UnavailableError
from router.client.client_core import ClientError, unavailable
from router.client.client_steps import ClientCore, Done, Driver, Pause, Probe, Refresh, Rpc, Step
from router.client.routing_table import RoutingTable


class App:
    application_id = ""


def _core(allow_standby: bool = True) -> ClientCore:
    reply = pb.MetadataReply(asked="a", application_id="app", store_routes=[
        pb.StoreRoute(store="counts", subtopology=0, partitions=1, key_serde="string", value_serde="long")],
        instances=[pb.InstanceMetadata(instance_id="a", endpoint="a:1", state=pb.INSTANCE_STATE_RUNNING, alive=True,
                                       active_tasks=["0_0"]),
                   pb.InstanceMetadata(instance_id="b", endpoint="b:1", state=pb.INSTANCE_STATE_RUNNING, alive=True,
                                       standby_tasks=["0_0"] if allow_standby else [])])
    core = ClientCore("a:1", 5.0, 30.0, App())
    core.table = RoutingTable(reply)
    return core


def _refused(reason: FailureReason) -> ClientError:
    return unavailable(UnavailableError(reason, "not now"))


def _found(served_by: str) -> pb.GetReply:
    return pb.GetReply(found=True, value_json="3", metadata=pb.ReadMetadata(served_by=served_by, role=pb.ROLE_ACTIVE))


def test_a_get_goes_straight_to_the_owner_and_retries_a_refusal_after_a_fresh_table() -> None:
    core = _core()
    driver = Driver(core.get("counts", "k"))
    seen: list[Step] = []

    def step(s: Step | Done) -> Step:
        assert not isinstance(s, Done)
        seen.append(s)
        return s
    first = step(driver.first())
    assert isinstance(first, Rpc) and (first.endpoint, first.method) == ("a:1", "Get")
    assert first.request.forwarded  # the owner answers or refuses, never passes it on
    pause = step(driver.throw(_refused(FailureReason.REBALANCING)))
    assert isinstance(pause, Pause) and core.stale  # the cluster moved: wait, then a fresh table
    refresh = step(driver.send(None))
    assert isinstance(refresh, Refresh) and refresh.seen is core.table
    again = step(driver.send(None))  # the refresh found nothing newer: the same owner again
    assert isinstance(again, Rpc) and again.endpoint == "a:1"
    done = driver.send(_found("a"))
    assert isinstance(done, Done) and done.value.found and done.value.asked == "a:1"


def test_a_stale_read_passes_a_refusing_owner_to_its_standby() -> None:
    core = _core()
    driver = Driver(core.get("counts", "k", allow_stale=True))
    first = driver.first()
    assert isinstance(first, Rpc) and first.endpoint == "a:1"
    second = driver.throw(_refused(FailureReason.NOT_ACTIVE))
    assert isinstance(second, Rpc) and second.endpoint == "b:1"  # the next candidate, no pause
    done = driver.send(_found("b"))
    assert isinstance(done, Done) and done.value.asked == "b:1"


@pytest.mark.parametrize("reason", [FailureReason.NOT_UP_TO_BOUND, FailureReason.NO_REPLICA_WITHIN_LAG])
def test_the_callers_own_bounds_come_back_at_once(reason: FailureReason) -> None:
    driver = Driver(_core(allow_standby=False).get("counts", "k"))
    assert isinstance(driver.first(), Rpc)
    with pytest.raises(grpc.RpcError) as e:
        driver.throw(_refused(reason))
    refused = refusal_of(e.value)
    assert refused is not None and refused.reason is reason and refused.tried == ("a",)


def test_an_unreachable_entry_is_passed_over_and_its_metadata_becomes_the_table() -> None:
    core = ClientCore("dead:1,a:1", 5.0, 30.0, app := App())
    driver = Driver(core.metadata())
    first = driver.first()
    assert isinstance(first, Rpc) and (first.endpoint, first.method) == ("dead:1", "Metadata")
    second = driver.throw(ClientError(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses"))
    assert isinstance(second, Rpc) and second.endpoint == "a:1"
    reply: Any = pb.MetadataReply(asked="a", application_id="app")
    done = driver.send(reply)
    assert isinstance(done, Done) and done.value is reply
    assert core.table is not None and app.application_id == "app"
    assert core.entries.order(core.table) == ["a:1", "dead:1"]  # the one that answered first, the suspect last


@pytest.mark.parametrize("nothing_listens", [True, False])
def test_before_any_table_a_transport_failure_asks_whether_anything_listens_at_the_seeds(
        nothing_listens: bool) -> None:
    """Nothing listening at every seed ends a Get at once (no retry starts a server); a seed that
    accepts connections but did not answer in time is retried, as any unreachable instance."""
    core = ClientCore("a:1,b:1", 5.0, 30.0, App())
    driver = Driver(core.get("counts", "k"))
    transport = ClientError(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")
    assert isinstance(driver.first(), Refresh)  # no table yet: the driver's refresh found none
    first = driver.send(None)
    assert isinstance(first, Rpc) and first.endpoint == "a:1"
    second = driver.throw(transport)
    assert isinstance(second, Rpc) and second.endpoint == "b:1"  # the next seed first
    probe = driver.throw(transport)
    assert isinstance(probe, Probe) and sorted(probe.endpoints) == ["a:1", "b:1"]
    if nothing_listens:
        with pytest.raises(grpc.RpcError) as e:
            driver.send(True)
        assert e.value is transport
    else:
        assert isinstance(driver.send(False), Pause)
