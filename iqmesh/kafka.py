"""The Kafka commands a Kafka Streams user reaches for first, on any Kafka-protocol broker (the dev
broker or Apache Kafka, through confluent-kafka's AdminClient, Producer and Consumer):

``iqmesh topic create/list``, ``iqmesh produce`` (lines from stdin or a file, optionally
``key<SEP>value``) and ``iqmesh consume`` (records as JSON lines, decoded with the serdes the
application wrote them with). Output and errors follow the other commands: JSON on stdout, one
error line and exit status 2 (:class:`KafkaCommandError` carries the CODE).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from iqmesh.options import CommandFactory, build_properties
from kernel.kafka_clients import ClientKind, client_config, is_client_setting, produce_when_room
from kernel.serdes import Serde, serde_by_name

#: serdes the commands take by name (Kafka's StringSerde, LongSerde, IntegerSerde, our JsonSerde,
#: raw bytes printed as base64)
SERDES = ("string", "long", "int", "json", "bytes")
#: seconds a broker has to answer an admin request
ADMIN_TIMEOUT_S = 10.0


class KafkaCommandError(Exception):
    """A failure of a Kafka command: ``code`` is the CODE of the error line (a Kafka error name
    such as TOPIC_ALREADY_EXISTS, or INVALID_INPUT / DESERIALIZATION_ERROR / UNKNOWN_TOPIC)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# -- the clients ---------------------------------------------------------------------------------
def kafka_settings(args: argparse.Namespace, kind: ClientKind, **ours: Any) -> dict[str, Any]:
    """The configuration of one client of a command: its Kafka client settings from
    ``--config-file`` and ``--config`` (``--client-config`` for ``topic create``), with Kafka
    Streams' prefixes, as an instance's own clients get them; other settings of the file (an
    application's ``application.id``...) are not the command's and are left out."""
    props = build_properties(args, {})
    extra = {k: str(v) for k, v in props.items() if is_client_setting(k)}
    return client_config(args.bootstrap, extra, kind, **ours)


def _admin(args: argparse.Namespace) -> Any:
    """An admin client that reached the brokers: a broker that does not answer is
    BrokerUnreachableException, one refusing the credentials or the certificate a ConfigException
    naming the settings to check (instance/runtime/reachability.py)."""
    from instance.runtime.reachability import reached_admin

    return reached_admin(kafka_settings(args, "admin"), args.bootstrap)


# -- topics --------------------------------------------------------------------------------------
def cmd_topic(args: argparse.Namespace) -> int:
    admin = _admin(args)
    if args.action == "list":
        for name, partitions in list_topics(admin, args.all):
            print(json.dumps({"topic": name, "partitions": partitions}), flush=True)
        return 0
    created = create_topic(admin, args.name, args.partitions, args.replication_factor,
                           _topic_configs(args.topic_config), args.if_not_exists)
    print(json.dumps({"topic": args.name, "partitions": _partitions(admin, args.name), "created": created}),
          flush=True)
    return 0


def list_topics(admin: Any, internal: bool = False) -> list[tuple[str, int]]:
    """(name, partition count) of every topic, sorted; Kafka's internal ``__`` topics with ``internal``."""
    topics = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
    return sorted((name, len(t.partitions)) for name, t in topics.items() if internal or not name.startswith("__"))


