"""Transactional ids: one of its own per producer, recognisable per instance (runtime/membership.py)."""

from __future__ import annotations

from instance.runtime.membership import owned_by, transactional_id


def test_every_producer_gets_a_new_id_owned_by_its_instance() -> None:
    ids = {transactional_id("app", "inst-1", 2) for _ in range(50)}
    assert len(ids) == 50
    assert all(owned_by("app", "inst-1")(tid) for tid in ids)
    assert all(tid.startswith("app-inst-1-2-") for tid in ids)


def test_an_instance_whose_id_extends_ours_is_not_ours() -> None:
    mine = owned_by("app", "inst-1")
    assert not mine(transactional_id("app", "inst-10", 1))
    assert not mine(transactional_id("app", "inst-1-b", 1))
    assert not mine(transactional_id("other-app", "inst-1", 1))
    assert mine("app-inst-1-3")  # the stable id of earlier releases: fenced too
