"""A local Get stays short (issue 29 point 6): recorded from the servicer to the store and back by
``loadtest.get_path``, it visits at most ``MAX_MODULES`` modules and crosses between the instance
and the router once each way, and the budget check sees a path that grows."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.get_path import MAX_MODULES, crossings, get_path, over_budget

pytestmark = pytest.mark.integration


def test_a_local_get_is_within_its_budget(bootstrap: str, tmp_path: Path) -> None:
    path, runs = get_path(bootstrap, str(tmp_path), timed=10)
    assert len(runs) == 5 and all(r > 0 for r in runs)
    modules = [m for m, _ in path]
    assert modules[0] == "instance/server/servicer.py" and "instance/state/typed_store.py" in modules  # to the store
    assert modules.count("instance/runtime/query/execute.py") == 1  # one visit decides the local read
    assert not over_budget(path), over_budget(path)
    grown = [*path, ("router/client/query_router.py", ["route"]), ("instance/server/replies.py", ["x"])]
    assert crossings(grown) == (2, 2)
    assert over_budget(grown)  # one crossing too many each way
    wide = [(f"instance/m{i}.py", ["f"]) for i in range(MAX_MODULES + 1)]
    assert over_budget(wide) == [f"{MAX_MODULES + 1} modules, at most {MAX_MODULES}"]
