"""The query commands: ``iqmesh get``, ``range``, ``prefix``, ``all``, ``watch`` and ``metadata``,
through any instance (the client routes), results as JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from instance.errors import ConfigException
from iqmesh.options import CommandFactory, add_config_args, client_security


def cmd_get(args: argparse.Namespace) -> int:
    from router.client.sync_client import QueryClient

    if args.wait < 0:
        raise ConfigException(f"--wait must be 0 or more seconds, got {args.wait}")
    opts = {"allow_stale": args.allow_stale, "max_lag": args.max_lag, "position": args.position or ""}
    windowed = args.window_from is not None or args.window_to is not None
    with QueryClient(args.target, timeout=args.timeout, security=client_security(args)) as client:
        if windowed or args.sessions:
            w = (client.session_fetch(args.store, args.key, **opts) if args.sessions else
                 client.window_fetch(args.store, args.key, args.window_from or 0,
                                     2**63 - 1 if args.window_to is None else args.window_to, **opts))
            print(json.dumps({"store": args.store, "key": args.key, "metadata": w.metadata,
                              "windows": [{"start": s, "end": e, "value": v} for s, e, v in w.windows]}),
                  flush=True)
            return 0
        r = _get_waiting(client, args, opts) if args.wait else client.get(args.store, args.key, **opts)
    print(json.dumps({"store": args.store, "key": args.key, "found": r.found, "value": r.json_value,
                      "metadata": r.metadata}), flush=True)
    return 0


def _get_waiting(client: Any, args: argparse.Namespace, opts: dict[str, Any]) -> Any:
    """``--wait``: ask again while no instance answers yet or the key is not there yet (a cluster
    starting, input not processed yet), until the key is found or the wait is over."""
    import time

    import grpc

    from router.client.client_core import is_retryable

    deadline = time.monotonic() + args.wait
    while True:
        left = deadline - time.monotonic()
        try:
            r = client.get(args.store, args.key, timeout=max(0.1, min(args.timeout, left)), **opts)
            if r.found or left <= 0:
                return r
        except grpc.RpcError as e:
            if not is_retryable(e) or left <= 0:
                raise
        time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))


def cmd_scan(args: argparse.Namespace) -> int:
    """One JSON line per entry (key, value, partition), then one summary line: whether every
    partition answered, each partition's read metadata or reason."""
    from router.client.sync_client import QueryClient

    opts = {"page_size": args.page_size, "limit": args.limit, "allow_stale": args.allow_stale,
            "max_lag": args.max_lag, "position": args.position or "", "require_complete": args.require_complete,
            "with_json": True}
    with QueryClient(args.target, timeout=args.timeout, security=client_security(args)) as client:
        if args.command == "range":
            scan = client.range(args.store, args.from_key, args.to_key, **opts)
        elif args.command == "prefix":
            scan = client.prefix_scan(args.store, args.prefix, **opts)
        else:
            scan = client.all(args.store, **opts)
        for item in scan:
            print(json.dumps({"key": json.loads(item.key_json), "value": json.loads(item.value_json),
                              "partition": item.partition}), flush=True)
    print(json.dumps({"store": args.store, "complete": scan.complete, "missing": scan.missing,
                      "partitions": [scan.partitions[p] for p in sorted(scan.partitions)]}), flush=True)
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    """One JSON line per committed change (or routing event) as it happens, until --limit changes
    or --duration seconds; then one line with the token that resumes after the last change."""
    import dataclasses

    from router.client.sync_client import QueryClient
    from router.client.watch_client import Change

    changes = 0
    with QueryClient(args.target, timeout=args.timeout, security=client_security(args)) as client:
        watch = client.watch(args.store, args.key, prefix=args.prefix, all_keys=args.all,
                             resume_token=args.resume or "", from_beginning=args.from_beginning, with_json=True,
                             timeout=args.duration)
        try:
            for item in watch:
                if isinstance(item, Change):
                    changes += 1
                    print(json.dumps({"key": json.loads(item.key_json), "value": json.loads(item.value_json),
                                      "deleted": item.deleted, "partition": item.partition, "offset": item.offset,
                                      "timestamp_ms": item.timestamp_ms, "resume_token": item.resume_token}),
                          flush=True)
                    if args.limit is not None and changes >= args.limit:
                        break
                else:
                    print(json.dumps({"routing": dataclasses.asdict(item)}), flush=True)
        except KeyboardInterrupt:
            pass
        finally:
            watch.close()
    print(json.dumps({"end": {"changes": changes, "resume_token": watch.resume_token, "served_by": watch.served_by}}),
          flush=True)
    return 0


