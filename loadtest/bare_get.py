"""The query benchmark's baseline: a bare Python gRPC server answering ``InteractiveQuery.Get``
with one rocksdict lookup (raw mode, as the instances' stores), nothing else::

    python -m loadtest.bare_get --port P --db DIR --keys N [--aio]

grpcio's threaded server (issue 30's baseline), or with ``--aio`` its grpc.aio server on the event
loop the instances' query server runs on (kernel/event_loop.py). It writes keys ``key-0000000..``
with 8-byte big-endian long values (as the benchmark's table holds) into a fresh RocksDB at DIR,
then serves until killed; it prints ``READY`` when it does.
"""

from __future__ import annotations

import argparse
import struct
import sys
from concurrent import futures

import grpc
from rocksdict import Options, Rdict, WriteBatch

from kernel.event_loop import new_event_loop
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc


def bench_key(i: int) -> str:
    return f"key-{i:07d}"


class BareGet(pb_grpc.InteractiveQueryServicer):
    def __init__(self, db: Rdict) -> None:
        self._get = db.get

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.GetReply:
        raw = self._get(request.raw_key or request.key.encode())
        if raw is None:
            return pb.GetReply(found=False, value_serde="long")
        return pb.GetReply(found=True, value=raw, value_json=str(struct.unpack(">q", raw)[0]), value_serde="long")


def load(path: str, keys: int) -> Rdict:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(path, opts)
    pack = struct.Struct(">q").pack
    for start in range(0, keys, 100_000):
        wb = WriteBatch(raw_mode=True)
        for i in range(start, min(keys, start + 100_000)):
            wb.put(bench_key(i).encode(), pack(i))
        db.write(wb)
    db.flush()
    return db


class AioBareGet(BareGet):
    async def Get(self, request: pb.GetRequest, context: grpc.aio.ServicerContext) -> pb.GetReply:  # type: ignore[override]
        return BareGet.Get(self, request, context)  # type: ignore[arg-type]


async def _serve_aio(servicer: BareGet, port: int) -> None:
    server = grpc.aio.server()
    pb_grpc.add_InteractiveQueryServicer_to_server(servicer, server)
    if server.add_insecure_port(f"127.0.0.1:{port}") == 0:
        raise OSError(f"cannot bind port {port}")
    await server.start()
    print("READY", flush=True)
    await server.wait_for_termination()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=16, help="as the instances' QueryServer")
    ap.add_argument("--aio", action="store_true", help="a grpc.aio server (one event loop) instead of the pool's")
    args = ap.parse_args(argv)
    db = load(args.db, args.keys)
    if args.aio:  # on the loop the instances' query server runs on
        new_event_loop().run_until_complete(_serve_aio(AioBareGet(db), args.port))
        return 0
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers))
    pb_grpc.add_InteractiveQueryServicer_to_server(BareGet(db), server)
    if server.add_insecure_port(f"127.0.0.1:{args.port}") == 0:
        raise OSError(f"cannot bind port {args.port}")
    server.start()
    print("READY", flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
