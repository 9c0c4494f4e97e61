"""A stand-in container for testing the simulator's Kubernetes semantics (not iqmesh): a gRPC
health server on 0.0.0.0:50051, NOT_SERVING until FAKE_READY_AFTER seconds have passed and, if
FAKE_READY_FILE is set, until that file exists; FAKE_IGNORE_TERM=1 ignores SIGTERM; it exits with
status 3 once the file FAKE_DIE_FILE exists (at once if it exists at start: a crash loop the test
starts and keeps going). Writes a marker file into FAKE_CLAIM (its volume) at start."""

import os
import signal
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


def main() -> int:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.add_insecure_port("0.0.0.0:50051")
    server.start()
    claim = os.environ.get("FAKE_CLAIM")
    if claim:
        marker = Path(claim) / "marker"
        print(f"claim had a marker: {marker.exists()}", flush=True)
        marker.write_text(os.environ.get("HOSTNAME", ""))
    done = threading.Event()
    if os.environ.get("FAKE_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
    else:
        signal.signal(signal.SIGTERM, lambda *_: done.set())
    t0 = time.monotonic()
    ready_after = float(os.environ.get("FAKE_READY_AFTER", "0"))
    ready_file = os.environ.get("FAKE_READY_FILE")
    die_file = os.environ.get("FAKE_DIE_FILE")
    while True:
        if die_file and os.path.exists(die_file):
            print("dying: exit 3", flush=True)
            return 3
        if time.monotonic() - t0 >= ready_after and (not ready_file or os.path.exists(ready_file)):
            servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        if done.wait(0.05):
            break
    server.stop(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
