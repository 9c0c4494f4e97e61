"""The modules one local Get passes through, in order, from the servicer to the store and back.

    python -m loadtest.get_path [--bootstrap HOST:PORT] [--time N]

Starts a dev broker (unless ``--bootstrap``), one embedded instance counting a key and its query
server, waits until a Get answers, then records one more Get (``QueryServicer.Get`` called in
process with the request's bytes, as the strict handler calls a ``WITH_BYTES`` method, so grpc's
own code is left out) with ``sys.setprofile``: every call into this repository's files. Prints
the modules in the order the call visits them, how many distinct modules and packages, and how
many times the call crosses between ``instance/`` and ``router/`` (the shared ``kernel/``, which
both sides import, is neither). Exits 1 when the path is over its budget (issue 29 point 6): more
than :data:`MAX_MODULES` modules, or more than one crossing each way. tests/integration/test_get_path.py
runs it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

from instance.local import engines
from instance.local.cluster import ensure_topic, produce
from instance.runtime.kafka_streams import KafkaStreams, State
from instance.serde import StringSerde
from instance.server.servicer import QueryServer
from instance.topology import StreamsBuilder
from kernel.rpc import iqmesh_pb2 as pb

ROOT = str(Path(__file__).resolve().parent.parent) + "/"


class _Context:
    """The little of grpc.aio.ServicerContext a unary Get uses."""

    def time_remaining(self) -> float:
        return 5.0

    async def abort(self, code: Any, details: str, trailing_metadata: Any = ()) -> None:
        raise RuntimeError(details)


def _local_get(server: QueryServer, request: pb.GetRequest, data: bytes) -> Any:
    """``QueryServicer.Get`` (a coroutine) run to its end here: a local read awaits nothing."""
    coro = server.servicer.Get(request, _Context(), data)  # type: ignore[arg-type]  # the little it uses
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the Get awaited something: it was not answered here")


def record(call: Any) -> list[tuple[str, list[str]]]:
    """(module, functions) in the order ``call()`` enters this repository's modules."""
    visits: list[tuple[str, str]] = []

    def prof(frame: FrameType, event: str, _arg: Any) -> None:
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(ROOT) and not name.startswith(f"{ROOT}loadtest/"):
            visits.append((name[len(ROOT):], frame.f_code.co_name))
    sys.setprofile(prof)
    try:
        call()
    finally:
        sys.setprofile(None)
    path: list[tuple[str, list[str]]] = []
    for module, fn in visits:
        if path and path[-1][0] == module:
            path[-1][1].append(fn)
        else:
            path.append((module, [fn]))
    return path


#: the budget of a local Get: distinct modules visited
MAX_MODULES = 12
def crossings(path: list[tuple[str, list[str]]]) -> tuple[int, int]:
    """(instance -> router, router -> instance) moves of ``path``; the shared kernel (kernel/,
    which both sides import: a serde, a token) is neither side."""
    sides = [m.split("/")[0] for m, _ in path if m.split("/")[0] in ("instance", "router")]
    moves = [(a, b) for a, b in zip(sides, sides[1:], strict=False) if a != b]
    return moves.count(("instance", "router")), moves.count(("router", "instance"))


def over_budget(path: list[tuple[str, list[str]]]) -> list[str]:
    """What makes ``path`` longer than a local Get may be (empty: within its budget)."""
    problems = []
    modules = set(m for m, _ in path)
    if len(modules) > MAX_MODULES:
        problems.append(f"{len(modules)} modules, at most {MAX_MODULES}")
    there, back = crossings(path)
    if there > 1 or back > 1:
        problems.append(f"{there} crossings instance -> router and {back} back (kernel apart), at most one each way")
    return problems


def get_path(bootstrap: str, tmp: str, timed: int = 0) -> tuple[list[tuple[str, list[str]]], list[float]]:
    """One local Get of a counted key on an embedded instance, recorded (:func:`record`), and with
    ``timed``, the microseconds per Get of five runs of that many (in process: the Python path alone,
    steadier than a load test on a shared machine)."""
    topic = f"get-path-{int(time.time())}"
    ensure_topic(bootstrap, topic, 1)
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    b.stream(topic).group_by_key().count("counts")
    streams = KafkaStreams(b.build(), {"application.id": topic, "bootstrap.servers": bootstrap,
                                       "state.dir": f"{tmp}/state", "commit.interval.ms": "200",
                                       "application.server": "127.0.0.1:1"})
    produce(bootstrap, topic, [(b"k", b"x")] * 3)
    streams.start()
    server = QueryServer(streams, 0, host="127.0.0.1")
    try:
        request = pb.GetRequest(store="counts", key="k")
        data = request.SerializeToString()
        deadline = time.monotonic() + 60
        while True:  # until the instance's own metadata routes the key here
            try:
                reply = _local_get(server, request, data)
                if isinstance(reply, pb.GetReply) and reply.found and reply.value_json == "3" \
                        and streams.state is State.RUNNING:
                    break
            except RuntimeError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the Get never answered the count")
            time.sleep(0.2)
        path = record(lambda: _local_get(server, request, data))
        runs = []
        for _ in range(5 if timed else 0):
            start = time.perf_counter()
            for _ in range(timed):
                _local_get(server, request, data)
            runs.append((time.perf_counter() - start) / timed * 1e6)
        return path, runs
    finally:
        server.stop(0)
        streams.close(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap")
    ap.add_argument("--time", type=int, default=0, metavar="N", help="also time five runs of N Gets")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="iqmesh-get-path-") as tmp:
        broker = Path(tmp) / "broker"
        bootstrap = args.bootstrap or engines.start("dev", broker).bootstrap
        try:
            path, runs = get_path(bootstrap, tmp, args.time)
        except TimeoutError as e:
            print(e, file=sys.stderr)
            return 1
        finally:
            if not args.bootstrap:
                engines.stop(broker)
    modules = list(dict.fromkeys(m for m, _ in path))
    packages = {m.rsplit("/", 1)[0] for m in modules}
    print(f"{len(modules)} modules in {len(packages)} packages, {len(path)} module visits; crossings "
          f"instance -> router and back: {'/'.join(map(str, crossings(path)))}")
    for module, fns in path:
        print(f"  {module}: {', '.join(dict.fromkeys(fns))}")
    if runs:
        print(f"µs per Get, five runs of {args.time}: {' '.join(f'{r:.1f}' for r in runs)}; best {min(runs):.1f}")
    problems = over_budget(path)
    for p in problems:
        print(f"over budget: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
