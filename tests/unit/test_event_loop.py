"""The event loop on a thread of its own (kernel/event_loop.py) that the query server and the
blocking client's watches run on."""

from __future__ import annotations

import asyncio
import inspect
import threading

import uvloop

from kernel.event_loop import LoopThread


def test_it_runs_coroutines_on_its_own_thread_on_uvloop_and_drops_them_once_closed() -> None:
    loop = LoopThread("test-loop")
    try:
        assert isinstance(loop.loop, uvloop.Loop)  # a dependency: installed wherever iqmesh is

        async def where() -> str:
            await asyncio.sleep(0)
            return threading.current_thread().name
        assert loop.run(where(), timeout=5) == "test-loop"
        seen: list[int] = []

        async def record(i: int) -> None:
            seen.append(i)
        for i in range(50):
            loop.submit(record(i))
        loop.run(asyncio.sleep(0.01), timeout=5)
        assert seen == list(range(50))  # submitted in turn, started in that order
    finally:
        loop.close()
    late = record(99)
    loop.submit(late)  # closed: dropped, and the coroutine closed (no "never awaited" warning)
    assert inspect.getcoroutinestate(late) == inspect.CORO_CLOSED and seen == list(range(50))
    loop.close()  # twice is harmless
