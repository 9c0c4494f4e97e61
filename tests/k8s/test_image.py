"""The Dockerfile, tested without a container engine: what the build stage COPYs (after
.dockerignore) builds the wheel; the wheel, installed in a fresh venv with only its declared
dependencies, runs the command lines of the manifests (the StatefulSet's `iqmesh run` parses and
loads its application, `iqmesh gateway --help`, the probes' health port and the health_probe
command, the snapshot job)."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from loadtest.k8s_sim.manifests import Rendered, container
from tests.k8s.pods import DOCKERFILE, entrypoint, pod_argv

ROOT = DOCKERFILE.parent
RUN_CONFIG = Path(__file__).with_name("run_config.py")
DEV_ONLY = {"pytest", "ruff", "mypy", "noida-db", "grpcio-tools", "py-spy", "selenium", "schemathesis"}


def _stages() -> dict[str, list[str]]:
    """Dockerfile instructions per stage (continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    stages: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line, re.IGNORECASE)
        if m:
            current = m.group(2)
            stages[current] = [line]
        else:
            stages[current].append(line)
    return stages


def _matches(rel: str, pattern: str) -> bool:
    """A .dockerignore pattern matches the path or one of its parent directories; ``**/`` at any
    depth."""
    pattern = pattern.rstrip("/")
    parts = rel.split("/")
    if pattern.startswith("**/"):
        return any(_matches("/".join(parts[i:]), pattern[3:]) for i in range(len(parts)))
    return any(fnmatch.fnmatchcase("/".join(parts[:i]), pattern) for i in range(1, len(parts) + 1))


def _ignored(rel: str, patterns: list[str]) -> bool:
    """.dockerignore's rule: the last matching pattern wins, ``!`` re-includes."""
    out = False
    for p in patterns:
        neg = p.startswith("!")
        if _matches(rel, p[1:] if neg else p):
            out = not neg
    return out


def test_dockerfile_policy() -> None:
    stages = _stages()
    assert {"build", "runtime", "analytics"} <= stages.keys()
    args = dict(re.findall(r"ARG\s+(\w+)=(\S+)", "\n".join(stages[""])))
    base = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base), \
        f"the base image is pinned to a patch release: {base}"
    for name in ("runtime", "analytics"):
        lines = stages[name]
        users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
        assert users and users[-1] == "10001:10001", f"{name} runs as the non-root user"
    runtime = " ".join(stages["runtime"])
    assert "pip install --no-cache-dir /wheels/iqmesh-*.whl" in runtime and "COPY --from=build /wheels" in runtime
    assert not re.search(r"COPY (?!--from)", runtime), "the runtime image gets the wheel only, no sources"
    assert not any(tool in runtime for tool in DEV_ONLY | {"gcc", "build-essential", "[dev"})
    assert entrypoint("runtime") == ["iqmesh"] and entrypoint("analytics") == ["spark-submit"]
    assert "/opt/iqmesh/snapshot_job.py" in " ".join(stages["analytics"])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built, like the build stage, from exactly what it COPYs out of the context
    .dockerignore lets through."""
    ctx = tmp_path_factory.mktemp("context")
    patterns = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    for line in _stages()["build"]:
        if not line.startswith("COPY ") or "--from" in line:
            continue
        for src in line.split()[1:-1]:
            for f in [ROOT / src] if (ROOT / src).is_file() else sorted((ROOT / src).rglob("*")):
                rel = f.relative_to(ROOT).as_posix()
                if f.is_file() and not _ignored(rel, patterns):
                    (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, ctx / rel)
    assert (ctx / "iqmesh" / "main.py").exists() and (ctx / "kernel" / "rpc" / "iqmesh_pb2.py").exists()
    assert not (ctx / "tests").exists()
    assert not list(ctx.rglob("__pycache__"))
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(ctx)], check=True, capture_output=True, timeout=300)
    (whl,) = out.glob("iqmesh-*.whl")
    return whl


def _closure(extras: tuple[str, ...]) -> set[str]:
    """Distributions iqmesh (with ``extras``) needs, transitively, as installed here."""
    seen: set[str] = set()
    todo = [(r, extras) for r in metadata.requires("iqmesh") or []]
    while todo:
        raw, ex = todo.pop()
        req = Requirement(raw)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in ("", *ex)):
            continue
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        todo += [(r, tuple(req.extras)) for r in metadata.requires(req.name) or []]
    return seen


def _venv(root: Path, wheel: Path, extras: tuple[str, ...]) -> Path:
    """A fresh venv with the wheel (its console script included) and, linked from this
    interpreter's site-packages, only the distributions it declares."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    py = root / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True, timeout=300)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    here = Path(sysconfig.get_paths()["purelib"])
    needed = _closure(extras)
    assert not needed & DEV_ONLY, f"dev tools among the runtime dependencies: {needed & DEV_ONLY}"
    for name in needed:
        dist = metadata.distribution(name)
        for f in dist.files or []:
            src = Path(str(dist.locate_file(f))).resolve()
            if not src.is_file() or not str(src).startswith(str(here)):
                continue  # console scripts and files outside site-packages
            dst = site / src.relative_to(here)
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.symlink_to(src)
    return root


