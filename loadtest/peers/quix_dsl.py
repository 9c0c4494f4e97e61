"""Quix Streams side of ``loadtest.dsl``: the same workloads on the same topics.

Runs in the Quix venv (``/tmp/quix-bench-venv``, quixstreams 3.28.1), like
``../shared/bench/quix_count.py``, and prints ``RESULT {json}`` with the same fields.
- window-count: ``tumbling_window(60 s).count().current()`` per key (every update emitted, value
  ``{"start", "end", "value"}``);
- join: ``join_asof(table, how="inner")``, Quix's stream-table join (the table's rows are older
  than every stream record, so "as of" is "the row", as in a Kafka Streams stream-table join);
  the merged value is ``{**stream_value, **table_row}``.
Runs until every stream and table record is processed; the rate is stream records per second from
the first record processed to the last, as the iqmesh worker's.

    python quix_dsl.py --bootstrap HOST:PORT --topic T -n N --mode window-count
    python quix_dsl.py --bootstrap HOST:PORT --topic T -n N --mode join --table-topic U --table-rows R
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import uuid
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--mode", choices=["window-count", "join"], required=True)
    ap.add_argument("--table-topic")
    ap.add_argument("--table-rows", type=int, default=0)
    ap.add_argument("--window-ms", type=int, default=60_000)
    ap.add_argument("--state-root", default="/tmp/quix-bench-state")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()

    import quixstreams
    from quixstreams import Application
    from quixstreams.models import TopicConfig

    run = uuid.uuid4().hex[:8]
    state_dir = os.path.join(args.state_root, run)
    target = args.n + args.table_rows
    seen = [0]
    t_first = [0.0]
    t_last = [0.0]
    apps: list[Any] = []

    def on_processed(_topic: str, _partition: int, _offset: int) -> None:
        seen[0] += 1
        if seen[0] == 1:
            t_first[0] = time.perf_counter()
        if seen[0] >= target:
            t_last[0] = time.perf_counter()
            apps[0].stop()

    t_init = time.perf_counter()
    app = Application(broker_address=args.bootstrap, consumer_group=f"qx-{args.mode}-{run}",
                      auto_offset_reset="earliest", processing_guarantee="at-least-once",
                      state_dir=state_dir, on_message_processed=on_processed, loglevel="WARNING")
    apps.append(app)
    stream = app.dataframe(app.topic(args.topic, key_deserializer="bytes", value_deserializer="json"))
    out = f"qx-out-{args.mode}-{run}"
    out_topic = app.topic(out, key_serializer="bytes", value_serializer="json",
                          config=TopicConfig(num_partitions=4, replication_factor=1))
    if args.mode == "window-count":
        sdf = stream.tumbling_window(args.window_ms).count().current()
    else:
        table = app.dataframe(app.topic(args.table_topic, key_deserializer="bytes", value_deserializer="json"))
        sdf = stream.join_asof(table, how="inner")
    sdf.to_topic(out_topic)
    app.run()
    t_end = time.perf_counter()

    ok = seen[0] >= target
    el = t_last[0] - t_first[0]
    res = {
        "tag": args.tag, "lib": "quixstreams", "version": quixstreams.__version__, "mode": args.mode,
        "guarantee": "at-least-once", "n": args.n, "table_rows": args.table_rows, "processed": seen[0],
        "ok": ok, "startup_s": round(t_first[0] - t_init, 3) if t_first[0] else None,
        "first_to_last_s": round(el, 3) if ok else None,
        "rate_first_to_last": round(args.n / el) if ok and el > 0 else None,
        "rate_incl_final_commit": round(args.n / (t_end - t_first[0])) if ok else None,
        "out_topic": out,
    }
    print("RESULT " + json.dumps(res), flush=True)
    shutil.rmtree(state_dir, ignore_errors=True)
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
