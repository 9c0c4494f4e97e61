"""How the instances source reaches the mesh: plain settings (pickled to the Spark executors, which
dial their own clients from them: channels do not travel), the routing client built from them, and
the check, before Spark starts, that the instances accept the job's TLS settings and token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import grpc

from analytics.snapshot.options import SnapshotError
from kernel.security import AUTH_TOKEN, TLS_CA_FILE, Security
from kernel.status_details import refusal_of
from router.client.client_core import Backoff, Deadline, is_unreachable
from router.client.sync_client import QueryClient


@dataclass(frozen=True)
class MeshAccess:
    """The instances to enter the mesh by, the application they must serve (an instance of
    another one at a reused address is passed over), the client settings, and the read options."""

    endpoints: tuple[str, ...]
    application_id: str
    security: Security
    timeout_s: float
    allow_stale: bool = False

    def client(self, first: int = 0) -> QueryClient:
        """A routing client entering by endpoint ``first`` (modulo their number), then the others:
        the partitions' scans spread their pages over the instances."""
        n = first % len(self.endpoints)
        return QueryClient(self.endpoints[n:] + self.endpoints[:n], self.timeout_s, security=self.security,
                           application_id=self.application_id)


def retryable(e: grpc.RpcError) -> bool:
    """The cluster refused for now (REBALANCING, behind the bound, ...) or no instance could be
    reached: asking again later may succeed."""
    return is_unreachable(e) or refusal_of(e) is not None


def require_endpoints(access: MeshAccess) -> None:
    """The catalog names at least one live instance to enter by."""
    if not access.endpoints:
        raise SnapshotError(f"no live instance of {access.application_id!r} to scan (the changelog source "
                            "needs none)")


def check_access(access: MeshAccess) -> None:
    """One Metadata call, retried while no instance can be reached (until the timeout); a refusal
    of the job's credentials, or no instance reached, is a SnapshotError naming the setting."""
    require_endpoints(access)
    deadline, backoff = Deadline.within(access.timeout_s), Backoff(0.2, 1.0)
    with access.client() as client:
        while True:
            try:
                client.metadata()
                return
            except grpc.RpcError as e:
                pause = backoff.pause(deadline) if is_unreachable(e) else None
                if pause is None:
                    raise SnapshotError(access_error(access, e)) from None
            time.sleep(pause)


def access_error(access: MeshAccess, e: grpc.RpcError) -> str:
    code, details = e.code(), e.details() or ""
    app = access.application_id
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return (f"the instances of {app!r} refused the snapshot job ({code.name}: {details}); give their token "
                f"with --config {AUTH_TOKEN}=... or --config-file")
    if is_unreachable(e):
        tls = "" if access.security.dial_tls else f"; instances that serve TLS need --config {TLS_CA_FILE}=..."
        return (f"no instance of {app!r} could be reached within {access.timeout_s:g}s at "
                f"{', '.join(access.endpoints)} ({code.name}: {details}){tls}")
    return f"the instances of {app!r} answered {code.name}: {details}"
