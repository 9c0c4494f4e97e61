"""``iqmesh reset``: Kafka's ``kafka-streams-application-reset`` (its flags and semantics) plus the
local state directories (Kafka Streams' ``cleanUp()``). The flags and the output are here; what a
reset does is instance/reset/.

Output: one JSON object (what was done, or with ``--dry-run`` what would be); a refusal or a failed
step is the one error line, exit status 2, saying what was done before it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from instance.errors import ConfigException
from iqmesh.options import CommandFactory

if TYPE_CHECKING:
    from instance.reset.positions import ResetPosition
    from instance.reset.resetter import OffsetMove, ResetPlan, ResetRequest


def topic_list(values: list[str]) -> list[str]:
    """Topics from repeated, comma-separated flag values, in order, each once."""
    out: list[str] = []
    for value in values:
        out += [t.strip() for t in value.split(",") if t.strip() and t.strip() not in out]
    return out


def position_of(args: argparse.Namespace) -> ResetPosition:
    """The input topics' position rule (instance/reset/positions.py) the flags chose."""
    from instance.reset.positions import ResetPosition, parse_datetime, parse_duration, parse_reset_plan

    if args.to_offset is not None:
        return ResetPosition("offset", args.to_offset, label=f"to-offset {args.to_offset}")
    if args.shift_by is not None:
        return ResetPosition("shift", args.shift_by, label=f"shift-by {args.shift_by}")
    if args.to_datetime is not None:
        return ResetPosition("time", parse_datetime(args.to_datetime), label=f"to-datetime {args.to_datetime}")
    if args.by_duration is not None:
        back = parse_duration(args.by_duration)
        return ResetPosition("time", int(time.time() * 1000) - back, label=f"by-duration {args.by_duration}")
    if args.from_file is not None:
        try:
            text = Path(args.from_file).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigException(f"--from-file {args.from_file[:64]!r} cannot be read: {e.strerror}") from None
        return ResetPosition("file", plan=parse_reset_plan(text), label="from-file")
    if args.to_latest:
        return ResetPosition("latest", label="to-latest")
    return ResetPosition("earliest", label="to-earliest")


def cmd_reset(args: argparse.Namespace) -> int:
    from instance.reset import resetter
    from instance.reset.errors import ResetError
    from instance.runtime.reachability import reached_admin
    from iqmesh.kafka import KafkaCommandError, kafka_settings

    if not args.application_id.strip():
        raise ConfigException("--application-id must not be empty")
    settings = kafka_settings(args, "admin")
    request = resetter.ResetRequest(
        application_id=args.application_id, bootstrap=args.bootstrap, client_config=settings,
        input_topics=topic_list(args.input_topics), intermediate_topics=topic_list(args.intermediate_topics),
        internal_topics=topic_list(args.internal_topics), position=position_of(args),
        state_dirs=[Path(d) for d in args.state_dir], force=args.force)
    admin = reached_admin(settings, args.bootstrap)
    try:
        planned = resetter.plan(admin, request)
        if not args.dry_run:
            resetter.apply(admin, request, planned)
    except ResetError as e:
        raise KafkaCommandError(e.code, str(e)) from None
    print(json.dumps(report(request, planned, args.dry_run)), flush=True)
    return 0


def report(request: ResetRequest, planned: ResetPlan, dry_run: bool) -> dict[str, Any]:
    """The output: what the reset did (or, in a dry run, would do)."""
    def moves(ms: tuple[OffsetMove, ...]) -> list[dict[str, Any]]:
        return [{"topic": m.topic, "partition": m.partition, "from": m.before, "to": m.after} for m in ms]

    out: dict[str, Any] = {
        "application_id": request.application_id, "dry_run": dry_run,
        "members_removed": [{"member_id": m.member_id, "client_id": m.client_id,
                             "group_instance_id": m.group_instance_id, "host": m.host} for m in planned.members],
        "input_position": request.position.label,
        "input_offsets": moves(planned.input_offsets),
        "intermediate_offsets": moves(planned.intermediate_offsets),
        "internal_offsets": moves(planned.internal_offsets),
        "internal_topics_deleted": list(planned.internal_topics),
        "state_dirs_removed": [{"path": str(d.path), "existed": d.existed} for d in planned.state_dirs],
    }
    if not planned.state_dirs:
        out["note"] = (f"local state untouched: remove <state.dir>/{request.application_id} of every instance "
                       "(or give each --state-dir) before starting them again")
    return out


