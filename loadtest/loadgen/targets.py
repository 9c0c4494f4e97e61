"""One query against the system under load: through the async routing client (gRPC, straight
to the key's owner with the client's retries) or through the REST gateway. Both read with
``allow_stale`` by default (a standby may answer, flagged), as a dashboard does during a rebalance."""

from __future__ import annotations

import urllib.parse
from typing import Any, Protocol

import grpc

from kernel.security import Security
from kernel.status_details import status_label
from loadtest.loadgen.recorder import Answer
from router.client.async_client import AsyncQueryClient


class QueryFailed(Exception):
    """A query that got no answer; ``status`` is what the errors are counted by
    (``UNAVAILABLE REBALANCING``, ``HTTP 503 NOT_ACTIVE``, ``DEADLINE_EXCEEDED``...)."""

    def __init__(self, status: str, detail: str = "") -> None:
        super().__init__(f"{status}: {detail}" if detail else status)
        self.status = status


class Target(Protocol):
    async def get(self, key: str) -> Answer: ...
    async def close(self) -> None: ...


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float | str) and str(value).lstrip("-").isdigit() else None


class GrpcTarget:
    """``AsyncQueryClient(seeds).get(store, key)``: one client for the whole run (its routing
    table, channels and retries are what users get)."""

    def __init__(self, seeds: str, store: str, token: str = "", allow_stale: bool = True,
                 timeout: float = 10.0) -> None:
        self.store, self.allow_stale = store, allow_stale
        self.client = AsyncQueryClient(seeds, timeout=timeout, security=Security(token=token))

    async def get(self, key: str) -> Answer:
        try:
            r = await self.client.get(self.store, key, allow_stale=self.allow_stale)
        except grpc.RpcError as e:
            details = getattr(e, "details", None)  # an aio error is no grpc.Call but has details()
            raise QueryFailed(status_label(e), (details() if callable(details) else "") or "") from None
        md = r.metadata
        return Answer(_count(r.value) if r.found else 0, bool(md["stale"]), int(md["lag"]), str(md["served_by"]),
                      f"{md['role']} of a {md['instance_state']} instance")

    async def close(self) -> None:
        await self.client.close()


class RestTarget:
    """``GET {url}/v1/stores/{store}/keys/{key}?allow_stale=true`` on the gateway, one aiohttp
    session (keep-alive connections) for the run."""

    def __init__(self, url: str, store: str, token: str = "", allow_stale: bool = True,
                 timeout: float = 10.0, connections: int = 64) -> None:
        import aiohttp

        self.base = url.rstrip("/") + f"/v1/stores/{urllib.parse.quote(store, safe='')}/keys/"
        self.query = "?allow_stale=true" if allow_stale else ""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._headers, self._connections = headers, connections

    async def get(self, key: str) -> Answer:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self._headers, timeout=self._timeout,
                                                  connector=aiohttp.TCPConnector(limit=self._connections))
        url = self.base + urllib.parse.quote(key, safe="") + self.query
        try:
            async with self._session.get(url) as resp:
                body = await resp.json(content_type=None)
                if resp.status != 200:
                    err = body.get("error", {}) if isinstance(body, dict) else {}
                    raise QueryFailed(f"HTTP {resp.status} {err.get('code', '')}".strip(), str(err.get("message", "")))
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            raise QueryFailed(f"HTTP {type(e).__name__}", str(e)) from None
        md = body["metadata"]
        return Answer(_count(body["value"]) if body["found"] else 0, bool(md["stale"]), int(md["lag"]),
                      str(md["served_by"]), f"{md.get('role')} of a {md.get('instance_state')} instance")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
