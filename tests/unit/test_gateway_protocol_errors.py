"""Requests the gateway cannot parse get the JSON error envelope with the right status, a message
that repeats at most 64 characters of what was sent, and one log line without a traceback (a
client's mistake is no server error)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from aiohttp.http_exceptions import LineTooLong
from aiohttp.test_utils import TestServer

from instance.local.broker import free_port
from router.gateway import GatewayConfig, create_app
from router.gateway.app import MAX_REQUEST_LINE
from router.gateway.protocol_errors import unparsed_request_error


async def _raw(server: TestServer, head: bytes) -> tuple[int, dict[str, object]]:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(head)
    await writer.drain()
    data = await reader.read()
    writer.close()
    status_line, _, rest = data.partition(b"\r\n")
    body = rest.split(b"\r\n\r\n", 1)[1]
    return int(status_line.split()[1]), json.loads(body)


@pytest.mark.parametrize("what,head,status,code,says", [
    ("a 100 KB header", b"GET /v1/instances HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
     431, "HEADERS_TOO_LARGE", "a request header is longer than 8190 bytes"),
    ("a broken header", b"GET / HTTP/1.1\r\nHost: x\r\nBad\x01Name" + b"z" * 300 + b": v\r\n\r\n",
     400, "INVALID_ARGUMENT", ""),
])
async def test_a_request_that_cannot_be_parsed(caplog: pytest.LogCaptureFixture, what: str, head: bytes,
                                               status: int, code: str, says: str) -> None:
    caplog.set_level(logging.INFO)
    app = create_app(GatewayConfig(seeds=(f"127.0.0.1:{free_port()}",), timeout=2))
    async with TestServer(app) as server:
        got, body = await _raw(server, head)
    error = body["error"]
    assert isinstance(error, dict)
    assert (got, error["code"]) == (status, code), (what, body)
    assert says in str(error["message"]) and "aaaaaaaaaa" not in str(error["message"]), body
    assert len(str(error["message"])) <= 200, body
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert [r.levelno for r in caplog.records if "bad HTTP request" in r.getMessage()] == [logging.INFO]


def test_a_url_over_the_request_line_limit_suggests_the_post_lookup() -> None:
    """(Sent for real, 3 MiB of URL reset the connection before the answer could be read.)"""
    create_app(GatewayConfig(seeds=("127.0.0.1:1",)))  # installs the handler with the app's limit
    status, text = unparsed_request_error(400, LineTooLong(b"k" * 100, MAX_REQUEST_LINE), None)
    assert status == 414 and "POST /v1/stores/{store}/keys" in text and "kkk" not in text