def cmd_metadata(args: argparse.Namespace) -> int:
    from router.client.sync_client import QueryClient, routing_table_to_dict

    with QueryClient(args.target, timeout=args.timeout, security=client_security(args)) as client:
        reply = client.metadata()
    print(json.dumps(routing_table_to_dict(reply), indent=2), flush=True)
    return 0


def _query_args(p: argparse.ArgumentParser, timeout_help: str) -> None:
    """--target, --store and the read options every query command takes."""
    p.add_argument("--target", required=True, help="HOST:PORT of any instance (its gRPC port)")
    p.add_argument("--store", required=True, help="name of the state store, e.g. counts")
    p.add_argument("--allow-stale", action="store_true",
                   help="a standby or restoring replica may answer (default: only an up-to-date active)")
    p.add_argument("--max-lag", type=int, default=-1,
                   help="with --allow-stale: the most changelog records a replica may be behind (-1: any)")
    p.add_argument("--position", help="position_token of an earlier reply: never answer from older state "
                   "(default: no bound)")
    p.add_argument("--timeout", type=float, default=10.0, help=timeout_help)
    add_config_args(p)


def add_parsers(command: CommandFactory) -> None:
    p = command("get", "query one key through any instance; one JSON object")
    _query_args(p, "seconds to wait for the answer")
    p.add_argument("--key", required=True, help="the key as text, parsed with the store's key serde")
    p.add_argument("--window-from", type=int, help="window store: the windows starting at or after (ms)")
    p.add_argument("--window-to", type=int, help="window store: the windows starting at or before (ms)")
    p.add_argument("--sessions", action="store_true", help="session store: the key's sessions")
    p.add_argument("--wait", type=float, default=0.0, help="keep asking for up to this many seconds while no "
                   "instance answers yet or the key is not found yet (a cluster starting, input not processed "
                   "yet); 0: ask once")
    p.set_defaults(func=cmd_get)

    for name, what in (("range", "entries from --from to --to (inclusive, by serialized key)"),
                       ("prefix", "entries whose key starts with --prefix"), ("all", "every entry of a store")):
        p = command(name, f"{what}, across every partition; JSON lines")
        _query_args(p, "seconds per page")
        if name == "range":
            p.add_argument("--from", dest="from_key", help="first key (default: unbounded)")
            p.add_argument("--to", dest="to_key", help="last key (default: unbounded)")
        if name == "prefix":
            p.add_argument("--prefix", required=True, help="the key prefix, as text")
        p.add_argument("--limit", type=int, help="entries in all (default: every one)")
        p.add_argument("--page-size", type=int, default=0, help="entries per call (default: 0, the server's)")
        p.add_argument("--require-complete", action="store_true",
                       help="fail rather than leave out partitions that cannot answer (default: leave out, "
                       "and say which)")
        p.set_defaults(func=cmd_scan)

    p = command("watch", "committed changes of a key, a prefix or a whole store as they happen, through any "
                "instance (rebalances included); JSON lines, then one line with the token that resumes")
    p.add_argument("--target", required=True, help="HOST:PORT of any instance (its gRPC port)")
    p.add_argument("--store", required=True, help="name of the state store, e.g. counts")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--key", help="watch this key (text, parsed with the store's key serde)")
    target.add_argument("--prefix", help="watch the keys starting with this prefix (text)")
    target.add_argument("--all", action="store_true", help="watch every key")
    p.add_argument("--resume", help="resume_token of an earlier line: go on right after it (default: from now)")
    p.add_argument("--from-beginning", action="store_true",
                   help="without --resume: first every change the changelog still holds")
    p.add_argument("--limit", type=int, help="stop after this many changes (default: no limit)")
    p.add_argument("--duration", type=float, help="stop after this many seconds (default: run until Ctrl-C)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds to find an instance that starts the watch (and per call while finding one)")
    add_config_args(p)
    p.set_defaults(func=cmd_watch)

    p = command("metadata", "print the routing table as JSON: instances, their tasks and store positions")
    p.add_argument("--target", required=True, help="HOST:PORT of any instance (its gRPC port)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the answer")
    add_config_args(p)
    p.set_defaults(func=cmd_metadata)
