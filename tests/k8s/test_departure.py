"""A stopping static member tells a scale-in from a restart by reading its StatefulSet with the
pod's service account (instance/runtime/departure.py), against the simulator's API server, which
answers as RBAC and the StatefulSet controller would."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from instance.runtime.departure import InClusterApi, StatefulSetPod, leaving_for_good
from loadtest.k8s_sim.api_server import ApiServer
from loadtest.k8s_sim.manifests import Rendered, pod_template


@pytest.fixture
def api(renderings: dict[str, Rendered], tmp_path: Path):  # type: ignore[no-untyped-def]
    if shutil.which("openssl") is None:  # it makes the API server's certificate
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but openssl is not installed (.ci/run installs it)")
        pytest.skip("openssl is not installed (it makes the API server's certificate; apt-get install openssl)")
    rendered = renderings["dev"]
    replicas = {"iqmesh": 3}
    server = ApiServer(rendered, "127.0.0.1", tmp_path, replicas.get)
    spec = pod_template(rendered.get("StatefulSet", "iqmesh"))["spec"]
    env = server.mount(spec, rendered.namespace, tmp_path / "pod")
    try:
        yield server, replicas, InClusterApi(env)
    finally:
        server.close()


def test_a_pod_above_the_replicas_leaves_and_one_below_stays(api) -> None:  # type: ignore[no-untyped-def]
    _server, replicas, client = api
    assert client.available and client.replicas("iqmesh") == 3
    assert [leaving_for_good("auto", f"iqmesh-{i}", client) for i in range(4)] == [False, False, False, True]
    replicas["iqmesh"] = 1  # kubectl scale --replicas=1: lowered before the pods are deleted
    assert [leaving_for_good("auto", f"iqmesh-{i}", client) for i in range(3)] == [False, True, True]
    del replicas["iqmesh"]  # the StatefulSet deleted: every pod goes for good
    assert client.replicas("iqmesh") == 0 and leaving_for_good("auto", "iqmesh-0", client)


def test_the_setting_overrides_and_no_api_means_stay(api, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _server, _replicas, client = api
    assert leaving_for_good("true", "iqmesh-0", client) and not leaving_for_good("false", "iqmesh-7", client)
    outside = InClusterApi({})  # not in Kubernetes: a static member stays, as before
    assert not outside.available and not leaving_for_good("auto", "iqmesh-7", outside)
    assert StatefulSetPod.of("iqmesh-12") == StatefulSetPod("iqmesh", 12) and StatefulSetPod.of("worker") is None


def test_rbac_is_what_the_manifests_grant(api) -> None:  # type: ignore[no-untyped-def]
    _server, _replicas, client = api
    # the Role names this StatefulSet only: another one is Forbidden, and a forbidden read stays
    with pytest.raises(OSError, match="403"):
        client.replicas("other")
    assert not leaving_for_good("auto", "other-5", client)
    stranger = InClusterApi({**client_env(client), "IQMESH_SERVICE_ACCOUNT_DIR": str(forged(client))})
    with pytest.raises(OSError, match="401"):
        stranger.replicas("iqmesh")


def client_env(client: InClusterApi) -> dict[str, str]:
    return {"KUBERNETES_SERVICE_HOST": client.host, "KUBERNETES_SERVICE_PORT": client.port}


def forged(client: InClusterApi) -> Path:
    d = client.account.parent / "forged"
    shutil.copytree(client.account, d)
    (d / "token").write_text("not-a-token")
    return d
