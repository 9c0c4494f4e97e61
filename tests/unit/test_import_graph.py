"""No import cycles between our modules, and the layers of router/ and instance/ kept apart.

The graph is read from the source with ``ast`` (nothing is imported): every ``import`` counts,
those inside functions and under ``TYPE_CHECKING`` too, because a lazy import only hides a cycle
from the interpreter, not from the reader. ``from a.b import c`` is an edge to ``a.b.c`` when that
is a module, else to ``a.b``; a package's ``__init__`` is a module like any other (importing a
submodule is not counted as importing its package, which Python does but no reader minds).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("iqmesh", "kernel", "instance", "router", "analytics", "examples", "loadtest", "devtools")

#: Import edges that close a cycle today, allowed while they are being removed. The test drops
#: them and then requires no cycle at all; entries go, none come.
ALLOWED_EDGES: frozenset[tuple[str, str]] = frozenset({
})
#: Sub-packages that import each other (a cycle between packages, though none between modules),
#: allowed while they are being taken apart; entries go, none come. None left: config checks the
#: handler and extractor settings with topology/handlers.py and topology/timestamps.py, the group
#: protocol's with group_protocol.py, all below the runtime.
ALLOWED_PACKAGE_CYCLES: frozenset[frozenset[str]] = frozenset()
#: No package is exempt, the DSL included: its handles (KStream, KTable, the grouped, windowed and
#: cogrouped streams), which return one another as Kafka Streams' interfaces do, are one module
#: (instance.topology.dsl) above the functions that build the graph, which return plain values.


@dataclass(frozen=True)
class Layer:
    """Modules in package ``importer`` import nothing from the packages ``forbidden``, except the
    modules of ``exempt`` (each with the reason it may)."""

    importer: str
    forbidden: tuple[str, ...]
    exempt: tuple[tuple[str, str], ...] = ()


#: The split of issue 19: a shared kernel both sides import (kernel/, issue 29 point 4: it imports
#: none of them, nor the generated gRPC stubs of kernel/rpc); the client on the kernel; the gateway on
#: the client; the runtime on the core only, its query server also on the client. The command line
#: (iqmesh/, issue 29 point 4) sits above instance, router and analytics, which it drives: none of
#: them imports it, and the runtime imports neither the gateway nor the analytics job. The
#: configuration sits below the runtime it configures.
ABOVE_ALL = ("iqmesh",)
LAYERS: tuple[Layer, ...] = (
    Layer("kernel", ("instance", "router", "analytics", *ABOVE_ALL)),
    Layer("router.client", ("instance", "router.gateway", "analytics", *ABOVE_ALL)),
    Layer("router.gateway", ("instance", "analytics", *ABOVE_ALL)),
    Layer("instance", ("router.client",), exempt=(
        ("instance.server", "the query server passes a query on to its peers as a client does"),
        ("instance.local", "a local cluster and the demo query the instances they start as any client "
                           "does (waiting for RUNNING, the demo's queries); tooling of the CLI, not runtime"),
    )),
    Layer("instance", ("router.gateway", "analytics", *ABOVE_ALL)),
    Layer("analytics", ABOVE_ALL),
    Layer("instance.config", ("instance.runtime", "instance.server", "instance.local", "instance.reset")),
)
#: router/ is its sub-packages only (a module at its top would belong to no layer)
ROUTER_PACKAGES: tuple[str, ...] = ("router.client", "router.gateway")


@dataclass(frozen=True)
class Module:
    name: str
    path: Path

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def modules() -> dict[str, Module]:
    """Every module of our packages by dotted name (generated gRPC stubs included)."""
    found: dict[str, Module] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = Module(name, path)
    return found


def _named(module: Module, node: ast.Import | ast.ImportFrom, known: dict[str, Module]) -> Iterator[str]:
    """Dotted names one import statement reaches: ``from x import y`` is ``x.y`` when that is a
    module, else ``x``; relative imports resolved from ``module``'s package."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
        anchor = package[: len(package) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    for alias in node.names:
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base


def imports_of(module: Module, known: dict[str, Module]) -> set[str]:
    """Our modules ``module`` imports, each as the most specific known name."""
    tree = ast.parse(module.path.read_text(), str(module.path))
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for name in _named(module, node, known):
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name and name != module.name:
                    targets.add(name)
    return targets


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(m, known) for name, m in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def describe(component: frozenset[str], edges: dict[str, set[str]]) -> str:
    inside = sorted(f"{a} -> {b}" for a in component for b in edges[a] if b in component)
    return "{" + ", ".join(sorted(component)) + "}: " + "; ".join(inside)


def test_the_graph_sees_imports() -> None:
    """The reader finds plain, from-, lazy and relative imports (a broken reader finds no cycles)."""
    edges = graph()
    assert "instance.config" in edges["instance.runtime.kafka_streams"]  # at the top
    assert "analytics.snapshot.job" in edges["iqmesh.snapshot"]  # inside a function
    assert {"iqmesh.run", "iqmesh.query"} <= edges["iqmesh.main"]  # from a package import module
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    edges = {a: {b for b in targets if (a, b) not in ALLOWED_EDGES} for a, targets in graph().items()}
    found = cycles(edges)
    assert not found, "import cycles:\n" + "\n".join(describe(c, edges) for c in found)


def package_of(module: str, known: dict[str, Module]) -> str:
    """The sub-package a module belongs to (``instance.runtime.query.execute`` ->
    ``instance.runtime``); a top-level module (``instance.config``) is its own."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or known[module].is_package else module


def package_graph() -> dict[str, set[str]]:
    """Imports between sub-packages (and top-level modules), within one top package."""
    known = modules()
    edges: dict[str, set[str]] = {}
    for a, targets in graph().items():
        pa = package_of(a, known)
        for b in targets:
            pb = package_of(b, known)
            if pa != pb and pa.split(".")[0] == pb.split(".")[0] and "." in pa and "." in pb:
                edges.setdefault(pa, set()).add(pb)
            edges.setdefault(pb, set())
        edges.setdefault(pa, set())
    return edges


def test_no_cycles_between_sub_packages() -> None:
    """topology -> runtime -> topology and the like: no cycle between modules, but one between
    the packages they live in (issue 29 point 4). Those left are listed, and only those."""
    edges = package_graph()
    found = set(cycles(edges))
    assert found <= ALLOWED_PACKAGE_CYCLES, "cycles between sub-packages:\n" + "\n".join(
        describe(c, edges) for c in found - ALLOWED_PACKAGE_CYCLES)
    assert ALLOWED_PACKAGE_CYCLES <= found, f"gone, remove: {ALLOWED_PACKAGE_CYCLES - found}"
    assert "instance.runtime" in edges["instance.topology"] or "instance.topology" in edges["instance.runtime"]


def test_allowed_edges_exist() -> None:
    """An allowed edge that is gone leaves the list (so the list shows what is left to do)."""
    edges = graph()
    gone = sorted((a, b) for a, b in ALLOWED_EDGES if b not in edges.get(a, set()))
    assert not gone, f"no longer imported: remove from ALLOWED_EDGES: {gone}"


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _exemption(layer: Layer, module: str) -> str | None:
    return next((p for p, _ in layer.exempt if _within(module, p)), None)


def layer_breaks(edges: dict[str, set[str]]) -> list[str]:
    """The imports of ``edges`` that some layer forbids."""
    return sorted(f"{a} -> {b}" for layer in LAYERS for a, targets in edges.items()
                  if _within(a, layer.importer) and _exemption(layer, a) is None
                  for b in targets if any(_within(b, f) for f in layer.forbidden))


def test_layers() -> None:
    broken = layer_breaks(graph())
    assert not broken, "imports across layers:\n" + "\n".join(broken)


def test_exemptions_are_used() -> None:
    """An exemption no module needs any more leaves its layer (as allowed edges leave their list)."""
    edges = graph()
    unused = sorted(f"{layer.importer} -/-> {layer.forbidden}: {package}" for layer in LAYERS
                    for package, _ in layer.exempt
                    if not any(_exemption(layer, a) == package and any(_within(b, f) for f in layer.forbidden)
                               for a, targets in edges.items() for b in targets))
    assert not unused, "exemptions no longer needed:\n" + "\n".join(unused)


def test_router_is_its_packages() -> None:
    stray = sorted(m for m in modules() if _within(m, "router") and m != "router"
                   and not any(_within(m, p) for p in ROUTER_PACKAGES))
    assert not stray, f"router modules outside {ROUTER_PACKAGES}: {stray}"


def test_a_layer_break_is_seen() -> None:
    """The layer check reads real edges: the runtime does import the core, and an import of the
    client from the runtime would be reported; the command line imports the layers below it, which
    an import from any of them would break."""
    edges = graph()
    below_cli = {b for a, targets in edges.items() if _within(a, "iqmesh") for b in targets}
    assert "analytics.snapshot.job" in below_cli and any(_within(b, "router.gateway") for b in below_cli)
    assert any(_within(b, "instance.runtime") for b in below_cli)
    above = [layer for layer in LAYERS if "iqmesh" in layer.forbidden]
    assert {layer.importer for layer in above} >= {"instance", "kernel", "router.client", "router.gateway",
                                                   "analytics"}
    assert all(_exemption(layer, "instance.runtime.kafka_streams") is None for layer in above)
    upward = {"instance.runtime.task": {"iqmesh.main"}, "router.gateway.app": {"iqmesh.options"},
              "instance.server.servicer": {"analytics.snapshot.job"}, "instance.config": {"instance.runtime.tasks"}}
    assert layer_breaks(upward) == ["instance.config -> instance.runtime.tasks",
                                    "instance.runtime.task -> iqmesh.main",
                                    "instance.server.servicer -> analytics.snapshot.job",
                                    "router.gateway.app -> iqmesh.options"]
    assert "kernel.task_id" in edges["instance.runtime.task"]
    assert "router.client.query_router" in edges["instance.server.servicer"]
    runtime = next(layer for layer in LAYERS if layer.importer == "instance" and "router.client" in layer.forbidden)
    assert _exemption(runtime, "instance.runtime.task") is None
    assert _exemption(runtime, "instance.server.servicer") == "instance.server"
