"""One benchmark run in its own process; prints ``RESULT {json}`` like the peer's script.

rate_first_to_last = n / (time the last record was processed - time the first was processed), where
the last is the n-th (n + the table's rows for a stream-table join: the task processes them too),
read from the stream thread's batch counter (no per-record hook on the hot path).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid

from instance.runtime.kafka_streams import KafkaStreams
from loadtest import workloads


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--mode", default="stateful",
                    choices=["stateful", "stateless", "window-count", "join", "join-global", "wordcount"])
    ap.add_argument("--guarantee", choices=["at-least-once", "exactly-once"], default="at-least-once")
    ap.add_argument("--cache", action="store_true", help="stateful: Kafka Streams' record cache on")
    ap.add_argument("--table-topic", help="join: the table's topic")
    ap.add_argument("--table-rows", type=int, default=0,
                    help="join: rows in the table topic (processed by the task too, so waited for)")
    ap.add_argument("--target", type=int,
                    help="records the stream thread processes in all (default: n, + the table's rows "
                         "for a join); wordcount: lines + words, as both sub-topologies count")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()

    run = uuid.uuid4().hex[:8]
    app_id = f"iq-bench-{args.mode}-{run}"
    out = f"iq-out-{args.mode}-{run}"
    state_dir = tempfile.mkdtemp(prefix="iqmesh-bench-")
    if args.mode.startswith("join") and not args.table_topic:
        ap.error(f"--mode {args.mode} needs --table-topic")
    topology = {"stateful": lambda: workloads.stateful(args.topic, out, args.cache),
                "stateless": lambda: workloads.stateless(args.topic, out),
                "window-count": lambda: workloads.window_count(args.topic, out, args.cache),
                "join": lambda: workloads.stream_table_join(args.topic, str(args.table_topic), out),
                "join-global": lambda: workloads.stream_global_table_join(args.topic, str(args.table_topic), out),
                "wordcount": lambda: workloads.wordcount(args.topic, out),
                }[args.mode]()
    # a global table is bootstrapped before processing starts, by the global thread: not counted
    target = args.target or args.n + (args.table_rows if args.mode == "join" else 0)
    # the output topic is created up front, with 4 partitions like the peer's
    from instance.local.cluster import ensure_topic
    ensure_topic(args.bootstrap, out, 4)
    streams = KafkaStreams(topology, {
        "application.id": app_id, "bootstrap.servers": args.bootstrap, "state.dir": state_dir,
        "client.id": f"bench-{run}",
        "processing.guarantee": "exactly_once_v2" if args.guarantee == "exactly-once" else "at_least_once",
    })
    t_init = time.perf_counter()
    streams.start()
    t_first = t_last = 0.0
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        done = sum(t.processed for t in streams.threads)
        now = time.perf_counter()
        if done and not t_first:
            t_first = now
        if done >= target:
            t_last = now
            break
        if streams.last_error is not None:
            break
        time.sleep(0.001)
    streams.close()
    t_end = time.perf_counter()
    ok = t_last > 0
    el = t_last - t_first
    res = {
        "tag": args.tag, "lib": "iqmesh", "mode": args.mode, "guarantee": args.guarantee,
        "cache": args.cache, "n": args.n, "ok": ok,
        "startup_s": round(t_first - t_init, 3) if t_first else None,
        "first_to_last_s": round(el, 3) if ok else None,
        "rate_first_to_last": round(args.n / el) if ok and el > 0 else None,
        "rate_incl_final_commit": round(args.n / (t_end - t_first)) if ok else None,
        "out_topic": out,
        "error": repr(streams.last_error) if streams.last_error else None,
    }
    print("RESULT " + json.dumps(res), flush=True)
    shutil.rmtree(state_dir, ignore_errors=True)
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
