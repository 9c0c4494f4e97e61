"""An asyncio event loop on a thread of its own, for code that is otherwise threads: the query
server's grpc.aio server, the watches of the blocking query client. The loop is uvloop's when it
is installed (a dependency of iqmesh: a grpc.aio call costs less on it than on asyncio's own)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed, else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """A running event loop on a daemon thread named ``name``, until :meth:`close`."""

    def __init__(self, name: str) -> None:
        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """``coro``'s result, run on the loop; the caller's thread waits (never call it from the loop)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` on the loop without waiting for it (dropped once the loop is closed);
        coroutines submitted in turn start in that order."""
        try:
            asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:  # the loop is closed
            coro.close()

    def call_soon(self, fn: Callable[[], object]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def close(self) -> None:
        """Stop the loop and wait for its thread; the loop's pending callbacks are dropped."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
