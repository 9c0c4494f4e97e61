"""Load an application file (like examples/wordcount.py): a module with ``build() -> Topology``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from instance.errors import ConfigException
from instance.topology.topology import Topology


def load_module(path: str | Path) -> ModuleType:
    p = Path(path)
    if not p.is_file():
        raise ConfigException(f"application file {p} does not exist")
    name = f"iqmesh_app_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ConfigException(f"cannot load {p} as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_topology(path: str | Path) -> Topology:
    mod = load_module(path)
    build = getattr(mod, "build", None)
    if not callable(build):
        raise ConfigException(f"{path} must define build() returning a Topology")
    topology = build()
    if not isinstance(topology, Topology):
        raise ConfigException(f"{path}: build() returned {type(topology).__name__}, not a Topology")
    return topology
