"""``python -m iqmesh.health_probe``: one gRPC health check (grpc.health.v1), exit status 0 when
SERVING, 1 otherwise; for exec probes and scripts.

Kubernetes' native ``grpc:`` probe dials without TLS, so it cannot check a query server that serves
TLS only (``iqmesh.tls.cert.file``). This probe reads the same properties file as the instance,
dials the local server with its CA, and checks the name the certificate was issued for (the
pod's DNS name, ``$IQMESH_ADVERTISED_HOST`` in the StatefulSet). Health checks need no token.
Each check starts an interpreter, so the manifests probe ``iqmesh.health.port`` instead
(instance/server/health_http.py: the same health service read in-process, over plain HTTP);
``--probe startup|readiness|liveness`` asks what that port's ``/startupz``, ``/readyz`` and
``/livez`` answer, with the same rule for passing.
"""

from __future__ import annotations

import argparse
import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from instance import config_providers
from instance.errors import ConfigException
from instance.properties_file import load_properties_file
from instance.server.health_http import PROBE_SERVICES, passes
from kernel.security import Security

SERVER_NAME_ENV = "IQMESH_ADVERTISED_HOST"


def check(target: str, security: Security, server_name: str = "", service: str = "",
          timeout: float = 3.0) -> str:
    """The status name the server reports for ``service`` (SERVING, NOT_SERVING, ...), or the
    gRPC status code name when the call fails (UNAVAILABLE, DEADLINE_EXCEEDED, ...)."""
    if security.dial_tls:
        options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
        channel = grpc.secure_channel(target, security.channel_credentials(), options=options)
    else:
        channel = grpc.insecure_channel(target)
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as e:
            code = e.code() if isinstance(e, grpc.Call) else None
            return code.name if code is not None else "UNKNOWN"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m iqmesh.health_probe", description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="127.0.0.1:50051", help="HOST:PORT of the query server")
    p.add_argument("--config-file", help="properties file with iqmesh.tls.* (the instance's own)")
    p.add_argument("--server-name", default=os.environ.get(SERVER_NAME_ENV, ""),
                   help=f"name to check the server certificate against (default: ${SERVER_NAME_ENV}, else the "
                   "target's host)")
    p.add_argument("--service", default="", help="health service name ('' is the whole server)")
    p.add_argument("--probe", choices=sorted(PROBE_SERVICES), help="ask the health service this kubelet probe "
                   "asks on iqmesh.health.port (startup and readiness: '', liveness: iqmesh.liveness); "
                   "instead of --service")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds")
    args = p.parse_args(argv)
    try:
        props = config_providers.resolve(load_properties_file(args.config_file) if args.config_file else {})
        security = Security.from_properties({k: v for k, v in props.items() if k.startswith("iqmesh.tls.")})
    except (OSError, ValueError, ConfigException) as e:
        print(f"health_probe: error: {e}", file=sys.stderr)
        return 2
    service = PROBE_SERVICES[args.probe] if args.probe else args.service
    status = check(args.target, security, args.server_name, service, args.timeout)
    print(status)
    return 0 if passes(status) else 1


if __name__ == "__main__":
    sys.exit(main())
