"""``/v1/stores/{store}/watch`` as Server-Sent Events over the gateway's three-instance cluster: a
key's changes arrive as they are committed, each with its resume token as the event id, and a
reconnect with ``Last-Event-ID`` (or ``token``) goes on right after that event: nothing missed,
nothing repeated. Bad requests are JSON errors before any event.

This module writes input (one word no other test reads) and records it in the shared truth."""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

import pytest

from instance.local.cluster import produce
from tests.integration.gateway.conftest import GatewayCluster
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

WORD = "ssewatched"
#: the deadline of each wait on a condition (generous: only its upper bound)
WAIT_S = 60


def read_events(url: str, headers: dict[str, str] | None = None,
                out: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every event of the stream at ``url`` until it ends (id, event, data parsed), appended to
    ``out`` as each arrives."""
    out = [] if out is None else out
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=60) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        current: dict[str, Any] = {}
        for raw in r:
            line = raw.decode().rstrip("\n")
            if not line:
                if current:
                    out.append(current)
                    current = {}
                continue
            if line.startswith(":"):
                continue  # keepalive
            name, _, value = line.partition(": ")
            current[name] = json.loads(value) if name == "data" else value
    return out


@pytest.mark.timeout(180)
def test_watch_streams_changes_and_resumes_from_the_last_event_id(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    events: list[dict[str, Any]] = []
    failed: list[BaseException] = []

    def follow() -> None:
        try:
            read_events(f"{gc.url}/v1/stores/counts/watch?key={WORD}&max_events=3", out=events)
        except BaseException as e:
            failed.append(e)
    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    wait_until(lambda: events or failed, WAIT_S, "the start event", gc.logs)
    for i in range(1, 4):
        produce(gc.bootstrap, _topic(gc), [(None, WORD.encode())])
        # the next word only once this count is committed and streamed: a count read from the
        # store may still be in its cache, and two increments within one commit interval are one
        # changelog record, so one change event
        def changed(i: int = i) -> bool:
            return bool(failed) or _changes(events)[-1:] == [i]
        wait_until(changed, WAIT_S, f"the change to {i}", gc.logs)
        assert not failed, failed
    assert _count(gc) == 3
    reader.join(WAIT_S)
    assert not reader.is_alive() and not failed, failed
    gc.truth[WORD] = 3

    start, *changes = events
    assert start["event"] == "start" and start["data"]["store"] == "counts" and start["id"]
    assert start["data"]["value_serde"] == "long" and len(start["data"]["partitions"]) == 1
    assert [(e["event"], e["data"]["key"], e["data"]["value"]) for e in changes if e["event"] == "change"] == [
        ("change", WORD, 1), ("change", WORD, 2), ("change", WORD, 3)]
    changes = [e for e in changes if e["event"] == "change"]
    assert all(e["id"] == e["data"]["resume_token"] for e in changes)

    # a reconnect after the second change gets the third, and only it
    again = read_events(f"{gc.url}/v1/stores/counts/watch?key={WORD}&max_events=1",
                        {"Last-Event-ID": changes[1]["id"]})
    # ``progress`` events (the position moved on, nothing matched) may come between, on a busy
    # machine: they carry a resume token, never a value
    assert [(e["event"], e["data"].get("value")) for e in _without_progress(again)] == [
        ("start", None), ("change", 3)]
    assert _without_progress(again)[1]["data"]["offset"] == changes[2]["data"]["offset"]

    # ``token`` resumes the same way; the next change is new input
    def next_change() -> None:
        try:
            read_events(f"{gc.url}/v1/stores/counts/watch?key={WORD}&max_events=1&token={changes[2]['id']}",
                        out=resumed)
        except BaseException as e:
            failed.append(e)
    resumed: list[dict[str, Any]] = []
    reader = threading.Thread(target=next_change, daemon=True)
    reader.start()
    wait_until(lambda: resumed or failed, WAIT_S, "the start event", gc.logs)
    produce(gc.bootstrap, _topic(gc), [(None, WORD.encode())])
    gc.truth[WORD] = 4
    reader.join(WAIT_S)
    assert not reader.is_alive(), "the resumed stream did not end after its one change"
    assert not failed, failed
    assert [(e["event"], e["data"].get("value")) for e in _without_progress(resumed)] == [
        ("start", None), ("change", 4)]


def _without_progress(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` less the ``progress`` ones, each checked to be a bare resume point."""
    for e in events:
        if e["event"] == "progress":
            assert e["id"] == e["data"]["resume_token"] and "value" not in e["data"], e
    return [e for e in events if e["event"] != "progress"]


def test_bad_watch_requests_are_json_errors(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    for path, status, code in [("/v1/stores/nope/watch?key=a", 404, "UNKNOWN_STORE"),
                               ("/v1/stores/counts/watch?token=garbage", 400, "INVALID_ARGUMENT"),
                               ("/v1/stores/counts/watch?key=a&prefix=b", 400, "INVALID_ARGUMENT"),
                               ("/v1/stores/nope/watch?key=a&prefix=true", 404, "UNKNOWN_STORE"),
                               ("/v1/stores/counts/watch?max_events=0", 400, "INVALID_ARGUMENT"),
                               ("/v1/stores/counts/watch?from_beginning=maybe", 400, "INVALID_ARGUMENT")]:
        got, body = gc.get(path)
        assert (got, body["error"]["code"]) == (status, code), (path, body)


def _topic(gc: GatewayCluster) -> str:
    return f"lines-{gc.cluster.application_id.removeprefix('wc-')}"


def _changes(events: list[dict[str, Any]]) -> list[Any]:
    """The values of the change events so far."""
    return [e["data"]["value"] for e in list(events) if e.get("event") == "change"]


def _count(gc: GatewayCluster) -> int | None:
    status, body = gc.get(f"/v1/stores/counts/keys/{WORD}")
    return body["value"] if status == 200 else None

