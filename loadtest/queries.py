"""Query benchmark: Get throughput and latency of a 3-instance cluster against a bare Python gRPC
server doing the same rocksdict lookup, on the same machine in the same run::

    python -m loadtest.queries [--keys 100000] [--seconds 10] [--reps 3] [--bursts] [--profile DIR] [--install]

Starts a dev broker, loads ``--keys`` keys into a table application (loadtest/table_app.py, store
``kv``, 6 partitions) run by 3 ``iqmesh run`` instances, a gateway, and two bare servers
(loadtest/bare_get.py: grpcio's threaded server, issue 30's baseline, and a grpc.aio one on uvloop,
as the instances' query server). The load comes from h2load (Debian's ``nghttp2-client``), sending one
framed gRPC request (5-byte prefix + protobuf body) over HTTP/2, or a REST GET over HTTP/1.1:

* bare server; a key the contacted instance owns (local); a key another instance owns
  (forwarded, one hop); REST Get through the gateway: peak throughput, p50/p99, then p50/p99 at
  half of that peak with requests arriving as a Poisson process (one h2load per connection, each
  on a timing script of its own; ``--half-runs`` runs, the one of median p99 kept; ``--bursts``:
  also with h2load's ``--rps``, which sends in bursts); the peak runs are interleaved ``--reps``
  times and the median kept;
* the Python routing client (``router.client.sync_client.QueryClient``) from threads of this process, random
  keys, with the share of answers that took a forwarding hop;
* ``All`` over the whole store through the Python client (rows/s).

Every run also reports how long work waited for a core meanwhile (loadtest/cpu_wait.py): the
machine's CPU pressure and the run-queue wait of the processes a request crosses (the bare server;
the contacted instance; all three instances for a forwarded key; the gateway and the instances for
REST). Latencies come from h2load's per-request log. gRPC-level failures (HTTP 200 with a grpc-status)
are caught by the instances' own error counters, checked after every run. ``--profile DIR``
records the contacted instance with py-spy during the local-key and the forwarded-key peak runs
(raw collapsed stacks: local-get.txt, forwarded-get.txt).
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import grpc

from instance.local import broker as devbroker
from instance.local.cluster import LocalCluster, ensure_topic
from instance.local.gateway import GatewayProcess
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from loadtest.bare_get import bench_key
from loadtest.cpu_wait import CpuWait, CpuWaitMeter
from router.client.sync_client import QueryClient

REPO = Path(__file__).resolve().parent.parent
APP = str(REPO / "loadtest" / "table_app.py")
STORE = "kv"
PARTITIONS = 6
GET_PATH = "/iqmesh.v1.InteractiveQuery/Get"
#: the peak runs ``--profile`` records the contacted instance in, and the file of each
PROFILED = {"local key": "local-get.txt", "forwarded key (one hop)": "forwarded-get.txt"}
INSTALL_HINT = "h2load is missing: apt-get install -y nghttp2-client (as root), or pass --install"


@dataclass(frozen=True)
class Load:
    """How h2load loads a target: connections, streams per connection, seconds, optional rate."""

    clients: int
    streams: int
    seconds: float
    rps_per_client: int = 0


@dataclass(frozen=True)
class Result:
    what: str
    requests: int
    per_s: float
    p50_ms: float
    p99_ms: float
    note: str = ""
    #: how long work waited for a core meanwhile (the serving processes' and the machine's)
    cpu_wait: CpuWait | None = None


def grpc_frame(message: pb.GetRequest) -> bytes:
    """A gRPC message on the wire: not compressed (0), 4-byte big-endian length, protobuf body."""
    body = message.SerializeToString()
    return b"\x00" + struct.pack(">I", len(body)) + body


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def h2load(what: str, url: str, load: Load, work: Path, body: bytes | None = None,
           pids: tuple[int, ...] = ()) -> Result:
    """One h2load run against ``url`` (a framed gRPC POST when ``body`` is given, else a GET over
    HTTP/1.1); throughput from h2load's summary, percentiles from its per-request log, and how
    long the serving processes ``pids`` waited for a core."""
    log = work / f"h2load-{time.monotonic_ns()}.log"
    cmd = ["h2load", "-t", "1", "-c", str(load.clients), "-m", str(load.streams), "-D", f"{load.seconds:g}",
           "--warm-up-time", "1", f"--log-file={log}"]
    if load.rps_per_client:
        cmd.append(f"--rps={load.rps_per_client}")
    cmd += _request_args(work, body)
    meter = CpuWaitMeter(pids).start()
    out = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=load.seconds + 60)
    cpu_wait = meter.stop()
    if out.returncode != 0:
        raise RuntimeError(f"h2load failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    per_s = 0.0
    failed = 0
    for line in out.stdout.splitlines():
        if line.startswith("finished in"):
            per_s = float(line.split(",")[1].split()[0])
        if line.startswith("requests:"):
            failed = int(line.split(",")[4].split()[0])
    lat = sorted(int(cols[2]) / 1000 for cols in (row.split("\t") for row in log.read_text().splitlines())
                 if len(cols) >= 3 and cols[1] == "200")
    if failed or not lat:
        raise RuntimeError(f"{what}: {failed} requests failed, {len(lat)} succeeded\n{out.stdout[-2000:]}")
    return Result(what, len(lat), per_s, _percentile(lat, 0.5), _percentile(lat, 0.99), cpu_wait=cpu_wait)


def _request_args(work: Path, body: bytes | None) -> list[str]:
    """h2load's arguments for the request: a framed gRPC POST of ``body``, else a GET over HTTP/1.1."""
    if body is None:
        return ["--h1"]
    data = work / f"req-{time.monotonic_ns()}.bin"
    data.write_bytes(body)
    return ["-H", "content-type: application/grpc", "-H", "te: trailers", "-d", str(data)]