def add_parser(command: CommandFactory) -> None:
    p = command("reset", "reset an application so that it processes its input again from the start (or another "
                "position), as Kafka's kafka-streams-application-reset: refuses while the group has members "
                "(--force removes them), moves the input topics' committed offsets, moves intermediate topics "
                "to their end, deletes the application's internal topics (repartition, changelog, the instances "
                "topic) and, with --state-dir, the local state (Kafka Streams' cleanUp()). Output topics are "
                "not touched. Try --dry-run first")
    p.add_argument("--application-id", required=True, help="the application's application.id (its group id)")
    p.add_argument("--bootstrap", "--bootstrap-server", dest="bootstrap", required=True,
                   help="bootstrap.servers, HOST:PORT of the Kafka brokers")
    p.add_argument("--input-topics", action="append", default=[], metavar="LIST",
                   help="comma-separated input topics whose committed offsets move to the position below "
                   "(repeatable; default: none)")
    p.add_argument("--intermediate-topics", action="append", default=[], metavar="LIST",
                   help="comma-separated topics the application writes and reads back: their committed offsets "
                   "move to the end (repeatable; default: none)")
    p.add_argument("--internal-topics", action="append", default=[], metavar="LIST",
                   help="comma-separated internal topics to delete, a subset of those a --dry-run lists "
                   "(default: all of them)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--to-earliest", action="store_true",
                       help="input offsets to the earliest offset of each partition (the default)")
    where.add_argument("--to-latest", action="store_true", help="input offsets to the end of each partition")
    where.add_argument("--to-offset", type=int, metavar="OFFSET",
                       help="input offsets to OFFSET (kept within each partition's earliest and latest)")
    where.add_argument("--shift-by", type=int, metavar="N",
                       help="input offsets moved by N from the committed one (negative: back; from the earliest "
                       "where none is committed)")
    where.add_argument("--to-datetime", metavar="DATETIME",
                       help="input offsets to the first record at or after YYYY-MM-DDTHH:mm:SS.sss (UTC unless "
                       "a zone follows: Z, +01:00); the end where there is none")
    where.add_argument("--by-duration", metavar="DURATION",
                       help="input offsets to the first record at or after now minus an ISO 8601 duration "
                       "(PnDTnHnMnS: P1D, PT5H30M)")
    where.add_argument("--from-file", metavar="FILE",
                       help="input offsets from a CSV file of TOPIC,PARTITION,OFFSET lines (partitions it does "
                       "not name keep theirs)")
    p.add_argument("--state-dir", action="append", default=[], metavar="DIR",
                   help="an instance's state.dir, as given to `iqmesh run --state-dir`: its "
                   "DIR/<application-id> is removed (repeatable; default: local state untouched)")
    p.add_argument("--force", action="store_true",
                   help="remove the group's members instead of refusing (members of stopped instances: static "
                   "members wait out session.timeout.ms; stop every instance first)")
    p.add_argument("--dry-run", action="store_true", help="print what would be done and change nothing")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="a Kafka client setting, e.g. security.protocol=SASL_SSL (repeatable)")
    p.add_argument("--config-file", help="a .properties file of Kafka client settings, e.g. the "
                   "client.properties of `iqmesh broker start --sasl-ssl` (--config wins; default: none)")
    p.set_defaults(func=cmd_reset)