def create_topic(admin: Any, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                 if_not_exists: bool) -> bool:
    """Create ``name``; False when it exists already and ``if_not_exists`` (else TOPIC_ALREADY_EXISTS).
    -1 partitions or replication factor: the broker's default (KIP-464)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    from instance.kafka_errors import error_name, is_topic_exists, kafka_error

    if not name or partitions == 0 or partitions < -1 or replication_factor == 0 or replication_factor < -1:
        raise KafkaCommandError("INVALID_INPUT", "a topic needs a name, --partitions >= 1 and "
                                "--replication-factor >= 1 (or -1: the broker's default)")
    future = admin.create_topics([NewTopic(name, partitions, replication_factor, config=configs)],
                                 request_timeout=ADMIN_TIMEOUT_S)[name]
    try:
        future.result()
    except KafkaException as e:
        err = kafka_error(e)
        if is_topic_exists(e) and if_not_exists:
            return False
        message = err.str() if err is not None else str(e)
        if is_topic_exists(e):
            message += " (--if-not-exists makes that no error)"
        raise KafkaCommandError(error_name(e), message) from None
    _wait_for_topic(admin, name)
    return True


def _wait_for_topic(admin: Any, name: str) -> None:
    """Until the topic's metadata has its leaders (a produce right after must find it)."""
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while time.monotonic() < deadline:
        t = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics.get(name)
        if t is not None and t.error is None and t.partitions and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise KafkaCommandError("TOPIC_NOT_READY", f"topic {name!r} was created but has no leaders after "
                            f"{ADMIN_TIMEOUT_S:.0f}s")


def _partitions(admin: Any, name: str) -> int:
    """0 when there is no such topic. Asks for every topic: a request naming one may create it on
    a broker with auto.create.topics.enable (as the dev broker has)."""
    t = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics.get(name)
    return len(t.partitions) if t is not None else 0


