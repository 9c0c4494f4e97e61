"""k8s/: every rendering validates against the Kubernetes schemas, follows the deployment policy
(README "Deploy on Kubernetes"), and passes the instances, the gateway and the snapshot job
arguments their own parsers accept."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from analytics.snapshot.options import add_arguments as snapshot_arguments
from analytics.snapshot.options import options_from_args
from instance.app_loader import load_topology
from instance.properties_file import load_properties_file
from instance.server.health_http import PATHS, PROBE_SERVICES
from instance.server.servicer import LIVENESS
from iqmesh.gateway import cmd_gateway
from iqmesh.main import parser
from iqmesh.options import client_security
from loadtest.k8s_sim.manifests import Rendered, container, pod_template
from tests.k8s.conftest import K8S, OVERLAYS, RENDERINGS, WITH_COMPONENTS
from tests.k8s.pods import pod_argv, run_config

#: kubectl on this machine is 1.32; the newest schemas the validator ships, too
SCHEMA_VERSIONS = ("1.32.0", kubernetes_validate.latest_version())
INSTANCE_LABELS = {"app.kubernetes.io/name": "iqmesh", "app.kubernetes.io/component": "instance"}
WORKLOADS = ("StatefulSet", "Deployment", "CronJob")


def sts(r: Rendered) -> dict[str, Any]:
    return r.get("StatefulSet", "iqmesh")


def instance(r: Rendered) -> dict[str, Any]:
    return container(sts(r), "instance")


def named_port(r: Rendered, name: str) -> int:
    ports = [p for p in instance(r)["ports"] if p["name"] == name]
    assert len(ports) == 1
    return int(ports[0]["containerPort"])


def grpc_port(r: Rendered) -> int:
    return named_port(r, "grpc")


@pytest.mark.parametrize("name", RENDERINGS)
@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_every_object_validates_against_the_kubernetes_schemas(renderings: dict[str, Rendered], name: str,
                                                               version: str) -> None:
    r = renderings[name]
    assert len(r.docs) >= 10
    for doc in r.docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{name}: {doc['kind']} {doc['metadata']['name']} is invalid for Kubernetes {version}: "
                        f"{e.message} at {'/'.join(str(p) for p in e.path)}")


@pytest.mark.parametrize("name", RENDERINGS)
def test_everything_referenced_is_rendered(renderings: dict[str, Rendered], name: str) -> None:
    """Every ConfigMap, Secret, Service and claim a pod names exists (generated names included)."""
    r = renderings[name]
    for w in (d for d in r.docs if d["kind"] in WORKLOADS):
        spec = pod_template(w)["spec"]
        for c in spec["containers"]:
            for src in c.get("envFrom") or []:
                r.get("ConfigMap", src["configMapRef"]["name"])
            for var in c.get("env") or []:
                ref = var.get("valueFrom", {})
                if "secretKeyRef" in ref:
                    assert ref["secretKeyRef"]["key"] in r.secret_data(ref["secretKeyRef"]["name"])
                if "configMapKeyRef" in ref:
                    assert ref["configMapKeyRef"]["key"] in r.config_map_data(ref["configMapKeyRef"]["name"])
        for v in spec.get("volumes") or []:
            if "configMap" in v:
                r.get("ConfigMap", v["configMap"]["name"])
            if "secret" in v:
                r.get("Secret", v["secret"]["secretName"])
            if "persistentVolumeClaim" in v:
                r.get("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"])
    r.get("Service", sts(r)["spec"]["serviceName"])


@pytest.mark.parametrize("name", RENDERINGS)
def test_statefulset_policy(renderings: dict[str, Rendered], name: str) -> None:
    r = renderings[name]
    s = sts(r)
    spec, pod = s["spec"], pod_template(s)["spec"]
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["updateStrategy"]["type"] == "RollingUpdate"
    assert spec["updateStrategy"].get("rollingUpdate", {}).get("partition", 0) == 0
    assert spec["selector"]["matchLabels"] == INSTANCE_LABELS
    assert INSTANCE_LABELS.items() <= pod_template(s)["metadata"]["labels"].items()
    # anti-affinity across nodes, on the instances' own labels; required in production
    anti = pod["affinity"]["podAntiAffinity"]
    terms = ([t["podAffinityTerm"] for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution", [])]
             + anti.get("requiredDuringSchedulingIgnoredDuringExecution", []))
    assert terms and all(t["topologyKey"] == "kubernetes.io/hostname"
                         and t["labelSelector"]["matchLabels"] == INSTANCE_LABELS for t in terms)
    if name != "dev":
        assert anti.get("requiredDuringSchedulingIgnoredDuringExecution")
    # the headless Service gives each pod its DNS name, ready or not
    headless = r.get("Service", spec["serviceName"])["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    assert headless["selector"] == INSTANCE_LABELS
    assert [p["port"] for p in headless["ports"]] == [grpc_port(r)]
    # non-root; a service account token that can read this StatefulSet and nothing else
    # (instance/runtime/departure.py tells a scale-in from a restart with it)
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is True
    account = pod["serviceAccountName"]
    assert r.get("ServiceAccount", account)["automountServiceAccountToken"] is False
    binding = next(d for d in r.docs if d["kind"] == "RoleBinding"
                   and any((x["kind"], x["name"]) == ("ServiceAccount", account) for x in d["subjects"]))
    role = r.get("Role", binding["roleRef"]["name"])
    assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["statefulsets"],
                              "resourceNames": [s["metadata"]["name"]], "verbs": ["get"]}]


@pytest.mark.parametrize("name", RENDERINGS)
def test_every_container_has_requests_and_limits(renderings: dict[str, Rendered], name: str) -> None:
    for w in (d for d in renderings[name].docs if d["kind"] in WORKLOADS):
        for c in pod_template(w)["spec"]["containers"]:
            res = c.get("resources", {})
            assert {"cpu", "memory"} <= res.get("requests", {}).keys(), (w["metadata"]["name"], c["name"])
            assert "memory" in res.get("limits", {}), (w["metadata"]["name"], c["name"])
            assert c["securityContext"]["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize("name", RENDERINGS)
def test_cpu_limits_only_where_throttling_costs_nothing(renderings: dict[str, Rendered], name: str) -> None:
    """The instances and the gateway have a CPU request and no CPU limit (CFS throttling would stall
    heartbeats, probes and answers); the nightly snapshot job has limit = request (a batch job:
    Guaranteed, throttling costs no one). Memory is limited everywhere."""
    r = renderings[name]
    for w, c in ((sts(r), "instance"), (r.get("Deployment", "iqmesh-gateway"), "gateway")):
        res = container(w, c)["resources"]
        assert "cpu" not in res["limits"] and "memory" in res["limits"] and "cpu" in res["requests"], (c, res)
    res = container(r.get("CronJob", "iqmesh-snapshot"), "snapshot")["resources"]
    assert res["limits"]["cpu"] == res["requests"]["cpu"] and res["limits"]["memory"] == res["requests"]["memory"]


def _cpu_resources(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, the comment right above) of each ``resources:`` that sets a CPU amount (a
    container's, not a volume claim's storage)."""
    out = []
    for i, line in enumerate(lines):
        if line.strip() != "resources:":
            continue
        def inside(n: str, indent: int = len(line) - len(line.lstrip())) -> bool:
            return not n.strip() or len(n) - len(n.lstrip()) > indent
        if any(b.strip().startswith("cpu:") for b in itertools.takewhile(inside, lines[i + 1:])):
            above = itertools.takewhile(lambda n: n.strip().startswith("#"), reversed(lines[:i]))
            out.append((i + 1, " ".join(above).lower()))
    return out


