"""The application's topology and its processing lag, as the dashboard and ``/v1/topology`` show
them: the Describe RPC asked every few seconds (it reads offsets from the broker, so less often
than the routing table), and its input lag summed per instance (the owner of each partition's
task in the routing table) and per input topic.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import grpc

from kernel.rpc import iqmesh_pb2 as pb
from router.gateway.backend import Backend
from router.gateway.errors import ApiError

log = logging.getLogger(__name__)


def topology_to_json(reply: pb.DescribeReply) -> dict[str, Any]:
    return {
        "asked": reply.asked, "application_id": reply.application_id, "description": reply.description,
        "subtopologies": [{"id": s.id, "tasks": s.tasks, "source_topics": list(s.source_topics),
                           "sink_topics": list(s.sink_topics), "repartition_topics": list(s.repartition_topics),
                           "stores": list(s.stores), "changelog_topics": list(s.changelog_topics)}
                          for s in reply.subtopologies],
        "global_stores": [{"store": g.store, "topic": g.topic} for g in reply.global_stores],
    }


def input_lag_to_json(reply: pb.DescribeReply) -> list[dict[str, Any]]:
    return [{"task": x.task, "topic": x.topic, "partition": x.partition, "committed": x.committed,
             "end_offset": x.end_offset, "lag": x.lag} for x in reply.input_lag]


def processing_lag(lags: list[dict[str, Any]], md: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Records behind the input, summed per instance (the live owner of the partition's task;
    ``"(no owner)"`` while none holds it) and per topic."""
    owner = {t: i["instance_id"] for i in md.get("instances", []) if i.get("alive") for t in i["active_tasks"]}
    by_instance: dict[str, int] = {i["instance_id"]: 0 for i in md.get("instances", []) if i.get("alive")}
    by_topic: dict[str, int] = {}
    for x in lags:
        who = owner.get(x["task"], "(no owner)")
        by_instance[who] = by_instance.get(who, 0) + x["lag"]
        by_topic[x["topic"]] = by_topic.get(x["topic"], 0) + x["lag"]
    return {"by_instance": by_instance, "by_topic": dict(sorted(by_topic.items()))}


@dataclass
class TopologyView:
    """The latest Describe answer (``at`` 0: none yet)."""

    at: float = 0.0
    topology: dict[str, Any] = field(default_factory=dict)
    input_lag: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""  # why the latest ask failed, or why the instance could not read the lag


class TopologyPoller:
    """Asks Describe every ``interval`` seconds; ``latest`` keeps the last answer (a failed ask
    keeps the previous topology and lag, with the error)."""

    def __init__(self, backend: Backend, interval: float = 2.0) -> None:
        self.backend = backend
        self.interval = interval
        self.latest = TopologyView()

    async def poll_once(self) -> TopologyView:
        try:
            reply, _ = await self.backend.call(lambda c: c.describe())
        except (grpc.RpcError, ApiError) as e:
            msg = e.message if isinstance(e, ApiError) else f"{e.code().name}: {e.details()}"
            prev = self.latest
            self.latest = TopologyView(prev.at, prev.topology, prev.input_lag, msg)
        else:
            self.latest = TopologyView(time.time(), topology_to_json(reply), input_lag_to_json(reply),
                                       reply.input_lag_error)
        return self.latest

    async def run(self) -> None:
        while True:
            try:
                await self.poll_once()
            except Exception:
                log.exception("asking the topology failed")
            await asyncio.sleep(self.interval)
