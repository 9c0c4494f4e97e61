"""The two ways to load a service. Open-loop: requests start on a fixed schedule (``rate`` per
second) whatever the answers do, and each latency counts from the *intended* start, so a stall
shows as the queue it would build for real users instead of being hidden (coordinated omission).
Closed-loop: ``workers`` each send the next request when the last one is answered (throughput
is what the service gives; latency from the actual send)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from loadtest.loadgen.keys import KeyChooser
from loadtest.loadgen.recorder import Recorder
from loadtest.loadgen.targets import QueryFailed, Target


class LoadSpecError(ValueError):
    """A load that cannot be run as asked (a rate or worker count out of range)."""


@dataclass(frozen=True)
class LoadSpec:
    #: "open" (at ``rate``) or "closed" (``workers``)
    mode: str
    rate: float = 100.0
    workers: int = 8
    #: seconds; None: until the stop event is set
    duration_s: float | None = 10.0
    #: open-loop: requests outstanding at most (then starts wait, their latency still counting)
    max_in_flight: int = 256

    def __post_init__(self) -> None:
        if self.mode not in ("open", "closed"):
            raise LoadSpecError(f"mode must be 'open' or 'closed', not {self.mode!r}")
        if self.mode == "open" and not 0 < self.rate <= 100_000:
            raise LoadSpecError(f"the rate must be in (0, 100000] requests/s, not {self.rate}")
        if self.mode == "closed" and not 1 <= self.workers <= 10_000:
            raise LoadSpecError(f"workers must be in [1, 10000], not {self.workers}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise LoadSpecError(f"the duration must be positive, not {self.duration_s}")
        if self.max_in_flight < 1:
            raise LoadSpecError("max_in_flight must be at least 1")


async def _one(target: Target, key: str, began: float, rec: Recorder) -> None:
    try:
        answer = await target.get(key)
    except QueryFailed as e:
        rec.failed(e.status, time.monotonic() - began, detail=str(e))
        return
    except Exception as e:  # a client defect is a result too, never a crash of the run
        rec.failed(f"CLIENT {type(e).__name__}", time.monotonic() - began, detail=str(e))
        return
    rec.answered(key, answer, time.monotonic() - began)


async def _released(slots: asyncio.Semaphore, target: Target, key: str, began: float, rec: Recorder) -> None:
    try:
        await _one(target, key, began, rec)
    finally:
        slots.release()


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    if seconds > 0:
        try:
            await asyncio.wait_for(stop.wait(), seconds)
        except TimeoutError:
            pass


async def _open_loop(target: Target, spec: LoadSpec, keys: KeyChooser, rec: Recorder, stop: asyncio.Event,
                     end: float) -> None:
    t0 = time.monotonic()
    slots = asyncio.Semaphore(spec.max_in_flight)
    running: set[asyncio.Task[None]] = set()
    i = 0
    while not stop.is_set():
        intended = t0 + i / spec.rate
        if intended >= end:
            break
        await _sleep_or_stop(stop, intended - time.monotonic())
        if stop.is_set():
            break
        i += 1
        await slots.acquire()
        task = asyncio.create_task(_released(slots, target, keys.next(), intended, rec))
        running.add(task)
        task.add_done_callback(running.discard)
    # the schedule ran to its end (no request was due before it) or was stopped now
    rec.end(time.time() + (0.0 if stop.is_set() else max(0.0, end - time.monotonic())))
    if running:
        await asyncio.gather(*running)


async def _closed_loop(target: Target, spec: LoadSpec, keys: KeyChooser, rec: Recorder, stop: asyncio.Event,
                       end: float) -> None:
    async def worker() -> None:
        while not stop.is_set() and time.monotonic() < end:
            await _one(target, keys.next(), time.monotonic(), rec)
    await asyncio.gather(*(worker() for _ in range(spec.workers)))
    rec.end()


async def run_load(target: Target, spec: LoadSpec, keys: KeyChooser, rec: Recorder,
                   stop: asyncio.Event | None = None) -> Recorder:
    """Drive ``target`` as ``spec`` says until its duration ends or ``stop`` is set."""
    stop = stop or asyncio.Event()
    end = time.monotonic() + (spec.duration_s if spec.duration_s is not None else float("inf"))
    if spec.mode == "open":
        await _open_loop(target, spec, keys, rec, stop, end)
    else:
        await _closed_loop(target, spec, keys, rec, stop, end)
    return rec