def _topic_configs(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise KafkaCommandError("INVALID_INPUT", f"--config expects NAME=VALUE, got {item[:64]!r}")
        out[name.strip()] = value.strip()
    return out


def _known_topic(admin: Any, topic: str) -> int:
    """The partition count of ``topic``; UNKNOWN_TOPIC (naming how to create it) when there is none."""
    n = _partitions(admin, topic)
    if n == 0:
        raise KafkaCommandError("UNKNOWN_TOPIC", f"topic {topic[:64]!r} does not exist: create it with "
                                f"`iqmesh topic create {topic[:64]} --bootstrap ...` (`iqmesh topic list` lists them)")
    return n


# -- produce -------------------------------------------------------------------------------------
def parse_line(line: str, number: int, separator: str | None, key_serde: Serde,
               value_serde: Serde) -> tuple[bytes | None, bytes | None]:
    """The record of one input line: ``key<separator>value`` (split at the first separator), or
    the whole line as the value with a null key when no separator is given."""
    if separator is None:
        key_text, value_text = None, line
    else:
        key_text, sep, value_text = line.partition(separator)
        if not sep:
            raise KafkaCommandError("INVALID_INPUT", f"line {number} has no key separator {separator!r}: "
                                    f"{line[:64]!r}")
    key = None if key_text is None else _serialize(key_serde, key_text, number, "key")
    return key, _serialize(value_serde, value_text, number, "value")


def _serialize(serde: Serde, text: str, number: int, what: str) -> bytes | None:
    try:
        return serde.serialize(serde.parse(text))
    except (ValueError, TypeError, OverflowError) as e:
        raise KafkaCommandError("INVALID_INPUT", f"line {number}: {what} {text[:64]!r} is not a {serde.name} "
                                f"({e})") from None


def read_lines(stream: IO[str]) -> Iterator[tuple[int, str]]:
    """(line number, text without its line end) of every line that is not blank."""
    for number, raw in enumerate(stream, 1):
        line = raw.rstrip("\r\n")
        if line.strip():
            yield number, line


@contextmanager
def _input(path: str | None) -> Iterator[IO[str]]:
    if path is None or path == "-":
        yield sys.stdin
    else:
        with open(path, encoding="utf-8") as f:
            yield f


def cmd_produce(args: argparse.Namespace) -> int:
    key_serde, value_serde = _serde(args.key_serializer), _serde(args.value_serializer)
    if args.key_separator == "":
        raise KafkaCommandError("INVALID_INPUT", "--key-separator must not be empty")
    if args.file is not None and args.file != "-" and not Path(args.file).is_file():
        raise KafkaCommandError("INVALID_INPUT", f"--file {args.file[:64]!r} is not a readable file")
    admin = _admin(args)
    _known_topic(admin, args.topic)
    # keys go to partitions as Java clients send them (murmur2), so keyed input co-partitions
    settings = kafka_settings(args, "producer", **{"linger.ms": 5, "partitioner": "murmur2_random", "acks": "all"})
    with _input(args.file) as stream:
        records = (parse_line(line, n, args.key_separator, key_serde, value_serde) for n, line in read_lines(stream))
        sent = produce(settings, args.topic, records)
    print(json.dumps({"topic": args.topic, "records": sent}), flush=True)
    return 0


def produce(settings: dict[str, Any], topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> int:
    """Send ``records`` (key, value) with a producer of ``settings`` and wait until the broker
    acknowledged each; the number sent."""
    from confluent_kafka import Producer

    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    p = Producer(settings)
    n = 0
    for key, value in records:
        produce_when_room(p, topic, value, key, on_delivery=delivered)
        n += 1
        p.poll(0)
    if p.flush(60) or failures:
        raise KafkaCommandError("PRODUCE_FAILED", f"{len(failures) or 'some'} of {n} records were not acknowledged"
                                + (f": {failures[0]}" if failures else ""))
    return n


# -- consume -------------------------------------------------------------------------------------
def cmd_consume(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

    key_serde, value_serde = _serde(args.key_deserializer), _serde(args.value_deserializer)
    if args.max_messages is not None and args.max_messages < 1:
        raise KafkaCommandError("INVALID_INPUT", "--max-messages must be at least 1")
    if args.timeout is not None and args.timeout <= 0:
        raise KafkaCommandError("INVALID_INPUT", "--timeout must be more than 0 seconds")
    admin = _admin(args)
    partitions = _known_topic(admin, args.topic)
    # no group: this reads every partition itself and commits nothing (the console consumer's way)
    consumer = Consumer(kafka_settings(args, "main.consumer", **{
        "group.id": f"iqmesh-consume-{uuid.uuid4().hex}", "enable.auto.commit": False,
        "isolation.level": "read_committed"}))
    start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    consumer.assign([TopicPartition(args.topic, p, start) for p in range(partitions)])
    printed = 0
    idle_since = time.monotonic()
    try:
        while args.max_messages is None or printed < args.max_messages:
            msgs = consumer.consume(num_messages=100, timeout=0.5)
            if not msgs:
                if args.timeout is not None and time.monotonic() - idle_since >= args.timeout:
                    break
                continue
            idle_since = time.monotonic()
            for m in msgs:
                if m.error() is not None:
                    continue  # transient: the consumer retries
                print(json.dumps(record_json(m, key_serde, value_serde)), flush=True)
                printed += 1
                if args.max_messages is not None and printed >= args.max_messages:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    return 0


def record_json(m: Any, key_serde: Serde, value_serde: Serde) -> dict[str, Any]:
    """A consumed record as JSON data: key and value decoded (bytes as base64), where it was."""
    return {"key": _decoded(key_serde, m.key(), m, "key"), "value": _decoded(value_serde, m.value(), m, "value"),
            "partition": m.partition(), "offset": m.offset(), "timestamp_ms": m.timestamp()[1]}


def _decoded(serde: Serde, data: bytes | None, m: Any, what: str) -> Any:
    from kernel.serdes import value_to_json

    try:
        value = serde.deserialize(data)
    except (ValueError, UnicodeDecodeError) as e:
        flag = "--key-deserializer" if what == "key" else "--value-deserializer"
        raise KafkaCommandError("DESERIALIZATION_ERROR", f"the {what} at partition {m.partition()} offset "
                                f"{m.offset()} is not a {serde.name} ({e}): choose {flag} "
                                f"({', '.join(SERDES)})") from None
    return None if value is None else json.loads(value_to_json(value))


def _serde(name: str) -> Serde:
    try:
        return serde_by_name(name)
    except ValueError as e:
        raise KafkaCommandError("INVALID_INPUT", str(e)) from None


# -- the command line ----------------------------------------------------------------------------
def add_parsers(command: CommandFactory, formatter: type[argparse.HelpFormatter]) -> None:
    """``topic``, ``produce`` and ``consume`` on the ``iqmesh`` parser (``command`` adds one)."""
    p = command("topic", "create or list topics on the Kafka brokers")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser("create", help="create a topic", description="create a topic", formatter_class=formatter)
    a.add_argument("name", help="the topic's name")
    a.add_argument("--partitions", type=int, default=-1, help="partitions (-1: the broker's num.partitions)")
    a.add_argument("--replication-factor", type=int, default=-1,
                   help="replicas of each partition (-1: the broker's default.replication.factor)")
    a.add_argument("--config", dest="topic_config", action="append", default=[], metavar="NAME=VALUE",
                   help="a topic setting, e.g. cleanup.policy=compact (repeatable)")
    a.add_argument("--if-not-exists", action="store_true", help="a topic that exists already is no error")
    _bootstrap(a, "--client-config")
    a.set_defaults(func=cmd_topic)
    a = actions.add_parser("list", help="list topics: one JSON line each", description="list topics: one JSON "
                           "line each (name and partitions)", formatter_class=formatter)
    a.add_argument("--all", action="store_true", help="also Kafka's internal topics (__consumer_offsets...)")
    _bootstrap(a)
    a.set_defaults(func=cmd_topic)

    p = command("produce", "send records to a topic: one per line of stdin or --file (blank lines skipped), "
                "the whole line the value, or key and value split at --key-separator")
    p.add_argument("--topic", required=True, help="the topic to write to (it must exist)")
    p.add_argument("--file", help="read this file (default: stdin)")
    p.add_argument("--key-separator", help="split each line at the first SEP into key and value "
                   "(default: none; the key is null)", metavar="SEP")
    p.add_argument("--key-serializer", default="string", choices=SERDES, help="how keys are written")
    p.add_argument("--value-serializer", default="string", choices=SERDES, help="how values are written")
    _bootstrap(p)
    p.set_defaults(func=cmd_produce)

    p = command("consume", "print the records of a topic as JSON lines (key, value, partition, offset, "
                "timestamp_ms), decoded with the application's serdes")
    p.add_argument("--topic", required=True, help="the topic to read (e.g. an application's output topic)")
    p.add_argument("--from-beginning", action="store_true",
                   help="from the oldest record (default: only records written from now on)")
    p.add_argument("--max-messages", type=int, help="stop after this many records (default: no limit)")
    p.add_argument("--timeout", type=float, help="stop when no record came for this many seconds "
                   "(default: wait for ever; Ctrl-C stops)")
    p.add_argument("--key-deserializer", default="string", choices=SERDES, help="how keys are read")
    p.add_argument("--value-deserializer", default="string", choices=SERDES,
                   help="how values are read (a word count's output: long)")
    _bootstrap(p)
    p.set_defaults(func=cmd_consume)


def _bootstrap(p: argparse.ArgumentParser, config_flag: str = "--config") -> None:
    """``--bootstrap`` and the client settings: ``config_flag`` NAME=VALUE and ``--config-file``
    (``topic create``'s ``--config`` is a topic setting, as in kafka-topics)."""
    p.add_argument("--bootstrap", required=True, help="bootstrap.servers, HOST:PORT of the Kafka brokers")
    p.add_argument(config_flag, dest="config", action="append", default=[], metavar="NAME=VALUE",
                   help="a Kafka client setting, e.g. security.protocol=SASL_SSL (repeatable)")
    p.add_argument("--config-file", help="a .properties file of Kafka client settings, e.g. the "
                   "client.properties of `iqmesh broker start --sasl-ssl` (--config wins; default: none)")
