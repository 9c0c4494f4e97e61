"""What a pod of the rendered manifests runs, here: its files (ConfigMap and Secret volumes)
written under a local root, its command line expanded as the kubelet does, parsed by the
project's own parsers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from loadtest.k8s_sim.manifests import PodIdentity, Rendered, command_line, container, container_env, pod_template
from loadtest.k8s_sim.volumes import localize, materialize
from tests.k8s.run_config import run_config

__all__ = ["entrypoint", "pod_argv", "pod_files", "run_config"]

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"
#: what a placeholder PEM Secret holds here, so iqmesh's PEM checks can run (no key material)
_PEM = {"crt": "-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n",
        "key": "-----BEGIN PRIVATE KEY-----\nTEST\n-----END PRIVATE KEY-----\n"}


def entrypoint(stage: str) -> list[str]:
    """The ENTRYPOINT (exec form) of a Dockerfile stage."""
    current = ""
    found: dict[str, list[str]] = {}
    for line in DOCKERFILE.read_text().splitlines():
        m = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE)
        if m:
            current = m.group(1)
        m = re.match(r"ENTRYPOINT\s+\[(.*)\]\s*$", line)
        if m:
            found[current] = [part.strip().strip('"') for part in m.group(1).split(",")]
    return found[stage]


def _placeholder_pem(key: str, value: str) -> str:
    kind = key.rsplit(".", 1)[-1]
    return _PEM[kind] if "REPLACE" in value and kind in _PEM else value


def pod_files(rendered: Rendered, workload: dict[str, Any], container_name: str, root: Path) -> dict[str, Path]:
    """Write the ConfigMap and Secret volumes the container mounts under ``root`` (placeholder
    PEM Secrets replaced); returns mountPath -> local directory."""
    return materialize(rendered, workload, container_name, root, secret_filter=_placeholder_pem)


def pod_argv(rendered: Rendered, workload: dict[str, Any], container_name: str, pod_name: str, root: Path,
             image_stage: str = "runtime") -> tuple[list[str], dict[str, str]]:
    """The container's command line with its files under ``root``, and its environment."""
    c = container(workload, container_name)
    labels = pod_template(workload)["metadata"].get("labels", {})
    env = container_env(c, PodIdentity(pod_name, rendered.namespace, labels=labels), rendered)
    mounts = pod_files(rendered, workload, container_name, root)
    argv = [localize(a, mounts) for a in command_line(c, env, entrypoint(image_stage))]
    return argv, env
