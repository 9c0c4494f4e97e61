"""The kustomizations rendered once per session with ``kubectl kustomize``.

Without kubectl these tests skip, saying why; under ``CI=true`` they fail instead (CI must run
them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loadtest.k8s_sim.manifests import Rendered, kubectl, render

K8S = Path(__file__).resolve().parents[2] / "k8s"
OVERLAYS = ("dev", "production-example")
#: production-example with every optional component, rendered through a kustomization made here
WITH_COMPONENTS = "production-example+components"
RENDERINGS = (*OVERLAYS, WITH_COMPONENTS)


def need_kubectl() -> str:
    exe = kubectl()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl is not installed: the manifest tests need it under CI=true")
        pytest.skip("kubectl is not installed (apt-get install kubectl, or put it on PATH) to render k8s/")
    return exe


@pytest.fixture(scope="session")
def renderings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rendered]:
    exe = need_kubectl()
    out = {name: render(K8S / "overlays" / name, exe) for name in OVERLAYS}
    d = tmp_path_factory.mktemp("components")
    # spark-on-k8s replaces the CronJob's arguments, kafka-sasl appends to them: in this order
    components = [K8S / "components" / c for c in ("spark-on-k8s", "kafka-sasl")]
    assert {c.name for c in components} == {p.name for p in (K8S / "components").iterdir() if p.is_dir()}
    (d / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{os.path.relpath(K8S / 'overlays' / 'production-example', d)}]\n"
        f"components: [{', '.join(os.path.relpath(c, d) for c in components)}]\n")
    out[WITH_COMPONENTS] = render(d, exe)
    return out
