"""Stores answer queries: every kind of store implements QueryableStore (typed reads, its own
position), queries call those reads, and a read a kind has no answer for is a ValueError."""

from __future__ import annotations

from typing import Any

import pytest

from instance.runtime.query import KeyQuery, RangeQuery, WindowKeyQuery, WindowRangeQuery
from instance.runtime.state_manager import ProcessorStateManager
from instance.serde.windowed import SessionWindow, Windowed
from instance.state.queryable import QueryableStore
from instance.state.spec import StoreSpec
from kernel.serdes import StringSerde
from kernel.task_id import TaskId

APP = "app"
TID = TaskId(0, 1)
S = StringSerde()


def _stores(*, active: bool = True, eos: bool = False) -> tuple[ProcessorStateManager, dict[str, Any]]:
    sm = ProcessorStateManager(TID, None, APP, active=active, eos=eos)
    specs = [StoreSpec("kv", S, S), StoreSpec("w", S, S, kind="window", retention_ms=60_000, window_size_ms=10),
             StoreSpec("sess", S, S, kind="session", retention_ms=60_000),
             StoreSpec("unlogged", S, S, logging_enabled=False)]
    sm.register_stores(specs, in_memory=True, cache_max_entries=100,
                       changelog_for=lambda spec: lambda batch: sm.logged(
                           (spec.changelog_topic(APP), TID.partition), len(batch)))
    return sm, sm.stores


def test_every_kind_of_store_answers_its_own_queries() -> None:
    _, stores = _stores()
    kv: QueryableStore = stores["kv"]
    w: QueryableStore = stores["w"]
    sess: QueryableStore = stores["sess"]
    stores["kv"].put("a", "1")
    stores["kv"].put("b", "2")
    stores["w"].put("k", "x", 0)
    stores["w"].put("k", "y", 10)
    stores["sess"].put(Windowed("k", SessionWindow(0, 5)), "s1")
    assert KeyQuery("a").run(kv, 1) == "1" and KeyQuery("zz").run(kv, 1) is None
    assert RangeQuery("a", "b").run(kv, 1) == [("a", "1"), ("b", "2")]
    assert WindowKeyQuery("k", 0, 10).run(w, 1) == [(0, 10, "x"), (10, 20, "y")]
    assert WindowKeyQuery("k", 10).run(w, 1) == [(10, 20, "y")]  # no end: the one window starting there
    assert WindowRangeQuery("k").run(sess, 1) == [(0, 5, "s1")]


@pytest.mark.parametrize(("store", "query", "message"), [
    ("kv", WindowKeyQuery("k", 0, 10), "kv store: it has no windows"),
    ("kv", WindowRangeQuery("k"), "kv store: it has no sessions"),
    ("w", KeyQuery("k"), "window store: fetch windows of a key"),
    ("w", WindowRangeQuery("k"), "window store: it has no sessions"),
    ("sess", WindowKeyQuery("k", 0, 10), "session store: it has no windows"),
])
def test_a_store_refuses_a_read_its_kind_has_no_answer_for(store: str, query: Any, message: str) -> None:
    _, stores = _stores()
    with pytest.raises(ValueError, match=message):
        query.run(stores[store], 1)


def test_a_store_reports_its_own_position() -> None:
    """The state manager that registered it tells it where its position comes from: for an
    active, what its changelog has, plus what its cache will still send there."""
    sm, stores = _stores()
    tp = ("app-kv-changelog", 1)
    assert stores["kv"].position() == 0 == sm.position(tp)
    stores["kv"].put("a", "1")
    stores["kv"].put("b", "2")
    assert stores["kv"].position() == 2 == sm.position(tp)  # two dirty keys: two records to come
    sm.flush()
    assert stores["kv"].position() == 2 == sm.position(tp)
    assert stores["unlogged"].position() == -1  # no changelog: unknown
    assert stores["w"].position() == sm.position(("app-w-changelog", 1))


def test_a_standby_store_reports_what_it_applied() -> None:
    sm, stores = _stores(active=False)
    tp = ("app-kv-changelog", 1)
    sm.restore(tp, [(b"a", b"1", 0), (b"b", b"2", 0)], 7)
    assert stores["kv"].position() == 7 and KeyQuery("b").run(stores["kv"], 1) == "2"
