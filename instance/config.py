"""One typed configuration object, keyed by Kafka Streams' own setting names.

``StreamsConfig.from_properties({"application.id": ..., ...})`` validates everything at start-up and
raises :class:`ConfigException` with a message that says what to fix.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instance import config_providers, group_protocol
from instance.errors import ConfigException
from instance.serde.settings import is_serde_setting
from kernel.kafka_clients import ClientKind, ClientSettingsError, client_config, is_client_setting
from kernel.security import AUTH_TOKEN, TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE, Security, is_loopback

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"

_APP_ID = re.compile(r"^[A-Za-z0-9._-]+$")
#: the address the query server binds (default: see StreamsConfig.listen_host)
LISTEN_HOST = "iqmesh.listen.host"
#: the plain-HTTP port of the kubelet's probes (see StreamsConfig.health_port)
HEALTH_PORT = "iqmesh.health.port"


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


@dataclass(frozen=True)
class StreamsConfig:
    """Settings of one instance. Field ``metadata`` holds the Kafka Streams name of each field."""

    application_id: str = field(metadata={"name": "application.id"})
    bootstrap_servers: str = field(metadata={"name": "bootstrap.servers"})
    application_server: str = field(default="", metadata={"name": "application.server"})
    client_id: str = field(default="", metadata={"name": "client.id"})
    group_instance_id: str = field(default="", metadata={"name": "group.instance.id"})
    state_dir: str = field(default="/tmp/iqmesh", metadata={"name": "state.dir"})
    num_stream_threads: int = field(default=1, metadata={"name": "num.stream.threads", "min": 1})
    num_standby_replicas: int = field(default=0, metadata={"name": "num.standby.replicas", "min": 0})
    #: None: Kafka Streams' default for the guarantee (effective_commit_interval_ms)
    commit_interval_ms: int | None = field(default=None, metadata={"name": "commit.interval.ms", "min": 0})
    processing_guarantee: str = field(default=AT_LEAST_ONCE, metadata={"name": "processing.guarantee"})
    statestore_cache_max_bytes: int = field(
        default=10 * 1024 * 1024, metadata={"name": "statestore.cache.max.bytes", "min": 0})
    #: -1: the broker's default.replication.factor
    replication_factor: int = field(default=1, metadata={"name": "replication.factor", "min": -1})
    max_poll_records: int = field(default=2000, metadata={"name": "max.poll.records", "min": 1})
    restore_max_poll_records: int = field(default=10_000, metadata={"name": "restore.consumer.max.poll.records",
                                                                     "min": 1})
    poll_ms: int = field(default=100, metadata={"name": "poll.ms", "min": 1})
    idle_backoff_ms: int = field(default=20, metadata={"name": "iqmesh.idle.backoff.ms", "min": 0})
    session_timeout_ms: int = field(default=10_000, metadata={"name": "session.timeout.ms", "min": 1})
    state_cleanup_delay_ms: int = field(default=600_000, metadata={"name": "state.cleanup.delay.ms", "min": 0})
    max_poll_interval_ms: int = field(default=300_000, metadata={"name": "max.poll.interval.ms", "min": 1})
    heartbeat_interval_ms: int = field(default=1000, metadata={"name": "iqmesh.heartbeat.interval.ms", "min": 1})
    #: how long a commit waits for a broker that does not answer before the thread fails (KIP-572)
    task_timeout_ms: int = field(default=300_000, metadata={"name": "task.timeout.ms", "min": 1})
    #: exception handlers and timestamp extractor: short names, Kafka Streams' class names, or
    #: ``module:attribute`` (instance/topology/handlers.py, timestamps.py)
    default_deserialization_exception_handler: str = field(
        default="log-and-fail", metadata={"name": "default.deserialization.exception.handler"})
    default_production_exception_handler: str = field(
        default="fail", metadata={"name": "default.production.exception.handler"})
    processing_exception_handler: str = field(
        default="log-and-fail", metadata={"name": "processing.exception.handler"})
    errors_dead_letter_queue_topic_name: str = field(
        default="", metadata={"name": "errors.dead.letter.queue.topic.name"})
    default_timestamp_extractor: str = field(
        default="fail-on-invalid-timestamp", metadata={"name": "default.timestamp.extractor"})
    auto_offset_reset: str = field(default="earliest", metadata={"name": "auto.offset.reset"})
    #: KIP-695: a task with several inputs waits for an empty input whose lag is unknown or above
    #: zero (0), also for this long for a caught-up one (> 0), or never (-1)
    max_task_idle_ms: int = field(default=0, metadata={"name": "max.task.idle.ms", "min": -1})
    in_memory_stores: bool = field(default=False, metadata={"name": "iqmesh.in.memory.stores"})
    #: how long ``iqmesh run`` gives its threads, after SIGTERM, to commit and leave before it exits
    #: anyway (Kafka Streams' close(Duration)): below a pod's terminationGracePeriodSeconds, so a
    #: broker that does not answer costs redone work, not a SIGKILL
    shutdown_timeout_ms: int = field(default=60_000, metadata={"name": "iqmesh.shutdown.timeout.ms", "min": 1})
    #: announce membership changes so peers commit first, remove dead members, fence zombie
    #: producers (instance/runtime/membership.py): ``auto`` (on for the dev broker, off for Apache
    #: Kafka, runtime/broker_kind.py), ``true`` or ``false``
    membership_assist: str = field(default="auto", metadata={"name": "iqmesh.membership.assist"})
    #: whether a static member removes itself from the group when it closes
    #: (instance/runtime/departure.py): ``auto`` (when its StatefulSet no longer counts its pod),
    #: ``true`` or ``false``; a dynamic member always leaves
    leave_group_on_close: str = field(default="auto", metadata={"name": "iqmesh.leave.group.on.close"})
    #: the stream threads' group protocol: ``classic``, ``consumer`` (KIP-848) or ``streams`` (KIP-1071, refused
    #: at start-up for now; group_protocol.py, runtime/rebalance_protocol.py)
    group_protocol: str = field(default="classic", metadata={"name": "group.protocol"})
    #: transport security of the query server, the forwarding hop and the gateway (kernel/security.py)
    tls_cert_file: str = field(default="", metadata={"name": TLS_CERT_FILE})
    tls_key_file: str = field(default="", metadata={"name": TLS_KEY_FILE})
    tls_ca_file: str = field(default="", metadata={"name": TLS_CA_FILE})
    auth_token: str = field(default="", repr=False, metadata={"name": AUTH_TOKEN})
    listen_host_setting: str = field(default="", metadata={"name": LISTEN_HOST})
    #: Kafka Streams' metrics settings (instance/runtime/metrics.py): DEBUG adds store latencies
    metrics_recording_level: str = field(default="INFO", metadata={"name": "metrics.recording.level"})
    metrics_sample_window_ms: int = field(default=30_000, metadata={"name": "metrics.sample.window.ms", "min": 1})
    metrics_num_samples: int = field(default=2, metadata={"name": "metrics.num.samples", "min": 2})
    #: the instance's Prometheus ``/metrics`` HTTP port (0: none), on ``listen_host``
    metrics_port: int = field(default=0, metadata={"name": "iqmesh.metrics.port", "min": 0, "max": 65535})
    #: the kubelet's probes over plain HTTP (/startupz, /readyz, /livez; instance/server/health_http.py)
    #: on ``listen_host``, whatever TLS the query port serves (0: none). Off by default: outside
    #: Kubernetes nothing probes it, and several instances on one host would clash on a fixed port
    health_port: int = field(default=0, metadata={"name": HEALTH_PORT, "min": 0, "max": 65535})
    extra: Mapping[str, str] = field(default_factory=dict, metadata={"name": ""})
    #: the serdes' own settings (``schema.registry.url`` ...; instance/serde/settings.py)
    serde_settings: Mapping[str, str] = field(default_factory=dict, metadata={"name": ""})

    def __post_init__(self) -> None:
        problems: list[str] = list(_range_problems(self))
        if not self.application_id or not _APP_ID.match(self.application_id):
            problems.append("application.id must be set to letters, digits, '.', '_' or '-'")
        if not self.bootstrap_servers:
            problems.append("bootstrap.servers must be set, e.g. 127.0.0.1:9092")
        if self.application_server and not _is_endpoint(self.application_server):
            problems.append(f"application.server must be host:port with a port from 1 to 65535, "
                            f"got {self.application_server!r}")
        if self.replication_factor == 0:
            problems.append("replication.factor must be -1 (the broker's default) or at least 1, got 0")
        if self.processing_guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE_V2):
            problems.append(f"processing.guarantee must be {AT_LEAST_ONCE} or {EXACTLY_ONCE_V2}, "
                            f"got {self.processing_guarantee!r}")
        problems.extend(_handler_problems(self))
        problems.extend(_health_port_problems(self))
        if self.membership_assist not in ("auto", "true", "false"):
            problems.append(f"iqmesh.membership.assist must be auto, true or false, got {self.membership_assist!r}")
        if self.leave_group_on_close not in ("auto", "true", "false"):
            problems.append("iqmesh.leave.group.on.close must be auto, true or false, "
                            f"got {self.leave_group_on_close!r}")
        problems.extend(group_protocol.problems(self.group_protocol, self.extra))
        if self.metrics_recording_level.upper() not in ("INFO", "DEBUG", "TRACE"):
            problems.append("metrics.recording.level must be INFO, DEBUG or TRACE, "
                            f"got {self.metrics_recording_level!r}")
        if self.auto_offset_reset not in ("earliest", "latest"):
            problems.append("auto.offset.reset must be earliest or latest")
        try:
            self.security  # noqa: B018 - validates the files and the token
        except ValueError as e:
            problems.append(str(e))
        if problems:
            raise ConfigException("invalid configuration: " + "; ".join(problems))

    @property
    def instance_id(self) -> str:
        """This instance's name in the cluster metadata: ``client.id``, else ``application.server``."""
        return self.client_id or self.application_server or self.application_id

    @property
    def security(self) -> Security:
        return Security(self.tls_cert_file, self.tls_key_file, self.tls_ca_file, self.auth_token)

    @property
    def listen_host(self) -> str:
        """Where the query server binds: ``iqmesh.listen.host`` if set; else loopback when
        application.server names a loopback host (the local default), all interfaces when it
        names another (peers must reach the advertised endpoint, e.g. a StatefulSet pod's DNS
        name; without TLS or a token the server logs a warning then)."""
        if self.listen_host_setting:
            return self.listen_host_setting
        host = self.application_server.rpartition(":")[0]
        return "0.0.0.0" if host and not is_loopback(host) else "127.0.0.1"

    @property
    def eos(self) -> bool:
        return self.processing_guarantee == EXACTLY_ONCE_V2

    @property
    def effective_commit_interval_ms(self) -> int:
        """Kafka Streams' default: 30 s at-least-once, 100 ms under exactly-once."""
        if self.commit_interval_ms is not None:
            return self.commit_interval_ms
        return 100 if self.eos else 30_000

    @property
    def app_state_dir(self) -> Path:
        return Path(self.state_dir) / self.application_id

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> StreamsConfig:
        """Build from Kafka Streams names (``application.id`` ...); unknown names are an error
        unless they start with ``consumer.``/``producer.`` (passed to the clients). Values may
        name secrets held elsewhere (``${dir:/path:key}``, instance/config_providers.py)."""
        props = config_providers.resolve(props)
        kwargs: dict[str, Any] = {}
        extra: dict[str, str] = {}
        serde_settings: dict[str, str] = {}
        unknown: list[str] = []
        for name, raw in props.items():
            f = _FIELDS_BY_NAME.get(name)
            if f is None:
                if is_client_setting(name):
                    extra[name] = str(raw)
                    continue
                if is_serde_setting(name):
                    serde_settings[name] = str(raw)
                    continue
                unknown.append(name)
                continue
            try:
                kwargs[f.name] = _coerce(f, raw)
            except ValueError as e:
                raise ConfigException(f"invalid value for {name}: {e}") from None
        if unknown:
            known = ", ".join(sorted(_FIELDS_BY_NAME))
            raise ConfigException(f"unknown setting(s) {', '.join(sorted(unknown))}; known: {known}")
        for required in ("application_id", "bootstrap_servers"):
            if required not in kwargs:
                raise ConfigException(f"{_NAMES_BY_FIELD[required]} must be set")
        return cls(**kwargs, extra=extra, serde_settings=serde_settings)

    @property
    def serde_properties(self) -> dict[str, str]:
        """What every serde's ``configure`` gets (Kafka Streams gives it the whole configuration):
        the serde settings, and the clients' SASL credentials for a Schema Registry serde with
        ``basic.auth.credentials.source=SASL_INHERIT``."""
        clients = self.client_config("admin")  # sasl.jaas.config read as the clients read it
        sasl: dict[str, str] = {k: str(clients[k]) for k in ("sasl.username", "sasl.password") if k in clients}
        return {**sasl, **self.serde_settings}

    def to_properties(self) -> dict[str, Any]:
        out = {f.metadata["name"]: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.metadata["name"] and getattr(self, f.name) is not None}
        out.update(self.extra)
        out.update(self.serde_settings)
        return out

    def client_config(self, kind: ClientKind, **ours: Any) -> dict[str, Any]:
        """The configuration of one of this instance's Kafka clients (kernel/kafka_clients.py);
        ConfigException for a setting that cannot be used."""
        try:
            return client_config(self.bootstrap_servers, self.extra, kind, **ours)
        except ClientSettingsError as e:
            raise ConfigException(str(e)) from None