def test_the_manifests_say_why_cpu_limits_are_or_are_not_set() -> None:
    """Every container's resources in k8s/ (base, overlays, components) come with a comment on CPU
    limits right above them."""
    found = [(f.relative_to(K8S), n, text) for f in sorted(K8S.rglob("*.yaml"))
             for n, text in _cpu_resources(f.read_text().splitlines())]
    assert len(found) >= 6  # instances, gateway, snapshot; the overlays' and the component's patches
    for f, n, text in found:
        assert "cpu" in text and "limit" in text, f"{f}:{n}: resources without a word on CPU limits"


@pytest.mark.parametrize("name", RENDERINGS)
def test_probes_ask_the_plain_http_health_port(renderings: dict[str, Rendered], name: str, tmp_path: Path) -> None:
    """Every probe is an httpGet on the instance's health port (iqmesh.health.port, plain HTTP even
    where the query port serves TLS only): no exec probe starting an interpreter per check, no grpc
    probe that cannot dial TLS. Startup and readiness ask the whole server's health, liveness the
    liveness service (readiness is NOT_SERVING while rebalancing or restoring, no reason to
    restart); the startup probe leaves at least 10 minutes for a restore (production: an hour)."""
    r = renderings[name]
    c = instance(r)
    _, config = run_config(pod_argv(r, sts(r), "instance", "iqmesh-0", tmp_path)[0][1:])
    health = named_port(r, "health")
    assert config.health_port == health != grpc_port(r)
    for kind in ("startup", "readiness", "liveness"):
        probe = c[f"{kind}Probe"]
        assert {"exec", "grpc", "tcpSocket"}.isdisjoint(probe), probe
        get = probe["httpGet"]
        assert get["port"] == "health" and get.get("scheme", "HTTP") == "HTTP", probe
        assert PATHS[get["path"]] == kind
    assert PROBE_SERVICES["liveness"] == LIVENESS and PROBE_SERVICES["readiness"] == PROBE_SERVICES["startup"] == ""
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= (600 if name == "dev" else 3600)
    if name != "dev":
        assert config.security.server_tls  # the case the exec probe was for


