"""The routing client keeps to its caller's deadline, retries included, on a clock of the test's
own: every attempt gets at most what is left of the deadline, no pause runs past it, and the call
ends once it has passed, whatever the machine's speed (the integration test,
tests/integration/test_query_client.py, only bounds the same against a silent real instance)."""

from __future__ import annotations

from types import SimpleNamespace

import grpc
import pytest

from kernel.rpc import iqmesh_pb2 as pb
from router.client import client_core, routing_table
from router.client.client_core import ClientError, Deadline
from router.client.client_steps import ClientCore, Done, Driver, Pause, Probe, Refresh, Rpc, Step
from router.client.routing_table import RoutingTable


class App:
    application_id = ""


class Clock:
    """``time.monotonic`` of the client modules, moved by the test only."""

    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    fake = SimpleNamespace(monotonic=c.monotonic)
    monkeypatch.setattr(client_core, "time", fake)
    monkeypatch.setattr(routing_table, "time", fake)
    return c


def _core() -> ClientCore:
    reply = pb.MetadataReply(asked="a", application_id="app", store_routes=[
        pb.StoreRoute(store="counts", subtopology=0, partitions=1, key_serde="string", value_serde="long")],
        instances=[pb.InstanceMetadata(instance_id="a", endpoint="a:1", state=pb.INSTANCE_STATE_RUNNING, alive=True,
                                       active_tasks=["0_0"]),
                   pb.InstanceMetadata(instance_id="b", endpoint="b:1", state=pb.INSTANCE_STATE_RUNNING, alive=True)])
    core = ClientCore("a:1,b:1", 10.0, 30.0, App())
    core.table = RoutingTable(reply)
    return core


@pytest.mark.parametrize("silent", [True, False], ids=["owner-silent", "owner-refusing-connections"])
def test_a_get_ends_by_its_deadline_retries_included(clock: Clock, silent: bool) -> None:
    """A Get of 1 s (the client's own timeout is 10 s) of a key whose owner never answers (each
    attempt takes all the time it is given) or drops each connection at once (retried after a
    pause): nothing asked of the driver reaches past the caller's deadline, and the call raises
    by it."""
    core = _core()
    deadline_at = clock.t + 1.0
    driver = Driver(core.get("counts", "k", timeout=1.0))
    transport = ClientError(grpc.StatusCode.DEADLINE_EXCEEDED if silent else grpc.StatusCode.UNAVAILABLE,
                            "Deadline Exceeded" if silent else "Connection reset by peer")
    steps: list[Step] = []
    step: Step | Done = driver.first()
    with pytest.raises(grpc.RpcError) as e:
        while True:
            assert not isinstance(step, Done), f"answered without an answer: {steps}"
            steps.append(step)
            assert len(steps) < 1000, "the call never ends"
            if isinstance(step, Rpc):
                assert 0 <= step.timeout <= deadline_at - clock.t, (step, clock.t, deadline_at)
                clock.t += step.timeout if silent else min(0.01, step.timeout)
                step = driver.throw(transport)
            elif isinstance(step, Pause):
                assert clock.t + step.seconds <= deadline_at, (step, clock.t, deadline_at)
                clock.t += step.seconds
                step = driver.send(None)
            elif isinstance(step, Refresh):
                assert isinstance(step.deadline, Deadline) and step.deadline.at == deadline_at
                step = driver.send(None)  # no newer table: the same owner again
            else:
                assert isinstance(step, Probe)
                step = driver.send(False)  # something listens there
    assert e.value.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE), e.value
    assert clock.t <= deadline_at
    assert any(isinstance(s, Rpc) for s in steps)
    if not silent:  # a connection dropped at once is retried while the deadline leaves time
        assert sum(isinstance(s, Rpc) and s.method == "Get" for s in steps) > 1, steps
