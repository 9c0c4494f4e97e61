"""The rendered manifests (``kubectl kustomize``) and what Kubernetes makes of a pod template:
its environment (``envFrom``, ``env`` with the downward API, ConfigMaps and Secrets) and its
command line (``$(VAR)`` expanded as the kubelet does). Used by the manifest tests and the
simulator, so both read the manifests the same way."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: where kubectl usually is; PATH wins
KUBECTL_FALLBACK = "/usr/bin/kubectl"
_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class ManifestError(Exception):
    """The manifests are not what the caller needs (a missing object, an unsupported field)."""


def kubectl() -> str | None:
    """kubectl's path, or None when it is not installed."""
    found = shutil.which("kubectl")
    if found:
        return found
    return KUBECTL_FALLBACK if Path(KUBECTL_FALLBACK).exists() else None


def render(kustomization_dir: str | Path, kubectl_path: str | None = None) -> Rendered:
    """``kubectl kustomize DIR``, parsed."""
    exe = kubectl_path or kubectl()
    if exe is None:
        raise ManifestError("kubectl is not installed (it renders the kustomizations)")
    out = subprocess.run([exe, "kustomize", str(kustomization_dir)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise ManifestError(f"kubectl kustomize {kustomization_dir} failed: {out.stderr.strip()}")
    return Rendered.parse(out.stdout)


@dataclass(frozen=True)
class Rendered:
    docs: tuple[dict[str, Any], ...]

    @staticmethod
    def parse(text: str) -> Rendered:
        return Rendered(tuple(d for d in yaml.safe_load_all(text) if d))

    @property
    def namespace(self) -> str:
        """The namespace the objects go to (one per rendering), else ``default``."""
        spaces = {d["metadata"].get("namespace") for d in self.docs if d["kind"] != "Namespace"} - {None}
        if len(spaces) > 1:
            raise ManifestError(f"objects in several namespaces: {sorted(spaces)}")
        return spaces.pop() if spaces else "default"

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        for d in self.of_kind(kind):
            if d["metadata"]["name"] == name:
                return d
        raise ManifestError(f"no {kind} {name!r} in the rendered manifests")

    def config_map_data(self, name: str) -> dict[str, str]:
        return dict(self.get("ConfigMap", name).get("data") or {})

    def secret_data(self, name: str) -> dict[str, str]:
        s = self.get("Secret", name)
        out = {k: base64.b64decode(v).decode() for k, v in (s.get("data") or {}).items()}
        out.update(s.get("stringData") or {})
        return out


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: a defined variable is replaced, an undefined reference
    stays as written, ``$$`` is one ``$``."""
    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)
    return _REF.sub(one, text)


@dataclass(frozen=True)
class PodIdentity:
    """What the downward API can tell a pod about itself."""

    name: str
    namespace: str
    pod_ip: str = "127.0.0.1"
    node_name: str = "localhost"
    labels: Mapping[str, str] = field(default_factory=dict)

    def field(self, path: str) -> str:
        simple = {"metadata.name": self.name, "metadata.namespace": self.namespace, "status.podIP": self.pod_ip,
                  "spec.nodeName": self.node_name}
        if path in simple:
            return simple[path]
        m = re.fullmatch(r"metadata\.labels\['([^']+)'\]", path)
        if m and m.group(1) in self.labels:
            return self.labels[m.group(1)]
        raise ManifestError(f"downward API field {path!r} is not supported here")


def container_env(container: Mapping[str, Any], pod: PodIdentity, rendered: Rendered) -> dict[str, str]:
    """The container's environment as the kubelet builds it: ``envFrom`` first, then ``env`` in
    order, each value expanded against what is defined before it."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            data = rendered.config_map_data(source["configMapRef"]["name"])
        elif "secretRef" in source:
            data = rendered.secret_data(source["secretRef"]["name"])
        else:
            raise ManifestError(f"envFrom {source} is not supported here")
        env.update({prefix + k: v for k, v in data.items()})
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = expand(str(var["value"]), env)
            continue
        ref = var.get("valueFrom") or {}
        if "fieldRef" in ref:
            env[var["name"]] = pod.field(ref["fieldRef"]["fieldPath"])
        elif "configMapKeyRef" in ref:
            env[var["name"]] = rendered.config_map_data(ref["configMapKeyRef"]["name"])[ref["configMapKeyRef"]["key"]]
        elif "secretKeyRef" in ref:
            env[var["name"]] = rendered.secret_data(ref["secretKeyRef"]["name"])[ref["secretKeyRef"]["key"]]
        else:
            env[var["name"]] = ""
    return env


def command_line(container: Mapping[str, Any], env: Mapping[str, str], entrypoint: list[str]) -> list[str]:
    """``command`` (else the image's entrypoint) + ``args``, expanded. ``entrypoint``: the
    image's ENTRYPOINT; a container with ``command`` replaces it (and the image's CMD)."""
    command = [expand(c, env) for c in container["command"]] if "command" in container else list(entrypoint)
    return command + [expand(str(a), env) for a in container.get("args") or []]


def pod_template(workload: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template of a StatefulSet, Deployment, Job or CronJob."""
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return dict(spec["template"])


def container(workload: Mapping[str, Any], name: str) -> dict[str, Any]:
    for c in pod_template(workload)["spec"]["containers"]:
        if c["name"] == name:
            return dict(c)
    raise ManifestError(f"{workload['kind']} {workload['metadata']['name']} has no container {name!r}")