#: requests/s of one h2load on a timing script (one connection): more connections above it (at
#: 500/s one fell behind its script by a fifth)
MAX_SCRIPTED_PER_S = 250


def h2load_open(what: str, url: str, load: Load, per_s: float, work: Path, body: bytes | None = None,
                seed: int = 0, pace: float = 1.0, pids: tuple[int, ...] = ()) -> Result:
    """An open-loop run at ``per_s`` requests/s in all, arriving as a Poisson process: one h2load
    per connection (``load.clients`` of them, more when each would send over
    :data:`MAX_SCRIPTED_PER_S`; ``load.streams`` streams each), each sending at the
    times of a timing script of its own (exponential gaps at ``per_s / clients``), started
    together. h2load's ``--rps`` sends each connection's requests in bursts at a ~10 ms tick
    (measured: bursts of 20 every 10 ms from 4 connections at 2,000/s), so its p99 is the time
    to drain a burst; real clients do not arrive in step. The first second is warm-up. h2load
    falls behind a timing script (by 6-20% on this machine, more the busier it is), so the
    scripts are written ``pace`` times faster (:func:`half_of_peak` measures it)."""
    procs = []
    logs = []
    request = _request_args(work, body)
    meter = CpuWaitMeter(pids).start()
    scripted = per_s * pace
    connections = max(load.clients, math.ceil(scripted / MAX_SCRIPTED_PER_S))
    for c in range(connections):
        rnd = random.Random(seed * 1000 + c)
        t, lines = 0.0, []
        while t < (load.seconds + 1) * 1000:
            t += rnd.expovariate(scripted / connections / 1000)
            lines.append(f"{t:.3f}\t{url}")
        script = work / f"timing-{time.monotonic_ns()}-{c}.txt"
        script.write_text("\n".join(lines) + "\n")
        log = work / f"h2load-open-{time.monotonic_ns()}-{c}.log"
        logs.append(log)
        cmd = ["h2load", "-t", "1", "-c", "1", "-m", str(load.streams), f"--timing-script-file={script}",
               f"--log-file={log}", *request]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    failed = 0
    for proc in procs:
        out, err = proc.communicate(timeout=load.seconds + 60)
        if proc.returncode != 0:
            raise RuntimeError(f"h2load failed ({proc.returncode}):\n{out[-2000:]}\n{err[-2000:]}")
        failed += next((int(line.split(",")[4].split()[0]) for line in out.splitlines()
                        if line.startswith("requests:")), 0)
    cpu_wait = meter.stop()
    rows = [cols for log in logs for cols in (row.split("\t") for row in log.read_text().splitlines())
            if len(cols) >= 3]
    if failed or not rows or any(cols[1] != "200" for cols in rows):
        raise RuntimeError(f"{what}: {failed} requests failed of {len(rows)}")
    first = min(int(cols[0]) for cols in rows)
    kept = [cols for cols in rows if int(cols[0]) >= first + 1_000_000]  # start times in µs
    lat = sorted(int(cols[2]) / 1000 for cols in kept)
    span = (max(int(cols[0]) for cols in kept) - min(int(cols[0]) for cols in kept)) / 1e6
    return Result(what, len(lat), len(lat) / span if span > 0 else 0.0, _percentile(lat, 0.5),
                  _percentile(lat, 0.99), cpu_wait=cpu_wait)


