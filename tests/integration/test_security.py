"""TLS and the bearer token, end to end, with a self-signed certificate made here (openssl).

Two word-count instances serve gRPC over TLS and require the token (the forwarding hop between
them too); the routing client with the CA and the token reads every count without a hop, a raw
call through the other instance is forwarded over TLS; no token or a wrong one is UNAUTHENTICATED,
plaintext does not connect, health checks need no token. The REST gateway serves HTTPS and
answers 401 in its error style without the token.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from instance.local.broker import free_port
from instance.local.cluster import produce, sample_lines
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from kernel.security import Security
from router.client.async_client import AsyncQueryClient
from router.client.sync_client import QueryClient
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration

STORE = "counts"
TOKEN = "s3cret-token"


def self_signed(d: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1/localhost and its key (PEM)."""
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def _code(fn: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as e:
        fn()
    return e.value.code()  # type: ignore[no-any-return]


def _https(url: str, ctx: ssl.SSLContext, token: str = "") -> tuple[int, dict[str, str], Any]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def _sse(url: str, ctx: ssl.SSLContext, token: str) -> tuple[int, str]:
    """Status and the whole text of an event stream that ends by itself (``max_events``)."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.mark.timeout(400)
def test_tls_and_token_for_grpc_and_the_gateway(bootstrap: str, tmp_path: Path, unique: str) -> None:
    cert, key = self_signed(tmp_path)
    settings = [f"iqmesh.tls.cert.file={cert}", f"iqmesh.tls.key.file={key}", f"iqmesh.tls.ca.file={cert}",
                f"iqmesh.auth.token={TOKEN}"]
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "commit.interval.ms=200", *settings)
    lines = sample_lines(800, seed=4)
    truth = dict(word_counts(lines))
    words = sorted(truth)
    gateway: subprocess.Popen[bytes] | None = None
    cluster.start()
    try:
        cluster.wait_running(90)  # over TLS with the token (LocalCluster.client_security)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        seed = cluster.instances[0].target
        good = Security(ca_file=str(cert), token=TOKEN)
        with QueryClient(seed, security=good) as q:
            def counted() -> bool:
                try:
                    return all(q.get(STORE, w).value == n for w, n in truth.items())
                except grpc.RpcError:
                    return False
            wait_until(counted, 90, "every count over TLS", cluster.logs)
            answers = {w: q.get(STORE, w) for w in words}
            assert not any(r.metadata["forwarded"] for r in answers.values())
            elsewhere = next(w for w, r in answers.items()
                             if r.metadata["served_by"] == cluster.instances[1].instance_id)

        async def aget() -> Any:
            async with AsyncQueryClient(seed, security=good) as aq:
                return await aq.get(STORE, elsewhere)
        r = asyncio.run(aget())
        assert r.value == truth[elsewhere] and not r.metadata["forwarded"]
        out = subprocess.run([sys.executable, "-m", "iqmesh", "get", "--target", seed, "--store", STORE,
                              "--key", elsewhere, "--config", f"iqmesh.tls.ca.file={cert}",
                              "--config", f"iqmesh.auth.token={TOKEN}"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and json.loads(out.stdout)["value"] == truth[elsewhere], out
        # issue 16 point 3: watch takes the same settings (it had no --config / --config-file)
        props = tmp_path / "client.properties"
        props.write_text(f"iqmesh.tls.ca.file={cert}\niqmesh.auth.token={TOKEN}\n")
        out = subprocess.run([sys.executable, "-m", "iqmesh", "watch", "--target", seed, "--store", STORE,
                              "--key", elsewhere, "--from-beginning", "--limit", "1", "--duration", "90",
                              "--config-file", str(props)], capture_output=True, text=True, timeout=150)
        assert out.returncode == 0, out
        change, end = (json.loads(line) for line in out.stdout.splitlines())
        assert change["key"] == elsewhere and end["end"]["changes"] == 1, out.stdout

        # the forwarding hop between instances: over TLS, with the token
        channel = grpc.secure_channel(seed, good.channel_credentials())
        reply = pb_grpc.InteractiveQueryStub(channel).Get(pb.GetRequest(store=STORE, key=elsewhere), timeout=10,
                                                          metadata=good.call_metadata())
        assert reply.metadata.forwarded and json.loads(reply.value_json) == truth[elsewhere]

        with QueryClient(seed, timeout=3, security=Security(ca_file=str(cert))) as q:
            assert _code(lambda: q.get(STORE, "kafka")) is grpc.StatusCode.UNAUTHENTICATED
        with QueryClient(seed, timeout=3, security=Security(ca_file=str(cert), token="wrong")) as q:
            assert _code(lambda: q.metadata()) is grpc.StatusCode.UNAUTHENTICATED
        with QueryClient(seed, timeout=3) as q:  # plaintext against TLS: no connection
            assert _code(lambda: q.metadata()) is grpc.StatusCode.UNAVAILABLE
        health = health_pb2_grpc.HealthStub(grpc.secure_channel(seed, good.channel_credentials()))
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
            health_pb2.HealthCheckResponse.SERVING  # probes need no token

        # --- the REST gateway: HTTPS, 401 without the token ---------------------------------------
        port = free_port()
        cmd = [sys.executable, "-m", "iqmesh", "gateway", "--seeds", seed, "--port", str(port)]
        for s in settings:
            cmd += ["--config", s]
        log = tmp_path / "gateway.log"
        with open(log, "wb") as out:
            gateway = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
        ctx = ssl.create_default_context(cafile=str(cert))
        url = f"https://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return _https(url + "/healthz", ctx)[0] == 200
            except OSError:
                return False
        wait_until(up, 60, "the gateway over HTTPS", lambda: log.read_text())

        word = words[0]
        status, headers, body = _https(f"{url}/v1/stores/{STORE}/keys/{word}", ctx)
        assert status == 401 and body["error"]["code"] == "UNAUTHENTICATED", body
        assert headers.get("WWW-Authenticate", "").startswith("Bearer")
        assert _https(f"{url}/v1/stores/{STORE}/keys/{word}", ctx, "wrong")[0] == 401
        status, _, body = _https(f"{url}/v1/stores/{STORE}/keys/{word}", ctx, TOKEN)
        assert status == 200 and body["value"] == truth[word], body
        status, headers, _ = _https(f"{url}/v1/stores?access_token={TOKEN}", ctx)
        assert status == 200 and "iqmesh_token=" in headers.get("Set-Cookie", "")
        # issue 16 point 3: the SSE watch dials the instances with TLS and the token too
        status, events = _sse(f"{url}/v1/stores/{STORE}/watch?key={word}&from_beginning=true&max_events=1",
                              ctx, TOKEN)
        assert status == 200 and "event: start" in events and "event: change" in events, events
        assert f'"key":"{word}"' in events, events
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(30)
        cluster.stop()
