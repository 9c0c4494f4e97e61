"""What a snapshot run is asked to do: the flags (shared by ``iqmesh snapshot`` and the spark-submit
entry point, so both accept exactly the same), and the one error type shown to users. The instances
source dials the mesh with the client settings of the CLI's client commands (``--config``,
``--config-file``: ``iqmesh.tls.ca.file``, ``iqmesh.auth.token``), read here because the job under
spark-submit must not import the CLI."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from instance import config_providers
from instance.errors import ConfigException
from instance.properties_file import load_properties_file
from instance.serde.settings import is_serde_setting
from kernel.security import AUTH_TOKEN, NO_SECURITY, TLS_CA_FILE, Security

SOURCES = ("changelog", "instances")
#: offsets per Spark task before a changelog partition is split into ranges
DEFAULT_SPLIT_OFFSETS = 1_000_000


class SnapshotError(Exception):
    """A problem the user can act on (no such broker, application or store, a bad --at, ...):
    printed as one line, without a traceback."""


@dataclass(frozen=True)
class SnapshotOptions:
    bootstrap: str
    application_id: str
    out: str
    stores: tuple[str, ...] = ()
    source: str = "changelog"
    #: cut tokens, manifest paths or position tokens (see :mod:`analytics.snapshot.cut`)
    at: tuple[str, ...] = ()
    #: None: a full snapshot; "": merge onto the snapshot at ``out``; else onto the one at that path
    incremental: str | None = None
    master: str | None = None
    split_offsets: int = DEFAULT_SPLIT_OFFSETS
    #: extra librdkafka settings for every client (security.protocol, sasl.*, ...)
    kafka_config: dict[str, str] = field(default_factory=dict)
    #: seconds to wait for the last stable offset to reach a cut given with --at
    wait_stable_s: float = 60.0
    #: instances source: read standbys too (their lag is in the manifest)
    allow_stale: bool = False
    #: seconds per call (broker metadata, one page of a mesh scan)
    timeout_s: float = 30.0
    #: instances source: TLS and the bearer token the instances are dialled with
    security: Security = NO_SECURITY
    #: the Schema Registry settings Avro values are decoded with (``--config schema.registry.url=``)
    registry: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise SnapshotError(f"--source must be one of {', '.join(SOURCES)}, not {self.source!r}")
        if self.split_offsets < 1:
            raise SnapshotError("--split-offsets must be at least 1")
        if self.incremental is not None and self.source != "changelog":
            raise SnapshotError("--incremental needs --source changelog (the mesh has no history to read from)")
        for what, v in (("--bootstrap", self.bootstrap), ("--application-id", self.application_id),
                        ("--out", self.out)):
            if not v:
                raise SnapshotError(f"{what} must not be empty")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", required=True, help="bootstrap.servers of the application's cluster")
    p.add_argument("--application-id", required=True, help="the application whose stores to snapshot")
    p.add_argument("--out", required=True, help="directory (any Hadoop path: file:, hdfs:, s3a:...) to write; "
                   "an earlier snapshot there is replaced when the new one is complete")
    p.add_argument("--stores", help="comma-separated store names (default: every store)")
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--source", choices=SOURCES, default="changelog",
                   help="changelog (default): read the changelog topics, no load on the instances; "
                        "instances: scan the live stores through the mesh")
    p.add_argument("--at", action="append", default=[], metavar="CUT",
                   help="stand at this cut instead of the current end offsets: the cut token an earlier run "
                        "printed, a snapshot directory or manifest.json, or position tokens from query replies "
                        "(comma-separated; repeatable)")
    p.add_argument("--incremental", nargs="?", const="", default=None, metavar="BASE",
                   help="read only the changelog after the cut of the snapshot at BASE (default: at --out) and "
                        "merge onto it")
    p.add_argument("--split-offsets", type=int, default=DEFAULT_SPLIT_OFFSETS,
                   help="changelog offsets per Spark task; larger partitions are read as several ranges")
    p.add_argument("--kafka-config", action="append", default=[], metavar="NAME=VALUE",
                   help="a Kafka client setting, with Kafka Streams' prefixes (restore.consumer. for the readers, "
                        "admin.; unprefixed: every client; repeatable)")
    p.add_argument("--wait-stable", type=float, default=60.0,
                   help="seconds to wait for open transactions below a cut given with --at")
    p.add_argument("--allow-stale", action="store_true", help="instances source: standbys may answer")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per broker call or mesh page")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help=f"a client setting: {TLS_CA_FILE} or {AUTH_TOKEN} (instances source), or "
                   "schema.registry.url and its friends (Avro values decoded); others are ignored; "
                   "repeatable, as for the client commands")
    p.add_argument("--config-file", help="a .properties file of client settings (--config wins; default: none)")


def _settings(flag: str, items: list[str], file: str | None = None) -> dict[str, str]:
    """``NAME=VALUE`` items over the properties ``file``, with secrets from files or the environment
    (``config.providers=...``) resolved."""
    props: dict[str, str] = {}
    try:
        if file:
            props.update(load_properties_file(file))
        for item in items:
            name, eq, value = item.partition("=")
            if not eq or not name.strip():
                raise SnapshotError(f"{flag} expects NAME=VALUE, got {item!r}")
            props[name.strip()] = value.strip()
        return config_providers.resolve(props)
    except ConfigException as e:
        raise SnapshotError(str(e)) from None
    except OSError as e:
        raise SnapshotError(f"--config-file: cannot read {file!r} ({e.strerror or e})") from None


def client_security(config: list[str], config_file: str | None) -> Security:
    """The TLS CA and bearer token of ``--config-file`` then ``--config`` (a bad one: SnapshotError)."""
    try:
        return Security.from_properties(_settings("--config", config, config_file))
    except ValueError as e:
        raise SnapshotError(str(e)) from None


def options_from_args(args: argparse.Namespace) -> SnapshotOptions:
    kafka = _settings("--kafka-config", args.kafka_config)
    serdes = _settings("--config", args.config, args.config_file)
    return SnapshotOptions(
        bootstrap=args.bootstrap, application_id=args.application_id, out=args.out,
        stores=tuple(s.strip() for s in (args.stores or "").split(",") if s.strip()),
        source=args.source, at=tuple(t.strip() for a in args.at for t in a.split(",") if t.strip()),
        incremental=args.incremental, master=args.master, split_offsets=args.split_offsets,
        kafka_config=kafka, wait_stable_s=args.wait_stable, allow_stale=args.allow_stale,
        timeout_s=args.timeout, security=client_security(args.config, args.config_file),
        registry=tuple(sorted((k, v) for k, v in serdes.items() if is_serde_setting(k))))
