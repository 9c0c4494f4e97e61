"""The application as it publishes itself: its stores (changelog topic, serdes, partitions) and its
instances, read once from ``<application.id>-iqmesh-instances`` with the follower the instances
and the gateway use (kernel/instances_follower.py). Nothing here needs flags beyond the bootstrap
servers and the application id."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from analytics.snapshot.options import SnapshotError
from kernel.instances_follower import InstancesFollower, instances_topic
from kernel.kafka_clients import ClientKind, client_config
from kernel.metadata import ClusterView, InstanceInfo, StoreInfo


@dataclass(frozen=True)
class Catalog:
    application_id: str
    stores: dict[str, StoreInfo]
    #: latest InstanceInfo per instance (removed ones left out), by instance id
    instances: dict[str, InstanceInfo]

    def live_endpoints(self) -> list[str]:
        """Endpoints of the instances that answer queries now (heartbeat fresh, RUNNING or REBALANCING)."""
        view = ClusterView()
        return [i.endpoint for i in self.instances.values() if i.endpoint and view.is_alive(i)]

    def select(self, names: tuple[str, ...], source: str) -> list[StoreInfo]:
        """The stores to snapshot: those named (each must exist), else every store the source can read."""
        if names:
            unknown = [n for n in names if n not in self.stores]
            if unknown:
                names_ = ", ".join(map(repr, unknown))
                raise SnapshotError(f"application {self.application_id!r} has no store {names_}; "
                                    f"its stores: {', '.join(sorted(self.stores)) or 'none'}")
            chosen = [self.stores[n] for n in dict.fromkeys(names)]
        else:
            chosen = [self.stores[n] for n in sorted(self.stores)]
        if source == "changelog":
            unlogged = [s.store for s in chosen if not s.changelog]
            if unlogged and names:
                raise SnapshotError(f"store(s) {', '.join(unlogged)} have no changelog (logging disabled): "
                                    f"use --source instances")
            chosen = [s for s in chosen if s.changelog]
        if not chosen:
            raise SnapshotError(f"application {self.application_id!r} has no store to snapshot")
        return chosen


def kafka_config(bootstrap: str, extra: dict[str, str], ours: dict[str, Any] | None = None,
                 kind: ClientKind = "restore.consumer") -> dict[str, Any]:
    r"""A snapshot client's settings, with Kafka Streams' prefixes (kernel/kafka_clients.py): the
    readers of changelogs and topics are ``restore.consumer``\ s, the topic lister is ``admin``."""
    return client_config(bootstrap, extra, kind, **(ours or {}))


def topic_partitions(bootstrap: str, topics: list[str], extra: dict[str, str], timeout: float) -> dict[str, int]:
    """Partition count of each topic that exists; SnapshotError when the broker cannot be reached."""
    admin = AdminClient(kafka_config(bootstrap, extra, kind="admin"))
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as e:
        raise SnapshotError(f"cannot reach the Kafka cluster at {bootstrap}: {e.args[0]}") from None
    return {t: len(md.topics[t].partitions) for t in topics if t in md.topics and md.topics[t].error is None}


def read_catalog(bootstrap: str, application_id: str, extra: dict[str, str] | None = None,
                 timeout: float = 30.0) -> Catalog:
    extra = extra or {}
    topic = instances_topic(application_id)
    if topic not in topic_partitions(bootstrap, [topic], extra, timeout):
        raise SnapshotError(f"no application {application_id!r} at {bootstrap}: its metadata topic {topic!r} "
                            f"does not exist (has an instance of it ever started?)")
    infos = _read_latest(bootstrap, application_id, extra, timeout)
    instances: dict[str, InstanceInfo] = {}
    for iid, raw in infos.items():
        try:
            instances[iid] = InstanceInfo.from_json(raw)
        except Exception:  # noqa: BLE001 - a malformed record is skipped, as the instances do
            continue
    # the most recent publisher's topology wins (a rolling upgrade may have changed it)
    stores: dict[str, StoreInfo] = {}
    for info in sorted(instances.values(), key=lambda i: i.heartbeat_ms):
        if info.store_catalog:
            stores = {s.store: s for s in info.store_catalog}
    if not stores and instances:
        raise SnapshotError(f"the instances of {application_id!r} publish no store catalog (an iqmesh older than "
                            f"the snapshot job); restart them with this version")
    if not instances:
        raise SnapshotError(f"application {application_id!r} has published no instance metadata yet")
    return Catalog(application_id, stores, instances)


def _read_latest(bootstrap: str, application_id: str, extra: dict[str, str], timeout: float) -> dict[str, bytes]:
    """Latest value per instance id, read to the end offset seen at the start (removed ones left out)."""
    latest: dict[str, bytes] = {}

    def keep(instance_id: str, value: bytes | None) -> None:
        if value is None:
            latest.pop(instance_id, None)
        else:
            latest[instance_id] = value

    follower = InstancesFollower(kafka_config(bootstrap, extra, {
        "group.id": f"iqmesh-snapshot-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "enable.partition.eof": True, "auto.offset.reset": "earliest"}), application_id, keep)
    topic = follower.topic
    try:
        follower.read_to_end(timeout)
    except TimeoutError as e:
        raise SnapshotError(f"reading {topic} {e}") from None
    except KafkaException as e:
        detail = e.args[0].str() if e.args and isinstance(e.args[0], KafkaError) else str(e)
        raise SnapshotError(f"reading {topic} failed: {detail}") from None
    finally:
        follower.close()
    return latest
