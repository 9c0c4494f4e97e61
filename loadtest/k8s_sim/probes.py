"""Probes as the kubelet runs them (grpc, tcpSocket, httpGet, exec), from the node, with the
timing fields of the spec and their Kubernetes defaults."""

from __future__ import annotations

import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from loadtest.k8s_sim.network import Sandbox


@dataclass(frozen=True)
class Probe:
    kind: str  # startup, readiness, liveness
    spec: Mapping[str, Any]
    container_ports: Mapping[str, int]

    @property
    def initial_delay_s(self) -> float:
        return float(self.spec.get("initialDelaySeconds", 0))

    @property
    def period_s(self) -> float:
        return float(self.spec.get("periodSeconds", 10))

    @property
    def timeout_s(self) -> float:
        return float(self.spec.get("timeoutSeconds", 1))

    @property
    def failure_threshold(self) -> int:
        return int(self.spec.get("failureThreshold", 3))

    @property
    def success_threshold(self) -> int:
        return int(self.spec.get("successThreshold", 1))

    def _port(self, port: int | str) -> int:
        return int(self.container_ports[port]) if isinstance(port, str) else int(port)

    def run(self, box: Sandbox, env: Mapping[str, str]) -> bool:
        """One execution: True on success."""
        s = self.spec
        try:
            if "grpc" in s:
                return _grpc(box.ip, self._port(s["grpc"]["port"]), s["grpc"].get("service", ""), self.timeout_s)
            if "tcpSocket" in s:
                with socket.create_connection((box.ip, self._port(s["tcpSocket"]["port"])), timeout=self.timeout_s):
                    return True
            if "httpGet" in s:
                g = s["httpGet"]
                scheme = g.get("scheme", "HTTP").lower()
                url = f"{scheme}://{box.ip}:{self._port(g['port'])}{g.get('path', '/')}"
                with urllib.request.urlopen(url, timeout=self.timeout_s) as r:  # noqa: S310 - the pod's own address
                    return 200 <= r.status < 400
            if "exec" in s:
                out = subprocess.run([*box.enter(), *s["exec"]["command"]], env=dict(env), capture_output=True,
                                     timeout=self.timeout_s)
                return out.returncode == 0
        except (OSError, urllib.error.URLError, subprocess.TimeoutExpired):
            return False
        raise ValueError(f"{self.kind} probe of an unsupported kind: {sorted(s)}")


def _grpc(ip: str, port: int, service: str, timeout: float) -> bool:
    """The kubelet's grpc probe: plaintext, grpc.health.v1 Check, SERVING or fail."""
    with grpc.insecure_channel(f"{ip}:{port}") as ch:
        try:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service),
                                                         timeout=timeout)
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def probes_of(container: Mapping[str, Any]) -> dict[str, Probe]:
    ports = {p["name"]: int(p["containerPort"]) for p in container.get("ports") or [] if "name" in p}
    return {kind: Probe(kind, container[f"{kind}Probe"], ports)
            for kind in ("startup", "readiness", "liveness") if f"{kind}Probe" in container}
