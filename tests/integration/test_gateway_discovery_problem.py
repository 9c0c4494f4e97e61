"""A gateway started with ``--bootstrap`` for an application that has no instances topic (or with a
dead bootstrap) says why in one line, not again for each attempt, and ``/readyz`` says it too."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiohttp.test_utils import TestClient, TestServer

from instance.local.broker import free_port
from router.gateway import GatewayConfig
from router.gateway.app import create_app
from router.gateway.context import GATEWAY
from router.gateway.discovery import TopicDiscovery

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("dead", [False, True], ids=["no-such-application", "dead-bootstrap"])
async def test_one_line_why_no_instance_is_known(bootstrap: str, unique: str, dead: bool,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="router.gateway")
    where = f"127.0.0.1:{free_port()}" if dead else bootstrap
    app = create_app(GatewayConfig(bootstrap=where, application_id=f"nope-{unique}", timeout=2,
                                   poll_interval=0.2))
    discovery = app[GATEWAY].discovery
    assert isinstance(discovery, TopicDiscovery)
    discovery.reader._interval = 0.05  # many attempts quickly: the log must not grow with them
    # and none of them is a repeat after REPEAT_S (30 s), however long a busy machine takes over
    # them (that the line comes again after it is tests/unit/test_discovery_problem.py's)
    discovery.reader.problem._repeat_s = 3600.0
    async with TestClient(TestServer(app)) as client:
        expected = "is the broker up at --bootstrap?" if dead else "has no instances (yet)"

        async def readyz() -> str:
            r = await client.get("/readyz")
            assert r.status == 503
            return str((await r.json())["error"]["message"])

        attempts = 3 if dead else 20
        deadline = time.monotonic() + 120
        message = await readyz()
        while getattr(discovery.reader, "problem", None) is None or discovery.reader.problem.reported < attempts:
            assert time.monotonic() < deadline, f"the reader did not fail {attempts} times: {message}"
            await asyncio.sleep(0.05)
            message = await readyz()
        assert expected in message and f"nope-{unique}-iqmesh-instances" in message
    lines = [r for r in caplog.records if r.name.startswith("router.gateway")]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.WARNING and expected in lines[0].getMessage()
    assert lines[0].exc_info is None
