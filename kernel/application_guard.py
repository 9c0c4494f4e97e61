"""Calls name the application they are meant for, so an instance of another application never
answers them.

Two applications' servers can end up behind one address (a port reused, a stale DNS entry, a
routing table from another cluster). A client or a forwarding instance that knows which
application it queries sends ``iqmesh-application: <application.id>`` with each call; a server
of another application refuses it with FAILED_PRECONDITION carrying a ``WrongApplication`` in
its typed details (kernel/status_details.py; the text starts with ``WRONG_APPLICATION`` for
people), and the caller treats that endpoint as the wrong one (as if unreachable).
Calls without the header (a first Metadata call, grpcurl) are served as before.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from kernel.security import header_value, refusing_handler
from kernel.status_details import error_details, wrong_application_status

#: the call metadata naming the application a call is meant for
APPLICATION_HEADER = "iqmesh-application"
#: the first word of the details of the refusal
WRONG_APPLICATION = "WRONG_APPLICATION"
#: calls any caller may make of any server (health checks, reflection)
_OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def is_wrong_application(e: grpc.RpcError) -> bool:
    """Whether ``e`` is a server's refusal of a call meant for another application (its typed
    details say so)."""
    return error_details(e).wrong_application


class ApplicationInterceptor(grpc.ServerInterceptor):
    """Refuses calls whose ``iqmesh-application`` names another application than ``application_id``."""

    def __init__(self, application_id: str) -> None:
        self.application_id = application_id

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
                          details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if details.method.startswith(_OPEN_PREFIXES):
            return continuation(details)
        expected = header_value(details, APPLICATION_HEADER)
        if not expected or expected == self.application_id:
            return continuation(details)
        message = (f"{WRONG_APPLICATION}: this instance serves application {self.application_id[:64]!r}, not "
                   f"{expected[:64]!r}: another application's server answers at this address")
        status = wrong_application_status(message, self.application_id, expected)
        return refusing_handler(continuation(details), status.code, status.details, status.trailing_metadata)
