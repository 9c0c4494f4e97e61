"""The one place where failures become HTTP answers: ``{"error": {"code", "message", ...}}``.

Handlers raise; :func:`error_middleware` renders. The codes are stable (clients and the dashboard
switch on them), the messages are for people. gRPC statuses from the instances map as the servers
assign them (``instance/server/status.py``): NOT_FOUND is an unknown store, INVALID_ARGUMENT a
bad key, token or bound, FAILED_PRECONDITION a watch of a store without a changelog, UNAVAILABLE a
refusal whose typed details give the reason (kernel/status_details.py).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from aiohttp import web

from kernel.echo import clip
from kernel.status_details import refusal_of
from kernel.unavailable import STALE_HINT, FailureReason
from router.client.async_client import LAST_ENTRY

log = logging.getLogger(__name__)


class GatewayReason(enum.StrEnum):
    """The reasons of a 503 the gateway gives itself (the others are the instances' refusals,
    :class:`FailureReason`); the JSON ``reason`` is the member's name."""

    #: no instance could be reached at all
    UNREACHABLE = "UNREACHABLE"
    #: /readyz: no fresh routing table or no live RUNNING instance
    NOT_READY = "NOT_READY"
    #: every instance asked is at its watch cap
    WATCH_CAP_REACHED = "WATCH_CAP_REACHED"


UNREACHABLE = GatewayReason.UNREACHABLE


class ApiError(Exception):
    """An HTTP error with a stable ``code``; ``extra`` goes into the error object as it is."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": clip(self.message), **self.extra}}


def bad_request(message: str) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message)


def is_refusal(e: grpc.RpcError) -> bool:
    """UNAVAILABLE that an instance sent on purpose (typed details give the reason): the cluster
    answered. Anything else UNAVAILABLE is the transport: that instance could not be reached."""
    return e.code() is grpc.StatusCode.UNAVAILABLE and refusal_of(e) is not None


def from_rpc_error(e: grpc.RpcError) -> ApiError:
    """The HTTP answer to an instance's gRPC status."""
    code, details = e.code(), e.details() or ""
    if code is grpc.StatusCode.NOT_FOUND:
        return ApiError(404, "UNKNOWN_STORE", details)
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return ApiError(400, "INVALID_ARGUMENT", details)
    if code is grpc.StatusCode.FAILED_PRECONDITION:  # e.g. watching a store without a changelog
        return ApiError(409, "FAILED_PRECONDITION", details)
    if code is grpc.StatusCode.UNAVAILABLE:
        refused = refusal_of(e)
        if refused is not None:
            return unavailable(refused.reason, refused.message, list(refused.tried), refused.standby_holds)
        return unavailable(UNREACHABLE, details)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return ApiError(504, "DEADLINE_EXCEEDED", details or "the instances did not answer in time")
    return ApiError(502, "UPSTREAM_ERROR", f"{code.name}: {details}")


def unavailable(reason: FailureReason | GatewayReason, message: str, tried: list[str] | None = None,
                standby_holds: bool = False) -> ApiError:
    """503; ``standby_holds``: a stale read would be answered (the message says how, for people)."""
    if standby_holds:
        return ApiError(503, "UNAVAILABLE", f"{message}; {STALE_HINT}", reason=reason, tried=tried or [],
                        standby_holds=True)
    return ApiError(503, "UNAVAILABLE", message, reason=reason, tried=tried or [])


def to_api_error(e: BaseException) -> ApiError:
    """Any exception a handler lets out, as an ApiError (500 INTERNAL for the unexpected)."""
    if isinstance(e, ApiError):
        return e
    if isinstance(e, grpc.RpcError):
        return from_rpc_error(e)
    if isinstance(e, web.HTTPException):  # aiohttp's own: no route, wrong method, ...
        codes = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "PAYLOAD_TOO_LARGE"}
        return ApiError(e.status, codes.get(e.status, "HTTP_ERROR"), e.reason)
    if isinstance(e, UnicodeError):  # caller text protobuf cannot carry (lone surrogates)
        return bad_request(str(e))
    log.error("gateway request failed", exc_info=e)
    return ApiError(500, "INTERNAL", f"{type(e).__name__}: {e}")


def error_response(err: ApiError) -> web.Response:
    headers = {"Retry-After": str(err.extra.get("retry_after_s", 1))} if err.status == 503 else None
    return web.json_response(err.body(), status=err.status, headers=headers)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:  # redirects and the like pass through
            raise
        return error_response(to_api_error(e))
    except Exception as e:
        return error_response(_with_via(to_api_error(e)))


def _with_via(err: ApiError) -> ApiError:
    """The instance that answered with this error, as a success names it (``via``)."""
    via = LAST_ENTRY.get()
    if via and "via" not in err.extra:
        err.extra["via"] = via
    return err