def _is_endpoint(text: str) -> bool:
    m = re.match(r"^[^:\s]+:(\d{1,5})$", text)
    return m is not None and 1 <= int(m.group(1)) <= 65535


def _range_problems(config: StreamsConfig) -> list[str]:
    """Every number outside the range its field declares (``min``/``max`` in its metadata)."""
    problems = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        low, high = f.metadata.get("min"), f.metadata.get("max")
        if value is None or (low is None and high is None):
            continue
        if (low is not None and value < low) or (high is not None and value > high):
            want = (f"from {low} to {high}" if low is not None and high is not None
                    else f"at least {low}" if low is not None else f"at most {high}")
            problems.append(f"{f.metadata['name']} must be {want}, got {value}")
    return problems


def _health_port_problems(config: StreamsConfig) -> list[str]:
    """The health port shares ``listen_host`` with the query and metrics ports: it must be its own."""
    if not config.health_port:
        return []
    query = config.application_server.rpartition(":")[2] if _is_endpoint(config.application_server) else ""
    taken = {"application.server's port": int(query) if query else 0, "iqmesh.metrics.port": config.metrics_port}
    return [f"{HEALTH_PORT} must differ from {name}, both are {config.health_port}"
            for name, port in taken.items() if port == config.health_port]


def _handler_problems(config: StreamsConfig) -> list[str]:
    """Load every handler and the extractor now, so a bad name fails at start-up."""
    from instance.topology.handlers import ErrorHandling
    from instance.topology.timestamps import timestamp_extractor
    problems = []
    try:
        ErrorHandling(config.to_properties())
    except ConfigException as e:
        problems.append(str(e))
    try:
        timestamp_extractor(config.default_timestamp_extractor)
    except ValueError as e:
        problems.append(str(e))
    return problems


def _coerce(f: dataclasses.Field[Any], raw: Any) -> Any:
    if f.name in ("membership_assist", "leave_group_on_close"):  # auto, or a boolean in any of its spellings
        text = str(raw).strip().lower()
        return text if text == "auto" else str(_bool(raw)).lower()
    if f.name == "group_protocol":
        return str(raw).strip().lower()
    if f.type in ("int", int, "int | None"):
        return int(raw)
    if f.type in ("bool", bool):
        return _bool(raw)
    return str(raw)


_FIELDS_BY_NAME = {f.metadata["name"]: f for f in dataclasses.fields(StreamsConfig) if f.metadata["name"]}
_NAMES_BY_FIELD = {f.name: f.metadata["name"] for f in dataclasses.fields(StreamsConfig)}