@dataclass(frozen=True)
class Target:
    what: str
    url: str
    load: Load
    body: bytes | None = None  # a framed gRPC request; None: REST GET
    #: the processes a request crosses (their wait for a core is reported with each run)
    pids: tuple[int, ...] = ()


def run_targets(targets: list[Target], reps: int, work: Path, check: Check,
                on_run: Callable[[Target, int], Callable[[], None] | None] = lambda t, rep: None,
                half_runs: int = 1, bursts: bool = False) -> list[Result]:
    """``reps`` rounds of one peak run per target, interleaved so that a change in the machine's
    load hits every target alike; the median peak of each, then ``half_runs`` runs at half of it
    arriving as a Poisson process (:func:`h2load_open`), the one of median p99 kept; with
    ``bursts``, the same again with h2load's ``--rps`` (the earlier measure). ``on_run`` may start
    something for a run and return its end."""
    peaks: dict[str, list[Result]] = {t.what: [] for t in targets}
    for rep in range(reps):
        for t in targets:
            done = on_run(t, rep)
            r = h2load(t.what, t.url, t.load, work, t.body, t.pids)
            if done is not None:
                done()
            peaks[t.what].append(r)
            print(f"  rep {rep + 1}: {t.what}: {r.per_s:,.0f}/s, p99 {r.p99_ms:.1f} ms", file=sys.stderr, flush=True)
        check(f"rep {rep + 1}")
    out = []
    for t in targets:
        runs = sorted(peaks[t.what], key=lambda r: r.per_s)
        median = runs[len(runs) // 2]
        out.append(Result(t.what, median.requests, median.per_s, median.p50_ms, median.p99_ms,
                          f"median of {reps}: " + " / ".join(f"{r.per_s:,.0f}" for r in peaks[t.what]),
                          median.cpu_wait))
        out.append(half_of_peak(t, median.per_s / 2, work, half_runs))
        if bursts:
            rps = max(1, int(median.per_s / 2 / t.load.clients))
            out.append(_median_p99(sorted(
                (h2load(f"{t.what} @ half of peak, h2load --rps", t.url,
                        Load(t.load.clients, t.load.streams, t.load.seconds, rps), work, t.body, t.pids)
                 for _ in range(half_runs)), key=lambda r: r.p99_ms), "bursts every ~10 ms"))
    check("half of peak")
    return out


def half_of_peak(t: Target, per_s: float, work: Path, runs: int) -> Result:
    """``runs`` open-loop runs of ``t`` at ``per_s`` (:func:`h2load_open`), the one of median p99;
    first a short run at that rate measures how far h2load falls behind its scripts (its pace)."""
    probe = h2load_open(f"{t.what}: pace", t.url, Load(t.load.clients, t.load.streams, 3), per_s, work, t.body, 99)
    pace = min(1.5, max(1.0, per_s / probe.per_s))
    halves = sorted((h2load_open(f"{t.what} @ half of peak", t.url, t.load, per_s, work, t.body, i, pace,
                                 t.pids)
                     for i in range(runs)), key=lambda r: r.p99_ms)
    return _median_p99(halves, f"Poisson arrivals at {per_s:,.0f}/s (scripts x{pace:.2f})")


def _median_p99(runs: list[Result], how: str) -> Result:
    """Of runs sorted by p99, the one of median p99 (a pause of the machine sets one run's p99), with
    each run's p99 and its wait for a core."""
    half = replace(runs[len(runs) // 2], note=f"{how}; p99 median of {len(runs)}: "
                   + " / ".join(f"{r.p99_ms:.1f}" + (f" ({r.cpu_wait.describe()})" if r.cpu_wait else "")
                                for r in runs))
    print(f"  {half.what}: {half.per_s:,.0f}/s, p99 {half.p99_ms:.1f} ms", file=sys.stderr, flush=True)
    return half


class Check:
    """Fails the benchmark if an instance counted query errors since the last call (h2load sees
    a gRPC error as a successful HTTP/2 response)."""

    def __init__(self, target: str) -> None:
        self.client = QueryClient(target, timeout=10)
        self.last = self._errors()

    def _errors(self) -> Counter[str]:
        md = self.client.metadata()
        return Counter({f"{i.instance_id} {code}": n for i in md.instances
                        for code, n in i.counters.query_errors.items()})

    def __call__(self, what: str) -> None:
        # counters are published with the heartbeat (1 s): wait for two of them
        time.sleep(2.5)
        now = self._errors()
        if now != self.last:
            raise RuntimeError(f"{what}: the instances counted failed queries: {dict(now - self.last)}")
        self.last = now


def client_run(target: str, keys: int, seconds: float, threads: int) -> Result:
    """Closed loop of ``threads`` threads calling ``QueryClient.get`` on random keys."""
    client = QueryClient(target, timeout=10)
    lat: list[list[float]] = [[] for _ in range(threads)]
    hops = [0] * threads
    stop = time.monotonic() + seconds

    def loop(i: int) -> None:
        rnd = random.Random(i)
        mine = lat[i]
        while time.monotonic() < stop:
            t = time.perf_counter()
            r = client.get(STORE, bench_key(rnd.randrange(keys)))
            mine.append((time.perf_counter() - t) * 1000)
            if not r.found:
                raise RuntimeError(f"key not found through the client: {r}")
            hops[i] += bool(r.metadata.get("forwarded"))

    client.get(STORE, bench_key(0))  # connect first
    start = time.monotonic()
    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.monotonic() - start
    client.close()
    all_lat = sorted(x for xs in lat for x in xs)
    n = len(all_lat)
    return Result(f"Python QueryClient ({threads} threads, random keys)", n, n / elapsed,
                  _percentile(all_lat, 0.5), _percentile(all_lat, 0.99),
                  f"{sum(hops) / max(1, n):.0%} of answers took a forwarding hop")


def all_run(target: str, keys: int, reps: int) -> Result:
    rates = []
    with QueryClient(target, timeout=60) as q:
        for _ in range(reps):
            t = time.perf_counter()
            scan = q.all(STORE, page_size=10_000)
            n = sum(1 for _ in scan)
            rates.append(n / (time.perf_counter() - t))
            if n != keys:  # a partition that could not answer a page is left out, with its reason
                missing = {p: r.name for p, r in scan.missing.items()}
                raise RuntimeError(f"All returned {n} rows, {keys} expected; partitions that did not answer: "
                                   f"{missing}, their statuses {scan.partitions}")
    return Result(f"All over {keys:,} keys (gRPC, pages of 10,000)", keys * reps, max(rates), float("nan"),
                  float("nan"), f"rows/s, best of {reps} (median {statistics.median(rates):,.0f})")


def load_input(bootstrap: str, topic: str, keys: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "partitioner": "murmur2_random",
                  "queue.buffering.max.messages": 1_000_000})
    pack = struct.Struct(">q").pack
    for i in range(keys):
        while True:
            try:
                p.produce(topic, pack(i), bench_key(i).encode())
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(120):
        raise RuntimeError("not every input record was acknowledged")


def wait_loaded(target: str, keys: int, timeout: float = 300.0) -> None:
    """Until the instances' counters say every input record was processed."""
    deadline = time.monotonic() + timeout
    with QueryClient(target, timeout=10) as q:
        while time.monotonic() < deadline:
            done = sum(i.counters.records_processed for i in q.metadata().instances)
            if done >= keys:
                return
            time.sleep(0.5)
    raise TimeoutError(f"the table did not load {keys} records within {timeout}s")


def pick_keys(target: str, me: str, keys: int) -> tuple[str, str]:
    """A key ``me`` (the instance at ``target``) answers itself, and one it forwards."""
    local = forwarded = ""
    with QueryClient(target, timeout=10) as q:
        for i in range(keys):
            r = q.get(STORE, bench_key(i))
            if not r.found:
                raise RuntimeError(f"{bench_key(i)} not found: {r}")
            if r.metadata["served_by"] == me and not local:
                local = bench_key(i)
            elif r.metadata["served_by"] != me and not forwarded:
                forwarded = bench_key(i)
            if local and forwarded:
                return local, forwarded
    raise RuntimeError("no local or no forwarded key found")


def check_grpc(target: str, key: str) -> None:
    """The request h2load sends, once through grpc: found, with the value the input holds."""
    with grpc.insecure_channel(target) as ch:
        r = pb_grpc.InteractiveQueryStub(ch).Get(pb.GetRequest(store=STORE, key=key), timeout=10)
    if not r.found or struct.unpack(">q", r.value)[0] != int(key.split("-")[1]):
        raise RuntimeError(f"{target} answered {key} wrongly: {r}")


def start_bare(work: Path, keys: int, aio: bool = False) -> tuple[subprocess.Popen[str], str]:
    port = devbroker.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "loadtest.bare_get", "--port", str(port), "--db",
                             str(work / ("bare-aio-db" if aio else "bare-db")), "--keys", str(keys),
                             *(["--aio"] if aio else [])], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "READY":
        proc.kill()
        raise RuntimeError("the bare server did not start")
    return proc, f"127.0.0.1:{port}"