@pytest.fixture(scope="module")
def runtime_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield _venv(tmp_path_factory.mktemp("venv") / "runtime", wheel, ())


def _run(venv: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(cwd), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_statefulset_command_runs_from_the_wheel(renderings: dict[str, Rendered], runtime_venv: Path,
                                                     tmp_path: Path) -> None:
    """The image's entrypoint + the StatefulSet's args: `--help` works, and the full command line
    parses to a valid configuration and loads its application with the wheel's code alone."""
    for name in ("dev", "production-example"):
        r = renderings[name]
        sts = r.get("StatefulSet", "iqmesh")
        argv, _ = pod_argv(r, sts, "instance", "iqmesh-1", tmp_path / name)
        exe = runtime_venv / "bin" / argv[0]
        assert exe.exists(), f"the wheel provides no {argv[0]} command"
        helped = _run(runtime_venv, [str(exe), *argv[1:3], "--help"], tmp_path)
        assert helped.returncode == 0 and "--config-file" in helped.stdout, helped.stderr
        parsed = _run(runtime_venv, [str(runtime_venv / "bin" / "python"), str(RUN_CONFIG), *argv[1:]], tmp_path)
        assert parsed.returncode == 0, parsed.stderr
        out = json.loads(parsed.stdout)
        assert out["instance_module"].startswith(str(runtime_venv)), "iqmesh came from the wheel"
        assert out["instance_id"] == "iqmesh-1" and out["config"]["group.instance.id"] == "iqmesh-1"
        assert out["config"]["state.dir"] == "/var/lib/iqmesh"


def test_the_gateway_and_probe_commands_run_from_the_wheel(renderings: dict[str, Rendered], runtime_venv: Path,
                                                           tmp_path: Path) -> None:
    r = renderings["production-example"]
    gw = r.get("Deployment", "iqmesh-gateway")
    argv, _ = pod_argv(r, gw, "gateway", "iqmesh-gateway-x", tmp_path)
    helped = _run(runtime_venv, [str(runtime_venv / "bin" / argv[0]), argv[1], "--help"], tmp_path)
    assert helped.returncode == 0 and "--seeds" in helped.stdout, helped.stderr
    imported = _run(runtime_venv, [str(runtime_venv / "bin" / "python"), "-c",
                                   "import router.gateway.app, router.gateway.api; import importlib.resources as r; "
                                   "print(r.files('router.gateway').joinpath('static/index.html').is_file())"],
                    tmp_path)
    assert imported.stdout.strip() == "True", imported.stderr
    # the probes' health port answers from the wheel's code (the path the readiness probe asks)
    path = container(r.get("StatefulSet", "iqmesh"), "instance")["readinessProbe"]["httpGet"]["path"]
    served = _run(runtime_venv, [str(runtime_venv / "bin" / "python"), "-c",
                                 "import urllib.request, urllib.error\n"
                                 "from grpc_health.v1.health import HealthServicer\n"
                                 "from instance.server.health_http import HealthServer\n"
                                 "s = HealthServer(HealthServicer(), '127.0.0.1', 0).start()\n"
                                 f"r = urllib.request.urlopen(f'http://127.0.0.1:{{s.port}}{path}', timeout=30)\n"
                                 "print(r.status, r.read().decode().strip())"], tmp_path)
    assert served.stdout.strip() == "200 SERVING", served.stderr
    # and the exec probe command users may keep calling
    pod_argv(r, r.get("StatefulSet", "iqmesh"), "instance", "iqmesh-0", tmp_path)  # the mounted files
    ran = _run(runtime_venv, [str(runtime_venv / "bin" / "python"), "-m", "iqmesh.health_probe",
                              f"--config-file={tmp_path}/etc/iqmesh/config/app.properties", "--probe=readiness",
                              "--target", "127.0.0.1:1", "--timeout", "1"], tmp_path)
    assert (ran.returncode, ran.stdout.strip()) == (1, "UNAVAILABLE"), ran.stderr


def test_the_snapshot_job_is_in_the_wheel_with_its_extra(wheel: Path, tmp_path: Path) -> None:
    """The analytics image installs the wheel with [analytics]: the job file spark-submit runs
    exists there, and imports with only the declared dependencies."""
    venv = _venv(tmp_path / "analytics", wheel, ("analytics",))
    code = ("import analytics.snapshot.job as j, pyspark, os; print(j.__file__); "
            "print(os.path.isfile(os.path.join(os.path.dirname(pyspark.__file__), 'bin', 'spark-submit')))")
    ran = _run(venv, [str(venv / "bin" / "python"), "-c", code], tmp_path)
    assert ran.returncode == 0, ran.stderr
    job, has_submit = ran.stdout.split()
    assert job.startswith(str(venv)) and job.endswith("analytics/snapshot/job.py") and has_submit == "True"
