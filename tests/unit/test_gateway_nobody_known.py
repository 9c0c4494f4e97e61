"""A gateway that knows no instance says why when its discovery knows (the instances topic of the
application does not exist: check --application-id), on every route and in the dashboard's
snapshot, not only on /readyz."""

from __future__ import annotations

import pytest

from router.client.watch_client import WatchNotStarted
from router.gateway.backend import Backend
from router.gateway.discovery import Discovery
from router.gateway.errors import UNREACHABLE, ApiError
from router.gateway.metrics import GatewayMetrics
from router.gateway.snapshot import SnapshotPoller
from router.gateway.watch import not_started

PROBLEM = ("application 'nope' has no instances (yet): its instances topic nope-instances does not exist on "
           "127.0.0.1:9092 (check --application-id, or start its instances)")


class _NoTopic(Discovery):
    @property
    def problem(self) -> str:
        return PROBLEM


async def test_the_discovery_problem_is_the_answer_when_no_instance_is_known() -> None:
    backend = Backend(_NoTopic())
    try:
        with pytest.raises(ApiError) as e:
            await backend.call(lambda c: c.metadata())
        assert e.value.status == 503 and e.value.extra["reason"] == UNREACHABLE and e.value.message == PROBLEM
        snap = await SnapshotPoller(backend, GatewayMetrics()).poll_once()
        assert snap.error == PROBLEM
        assert not_started(WatchNotStarted([]), backend.nobody_known()).message == PROBLEM
    finally:
        await backend.close()
    plain = Backend(Discovery())
    try:
        assert plain.nobody_known() == "no instance known yet (discovery has found none)"
    finally:
        await plain.close()
