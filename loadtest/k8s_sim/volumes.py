"""A pod's volumes as local directories: ConfigMap and Secret volumes written out, each volume
claim a directory of its own that outlives the pod. Paths under a mount in the command line and
in the mounted files are rewritten to the local directory (the one liberty taken: no mount
namespace per pod)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from loadtest.k8s_sim.manifests import Rendered, container, pod_template

#: what to write for a Secret value (e.g. placeholders replaced in tests): (key, value) -> text
SecretFilter = Callable[[str, str], str]


def materialize(rendered: Rendered, workload: Mapping[str, Any], container_name: str, root: Path,
                claims: Mapping[str, Path] | None = None,
                secret_filter: SecretFilter | None = None) -> dict[str, Path]:
    """Write the ConfigMap and Secret volumes ``container_name`` mounts under ``root``; map each
    volume claim (by template name) to its directory in ``claims``. Returns mountPath -> local
    directory; paths inside the written files point at the local directories too."""
    spec = pod_template(workload)["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    out: dict[str, Path] = {}
    written: list[Path] = []
    for m in container(workload, container_name).get("volumeMounts") or []:
        name, mount_path = m["name"], m["mountPath"]
        if claims is not None and name in claims:
            claims[name].mkdir(parents=True, exist_ok=True)
            out[mount_path] = claims[name]
            continue
        v = volumes.get(name, {})
        if "configMap" in v:
            data = rendered.config_map_data(v["configMap"]["name"])
        elif "secret" in v:
            data = rendered.secret_data(v["secret"]["secretName"])
            if secret_filter is not None:
                data = {k: secret_filter(k, val) for k, val in data.items()}
        else:
            continue  # emptyDir and others: the host's directory
        local = root / mount_path.lstrip("/")
        local.mkdir(parents=True, exist_ok=True)
        out[mount_path] = local
        for k, val in data.items():
            (local / k).write_text(val)
            written.append(local / k)
    for f in written:
        f.write_text(localize(f.read_text(), out))
    return out


def localize(text: str, mounts: Mapping[str, Path]) -> str:
    """``text`` with every path at or under a mount path pointing at its local directory."""
    for mount_path, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        replacement = str(local).replace("\\", "\\\\")
        text = re.sub(re.escape(mount_path) + r"(?=/|\s|$|[\"',;:])", replacement, text, flags=re.MULTILINE)
    return text
