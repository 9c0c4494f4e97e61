"""aiohttp answers a request it cannot parse (a request line or a header over its limits, broken
HTTP) itself, in plain text, before any middleware runs. The gateway's connections use this
handler class instead, so those answers come in the same JSON error envelope as every other,
logged as one line (a client's mistake is no server error: no traceback) and without repeating
what the client sent."""

from __future__ import annotations

import logging
from http import HTTPStatus

from aiohttp import web, web_protocol, web_server
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_request import BaseRequest

from kernel.echo import ECHO_CHARS, clip
from router.gateway.errors import ApiError, error_response

log = logging.getLogger(__name__)

_CODES = {400: "INVALID_ARGUMENT", 413: "PAYLOAD_TOO_LARGE", 414: "URI_TOO_LONG", 431: "HEADERS_TOO_LARGE",
          504: "DEADLINE_EXCEEDED"}
#: aiohttp's message of a request it could not parse (its words, then up to 64 characters of input)
_MESSAGE_CHARS = 2 * ECHO_CHARS
_LONG_KEYS = ' (a key too long for a URL: POST /v1/stores/{store}/keys with {"key": "..."})'


class JsonErrorRequestHandler(web_protocol.RequestHandler):
    #: the longest request line the gateway's app takes (router/gateway/app.py sets it)
    max_request_line = 8190

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            super().handle_error(request, status, exc, message)  # a bug of ours: logged with its traceback
            text = HTTPStatus(status).phrase  # no traceback for the client
        else:
            if request.writer.output_size > 0:  # as aiohttp: the connection is broken
                raise ConnectionError("Response is sent already, cannot send another response with the error message")
            status, text = unparsed_request_error(status, exc, message)
            log.info("bad HTTP request from %s: %s", request.remote, text)
        code = _CODES.get(status, "INTERNAL" if status >= 500 else "HTTP_ERROR")
        response = error_response(ApiError(status, code, text))
        response.force_close()
        return response


def unparsed_request_error(status: int, exc: BaseException | None, message: str | None) -> tuple[int, str]:
    """The status and text of a request that could not be parsed; what it sent is not echoed
    beyond what :func:`clip` allows."""
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the allowed"
        if limit == JsonErrorRequestHandler.max_request_line:
            return 414, f"the request line (the URL) is longer than {limit} bytes{_LONG_KEYS}"
        return 431, f"a request header is longer than {limit} bytes"
    return status, clip(message or HTTPStatus(status).phrase, _MESSAGE_CHARS)


def install(max_request_line: int) -> None:
    """Every aiohttp server of this process renders its own errors as JSON (the gateway is the
    only server of its process); ``max_request_line``: the app's request line limit."""
    JsonErrorRequestHandler.max_request_line = max_request_line
    web_server.RequestHandler = JsonErrorRequestHandler  # type: ignore[misc]