@pytest.mark.parametrize("name", RENDERINGS)
@pytest.mark.parametrize("ordinal", [0, 2])
def test_run_parses_what_the_statefulset_passes(renderings: dict[str, Rendered], name: str, ordinal: int,
                                                tmp_path: Path) -> None:
    """The pod's command line, $(VAR)s filled as the kubelet does, is what `iqmesh run` accepts:
    pod name = instance id = static member id, the pod's headless DNS name = application.server,
    the volume claim mounted at state.dir."""
    r = renderings[name]
    s = sts(r)
    pod_name = f"{s['metadata']['name']}-{ordinal}"
    argv, env = pod_argv(r, s, "instance", pod_name, tmp_path)
    assert argv[:2] == ["iqmesh", "run"]
    args, config = run_config(argv[1:])
    assert config.client_id == config.instance_id == pod_name
    assert config.group_instance_id == pod_name
    dns = f"{pod_name}.{s['spec']['serviceName']}.{r.namespace}.svc.cluster.local"
    assert config.application_server == f"{dns}:{grpc_port(r)}"
    assert config.listen_host == "0.0.0.0"  # peers reach it through the DNS name
    claim = s["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    mounts = {m["name"]: m["mountPath"] for m in instance(r)["volumeMounts"]}
    assert mounts[claim] == config.state_dir
    assert config.application_id == env["APPLICATION_ID"] and config.bootstrap_servers == env["KAFKA_BOOTSTRAP"]
    # the token is read from the mounted Secret, never written on the command line or in the env
    auth = next(v for v in pod_template(s)["spec"]["volumes"] if v["name"] == "auth")["secret"]["secretName"]
    assert auth.startswith("iqmesh-auth")
    assert config.auth_token == r.secret_data(auth)["token"] != ""
    assert config.auth_token not in " ".join(instance(r)["args"]) + str(instance(r).get("env"))
    # static membership outlives a pod restart: the grace period plus 30 s to start again
    grace = pod_template(s)["spec"]["terminationGracePeriodSeconds"]
    assert config.session_timeout_ms >= grace * 1000 + 30_000
    # SIGTERM: the instance exits within its grace period even if the broker does not answer (the
    # close gives up after iqmesh.shutdown.timeout.ms; then up to about 6 s of final metadata)
    assert config.shutdown_timeout_ms + 10_000 <= grace * 1000
    if name != "dev":
        assert config.security.server_tls and config.num_standby_replicas >= 1
    # the application the image runs ships in the wheel
    assert load_topology(args.app).describe()


@pytest.mark.parametrize("name", RENDERINGS)
def test_properties_file_names_known_settings_only(renderings: dict[str, Rendered], name: str,
                                                   tmp_path: Path) -> None:
    for cm in renderings[name].of_kind("ConfigMap"):
        for key, text in (cm.get("data") or {}).items():
            if key.endswith(".properties"):
                (tmp_path / key).write_text(text)
                props = load_properties_file(tmp_path / key)
                assert "state.dir" in props
                assert not {"client.id", "group.instance.id", "application.server"} & props.keys(), \
                    "per-pod settings belong on the command line"


@pytest.mark.parametrize("name", RENDERINGS)
def test_pdb_takes_one_instance_at_a_time(renderings: dict[str, Rendered], name: str) -> None:
    r = renderings[name]
    pdbs = [p for p in r.of_kind("PodDisruptionBudget") if p["spec"]["selector"]["matchLabels"] == INSTANCE_LABELS]
    assert len(pdbs) == 1 and pdbs[0]["spec"]["maxUnavailable"] == 1
    assert sts(r)["spec"]["replicas"] >= 3  # so one down leaves a standby's holder up


@pytest.mark.parametrize("name", RENDERINGS)
def test_client_service_routes_to_ready_instances(renderings: dict[str, Rendered], name: str) -> None:
    r = renderings[name]
    svc = r.get("Service", "iqmesh-query")["spec"]
    assert svc["selector"] == INSTANCE_LABELS and svc.get("publishNotReadyAddresses") is not True
    assert svc.get("clusterIP") != "None" and [p["port"] for p in svc["ports"]] == [grpc_port(r)]


@pytest.mark.parametrize("name", RENDERINGS)
def test_network_policy_admits_grpc_from_peers_gateway_and_clients_only(renderings: dict[str, Rendered],
                                                                        name: str) -> None:
    r = renderings[name]
    pols = [p for p in r.of_kind("NetworkPolicy") if "Ingress" in p["spec"]["policyTypes"]
            and p["spec"]["podSelector"].get("matchLabels") == INSTANCE_LABELS]
    assert len(pols) == 1
    spec = pols[0]["spec"]
    assert spec["policyTypes"] == ["Ingress"] and len(spec["ingress"]) == 1
    rule = spec["ingress"][0]
    # the gRPC port only: the health port is the kubelet's (from the node, which no policy blocks)
    assert rule["ports"] == [{"port": grpc_port(r), "protocol": "TCP"}]
    sources = [f["podSelector"]["matchLabels"] for f in rule["from"]]
    assert all(set(f) == {"podSelector"} for f in rule["from"]), "no namespace or IP block sources"
    components = {s.get("app.kubernetes.io/component") for s in sources}
    assert components == {"instance", "gateway", "snapshot", None}
    assert {"iqmesh.io/query-client": "true"} in sources


@pytest.mark.parametrize("name", RENDERINGS)
def test_gateway_runs_what_iqmesh_gateway_parses(renderings: dict[str, Rendered], name: str,
                                                 tmp_path: Path) -> None:
    r = renderings[name]
    gw = r.get("Deployment", "iqmesh-gateway")
    argv, _ = pod_argv(r, gw, "gateway", "iqmesh-gateway-abc", tmp_path)
    args = parser().parse_args(argv[1:])
    assert args.func is cmd_gateway and args.host == "0.0.0.0"
    security = client_security(args)
    assert security.token
    seed = f"iqmesh-query.{r.namespace}.svc.cluster.local:{grpc_port(r)}"
    assert args.seeds == seed
    c = container(gw, "gateway")
    http = {p["name"]: p["containerPort"] for p in c["ports"]}["http"]
    assert args.port == http
    scheme = "HTTPS" if security.server_tls else "HTTP"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in (c["readinessProbe"], c["livenessProbe"]):
        assert probe["httpGet"]["port"] == "http" and probe["httpGet"].get("scheme", "HTTP") == scheme
    svc = r.get("Service", "iqmesh-gateway")["spec"]
    assert svc["selector"] == pod_template(gw)["metadata"]["labels"] | svc["selector"]


@pytest.mark.parametrize("name", RENDERINGS)
def test_snapshot_cronjob_runs_spark_submit_with_the_job_options(renderings: dict[str, Rendered], name: str,
                                                                 tmp_path: Path) -> None:
    import argparse

    r = renderings[name]
    cj = r.get("CronJob", "iqmesh-snapshot")
    assert cj["spec"]["concurrencyPolicy"] == "Forbid"
    argv, env = pod_argv(r, cj, "snapshot", "iqmesh-snapshot-1", tmp_path, image_stage="analytics")
    assert argv[0] == "spark-submit"
    job = argv.index("/opt/iqmesh/snapshot_job.py")  # the Dockerfile links the wheel's job.py there
    spark = argv[1:job]
    master = spark[spark.index("--master") + 1]
    assert master.startswith("k8s://") if name == WITH_COMPONENTS else master.startswith("local[")
    p = argparse.ArgumentParser()
    snapshot_arguments(p)
    opts = options_from_args(p.parse_args(argv[job + 1:]))
    assert opts.application_id == env["APPLICATION_ID"] and opts.bootstrap == env["KAFKA_BOOTSTRAP"]
    if name == WITH_COMPONENTS:
        assert opts.kafka_config["security.protocol"] == "SASL_SSL"
        assert opts.kafka_config["sasl.password"] == r.secret_data("iqmesh-kafka-sasl")["password"]


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_container_runs_the_image_its_overlay_names(renderings: dict[str, Rendered], name: str) -> None:
    import yaml

    kustomization = yaml.safe_load((K8S / "overlays" / name / "kustomization.yaml").read_text())
    named = {f"{i['newName']}:{i['newTag']}" for i in kustomization["images"]}
    used = {c["image"] for w in renderings[name].docs if w["kind"] in WORKLOADS
            for c in pod_template(w)["spec"]["containers"]}
    assert used == named


def test_overlays_differ_where_they_should(renderings: dict[str, Rendered]) -> None:
    namespaces = {n: renderings[n].namespace for n in OVERLAYS}
    assert len(set(namespaces.values())) == len(OVERLAYS)
    dev, prod = (sts(renderings[n]) for n in OVERLAYS)
    assert pod_template(dev)["spec"]["terminationGracePeriodSeconds"] <= \
        pod_template(prod)["spec"]["terminationGracePeriodSeconds"]
