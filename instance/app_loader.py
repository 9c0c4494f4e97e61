"""Load an application: a module with ``build() -> Topology``, given as a file
(``examples/wordcount.py``) or as an importable module name (``examples.wordcount``)."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType, TracebackType

from instance.errors import ConfigException, TopologyException
from instance.topology.topology import Topology

_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class ApplicationError(ConfigException):
    """The application's own code raised while it was loaded: where, and what it raised."""

    def __init__(self, app: str, doing: str, error: BaseException) -> None:
        where = _innermost(error.__traceback__)
        if isinstance(error, SyntaxError) and error.filename:
            where = f"{error.filename}:{error.lineno}"
        super().__init__(f"{app}: {doing} raised {type(error).__name__}: {error}" + (f" (at {where})" if where else ""))


def _innermost(tb: TracebackType | None) -> str:
    """``file:line`` of the innermost frame of a traceback."""
    last = ""
    while tb is not None:
        last = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return last


def load_module(app: str | Path) -> ModuleType:
    """An existing file is loaded from its path; otherwise a dotted name is imported."""
    p = Path(app)
    if p.is_file():
        return _load_file(p)
    name = str(app)
    if not _MODULE_NAME.match(name) or name.endswith(".py"):
        raise ConfigException(f"application file {p} does not exist")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            raise ConfigException(f"{name} is neither an application file nor an importable module") from e
        raise ApplicationError(name, "importing it", e) from e
    except Exception as e:
        raise ApplicationError(name, "importing it", e) from e


def _load_file(p: Path) -> ModuleType:
    name = f"iqmesh_app_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ConfigException(f"cannot load {p} as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        sys.modules.pop(name, None)
        raise ApplicationError(str(p), "importing it", e) from e
    return mod


def load_topology(app: str | Path) -> Topology:
    mod = load_module(app)
    build = getattr(mod, "build", None)
    if not callable(build):
        raise ConfigException(f"{app} must define build() returning a Topology")
    try:
        topology = build()
    except (ConfigException, TopologyException):
        raise
    except Exception as e:
        raise ApplicationError(str(app), "its build()", e) from e
    if not isinstance(topology, Topology):
        raise ConfigException(f"{app}: build() returned {type(topology).__name__}, not a Topology")
    return topology
