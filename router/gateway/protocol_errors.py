"""aiohttp answers a request it cannot parse (a request line or a header over its limits, broken
HTTP) itself, in plain text, before any middleware runs. The gateway's connections use this
handler class instead, so those answers come in the same JSON error envelope as every other."""

from __future__ import annotations

from http import HTTPStatus

from aiohttp import web, web_protocol, web_server
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_request import BaseRequest

from router.gateway.errors import ApiError, error_response

_CODES = {400: "INVALID_ARGUMENT", 413: "PAYLOAD_TOO_LARGE", 431: "HEADERS_TOO_LARGE", 504: "DEADLINE_EXCEEDED"}
_LONG_KEYS = ' (a key too long for a URL: POST /v1/stores/{store}/keys with {"key": "..."})'


class JsonErrorRequestHandler(web_protocol.RequestHandler):
    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs it; raises if a response was started
        if status < 500:
            text = (message or HTTPStatus(status).phrase) + (_LONG_KEYS if isinstance(exc, LineTooLong) else "")
        else:  # no traceback for the client
            text = HTTPStatus(status).phrase
        code = _CODES.get(status, "INTERNAL" if status >= 500 else "HTTP_ERROR")
        response = error_response(ApiError(status, code, text))
        response.force_close()
        return response


def install() -> None:
    """Every aiohttp server of this process renders its own errors as JSON (the gateway is the
    only server of its process)."""
    web_server.RequestHandler = JsonErrorRequestHandler  # type: ignore[misc]
