"""The part of the Kubernetes API server the instances call, and the service-account tokens they
call it with.

A pod whose template sets ``automountServiceAccountToken: true`` gets its account's directory
(``token``, ``ca.crt``, ``namespace``) and ``KUBERNETES_SERVICE_HOST``/``_PORT``, as the kubelet
gives them. The server answers ``GET /apis/apps/v1/namespaces/<ns>/statefulsets/<name>`` over
TLS with the StatefulSet's current ``spec.replicas`` (lowered before a scale-in deletes pods, as
the controller does), 404 for one it does not know, and 401/403 as RBAC would: the token must be
one it issued, and a RoleBinding of the rendered manifests must grant that account ``get`` on the
StatefulSet. Everything else is 404.
"""

from __future__ import annotations

import json
import re
import secrets
import ssl
import subprocess
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loadtest.k8s_sim.manifests import Rendered

_STS_PATH = re.compile(r"^/apis/apps/v1/namespaces/(?P<ns>[^/]+)/statefulsets/(?P<name>[^/?]+)$")


def _grants_get(rendered: Rendered, account: str, statefulset: str) -> bool:
    """A RoleBinding of ``account`` to a Role that allows ``get`` on ``statefulset``."""
    roles = {d["metadata"]["name"]: d for d in rendered.docs if d["kind"] == "Role"}
    for b in (d for d in rendered.docs if d["kind"] == "RoleBinding"):
        if not any((s.get("kind"), s.get("name")) == ("ServiceAccount", account) for s in b.get("subjects") or []):
            continue
        for rule in roles.get(b["roleRef"]["name"], {}).get("rules") or []:
            names = rule.get("resourceNames")
            if ("apps" in rule.get("apiGroups", []) and "statefulsets" in rule.get("resources", [])
                    and {"get", "*"} & set(rule.get("verbs", [])) and (not names or statefulset in names)):
                return True
    return False


class ApiServer:
    """Serves ``replicas_of(name)`` (None: no such StatefulSet) on ``host``, TLS with a
    certificate made here (openssl)."""

    def __init__(self, rendered: Rendered, host: str, workdir: Path,
                 replicas_of: Callable[[str], int | None]) -> None:
        self.rendered, self.host, self.replicas_of = rendered, host, replicas_of
        self.dir = workdir / "apiserver"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca = self.dir / "ca.crt"
        key = self.dir / "tls.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=kubernetes", "-addext", f"subjectAltName=IP:{host}",
                        "-keyout", str(key), "-out", str(self.ca)], check=True, capture_output=True)
        self._tokens: dict[str, str] = {}  # token -> service account
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.ca, key)
        self._http = ThreadingHTTPServer((host, 0), self._handler())
        self._http.socket = ctx.wrap_socket(self._http.socket, server_side=True)
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, name="apiserver", daemon=True)
        self._thread.start()

    def mount(self, pod_spec: Mapping[str, Any], namespace: str, root: Path) -> dict[str, str]:
        """What the kubelet gives a pod with ``pod_spec``: the environment to add (empty when the
        template does not mount a token). The account's directory is written under ``root``."""
        if not pod_spec.get("automountServiceAccountToken", True):
            return {}
        account = pod_spec.get("serviceAccountName", "default")
        token = secrets.token_urlsafe(24)
        self._tokens[token] = account
        d = root / "serviceaccount"
        d.mkdir(parents=True, exist_ok=True)
        (d / "token").write_text(token)
        (d / "namespace").write_text(namespace)
        (d / "ca.crt").write_bytes(self.ca.read_bytes())
        return {"KUBERNETES_SERVICE_HOST": self.host, "KUBERNETES_SERVICE_PORT": str(self.port),
                "IQMESH_SERVICE_ACCOUNT_DIR": str(d)}

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def _answer(self, path: str, authorization: str) -> tuple[int, dict[str, Any]]:
        account = self._tokens.get(authorization.removeprefix("Bearer ").strip())
        if account is None:
            return 401, {"kind": "Status", "reason": "Unauthorized"}
        m = _STS_PATH.match(path)
        if m is None or m["ns"] != self.rendered.namespace:
            return 404, {"kind": "Status", "reason": "NotFound"}
        if not _grants_get(self.rendered, account, m["name"]):
            return 403, {"kind": "Status", "reason": "Forbidden"}
        replicas = self.replicas_of(m["name"])
        if replicas is None:
            return 404, {"kind": "Status", "reason": "NotFound"}
        return 200, {"kind": "StatefulSet", "metadata": {"name": m["name"], "namespace": m["ns"]},
                     "spec": {"replicas": replicas}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                code, body = server._answer(self.path, self.headers.get("Authorization", ""))
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        return Handler