#: issue 30's targets: each Get's throughput as a share of the bare server's, and its p99 at half of
#: its own peak
TARGETS = {"local key": 0.9, "forwarded key (one hop)": 0.5, "REST Get through the gateway": 0.6}
TARGET_P99_MS = 10.0
#: the baselines: grpcio's threaded server (issue 30's) and its grpc.aio server, the instances' kind
BARE = "bare gRPC server"
BARE_AIO = f"{BARE} (grpc.aio)"


def ensure_h2load(install: bool) -> None:
    if shutil.which("h2load"):
        return
    if not install:
        raise SystemExit(INSTALL_HINT)
    subprocess.run(["apt-get", "update", "-q"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "nghttp2-client"], check=True)


def profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "250",
                             "--format", "raw", "--output", str(out), "--nonblocking", "--gil"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def report(results: list[Result], args: argparse.Namespace) -> None:
    print(f"\n{args.keys:,} keys, {PARTITIONS} partitions, 3 instances, {args.reps} rep(s); "
          f"h2load -t 1 -c {args.clients} -m {args.streams} (REST: -c {args.clients * args.streams} --h1), "
          f"{args.seconds:g} s per run\n")
    print("| what | requests | per s | p50 ms | p99 ms | notes |")
    print("|---|---|---|---|---|---|")
    for r in results:
        def ms(x: float) -> str:
            return "" if x != x else f"{x:.2f}"
        note = r.note if r.cpu_wait is None or "half of peak" in r.what else f"{r.note}; {r.cpu_wait.describe()}"
        print(f"| {r.what} | {r.requests:,} | {r.per_s:,.0f} | {ms(r.p50_ms)} | {ms(r.p99_ms)} | {note} |")
    by = {r.what: r for r in results}
    bare, bare_aio = by[BARE].per_s, by[BARE_AIO].per_s
    print(f"\nthroughput / bare server (grpcio's threaded server; in brackets, / {BARE_AIO}):")
    for r in results:
        if "half of peak" not in r.what and not r.what.startswith(("All", BARE)):
            print(f"  {r.what}: {r.per_s / bare:.2f} ({r.per_s / bare_aio:.2f})")
    print("\ntargets (issue 30: throughput / bare server, and p99 at half of peak <= 10 ms):")
    for what, share in TARGETS.items():
        ratio, p99 = by[what].per_s / bare, by[f"{what} @ half of peak"].p99_ms
        met = ratio >= share and p99 <= TARGET_P99_MS
        print(f"  {what}: {ratio:.2f} (>= {share:.2f}), p99 {p99:.1f} ms: {'met' if met else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=10.0, help="per h2load run (after 1 s of warm-up)")
    ap.add_argument("--clients", type=int, default=4, help="h2load connections")
    ap.add_argument("--streams", type=int, default=8, help="concurrent streams per connection")
    ap.add_argument("--reps", type=int, default=3, help="interleaved peak runs per target (median)")
    ap.add_argument("--half-runs", type=int, default=3, help="runs at half of peak per target (median p99)")
    ap.add_argument("--bursts", action="store_true",
                    help="also measure half of peak with h2load --rps (requests in bursts, the earlier measure)")
    ap.add_argument("--client-threads", type=int, default=8)
    ap.add_argument("--all-reps", type=int, default=3)
    ap.add_argument("--profile", type=Path,
                    help="py-spy the contacted instance during the local-key and forwarded-key peak runs")
    ap.add_argument("--install", action="store_true", help="apt-get install nghttp2-client if h2load is missing")
    ap.add_argument("--bootstrap", help="an existing broker (default: a dev broker of its own)")
    args = ap.parse_args(argv)
    ensure_h2load(args.install)

    work = Path(tempfile.mkdtemp(prefix="iqmesh-qbench-"))
    broker_dir = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker_dir = work / "broker"
        bootstrap = devbroker.start_broker(broker_dir).bootstrap
    unique = f"{random.randrange(1 << 30):08x}"
    topic = f"qbench-{unique}"
    cluster = LocalCluster(bootstrap, APP, f"qbench-{unique}", work, size=3, env={"QBENCH_INPUT_TOPIC": topic})
    gateway = GatewayProcess(bootstrap, cluster.application_id, work / "gateway.log")
    bare: subprocess.Popen[str] | None = None
    bare_aio: subprocess.Popen[str] | None = None
    ok = False
    try:
        ensure_topic(bootstrap, topic, PARTITIONS)
        t = time.monotonic()
        load_input(bootstrap, topic, args.keys)
        print(f"produced {args.keys:,} keys in {time.monotonic() - t:.1f}s", file=sys.stderr)
        bare, bare_target = start_bare(work, args.keys)
        bare_aio, bare_aio_target = start_bare(work, args.keys, aio=True)
        cluster.start()
        cluster.wait_running(120)
        asked = cluster.instances[0]
        wait_loaded(asked.target, args.keys)
        gateway.start()
        gateway.wait_ready(60)
        local_key, forwarded_key = pick_keys(asked.target, asked.instance_id, args.keys)
        for target in (bare_target, bare_aio_target, asked.target):
            check_grpc(target, local_key)
        check_grpc(asked.target, forwarded_key)
        rest_url = f"{gateway.url}/v1/stores/{STORE}/keys/{local_key}"
        with urllib.request.urlopen(rest_url, timeout=10) as r:
            assert r.status == 200
        print(f"loaded; asking {asked.instance_id}: local key {local_key}, forwarded key {forwarded_key}",
              file=sys.stderr)

        load = Load(args.clients, args.streams, args.seconds)
        grpc_url = f"http://{asked.target}{GET_PATH}"
        local_req = grpc_frame(pb.GetRequest(store=STORE, key=local_key))
        forwarded_req = grpc_frame(pb.GetRequest(store=STORE, key=forwarded_key))
        instances = tuple(i.proc.pid for i in cluster.instances if i.proc is not None)
        asked_pid = (asked.proc.pid,) if asked.proc is not None else ()
        gateway_pid = (gateway.proc.pid,) if gateway.proc is not None else ()
        targets = [
            Target(BARE, f"http://{bare_target}{GET_PATH}", load, local_req, (bare.pid,)),
            Target(BARE_AIO, f"http://{bare_aio_target}{GET_PATH}", load, local_req, (bare_aio.pid,)),
            Target("local key", grpc_url, load, local_req, asked_pid),
            Target("forwarded key (one hop)", grpc_url, load, forwarded_req, instances),
            Target("REST Get through the gateway", rest_url, Load(args.clients * args.streams, 1, args.seconds),
                   pids=gateway_pid + instances),
        ]

        def on_run(t: Target, rep: int) -> Callable[[], None] | None:
            name = PROFILED.get(t.what)
            if not (args.profile and rep == 0 and name and asked.proc):
                return None
            args.profile.mkdir(parents=True, exist_ok=True)
            spy = profile(asked.proc.pid, args.seconds + 1, args.profile / name)
            return lambda: print(f"py-spy: {spy.wait(60)}", file=sys.stderr)
        check = Check(asked.target)
        results = run_targets(targets, args.reps, work, check, on_run, args.half_runs, args.bursts)
        results.append(client_run(asked.target, args.keys, args.seconds, args.client_threads))
        check("Python QueryClient")
        results.append(all_run(asked.target, args.keys, args.all_reps))
        report(results, args)
        ok = True
        return 0
    finally:
        gateway.stop()
        cluster.stop()
        for proc in (bare, bare_aio):
            if proc is not None:
                proc.kill()
                proc.wait(10)
        if broker_dir is not None:
            devbroker.stop_broker(broker_dir)
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"instance and gateway logs kept in {work}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
