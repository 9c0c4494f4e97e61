"""What ``iqmesh run`` makes of a command line, without running it: the settings as cmd_run builds
them (iqmesh/options.py: the properties file, then --config, then the flags, then application.server
from --advertised-host/--grpc-port). Imports only the iqmesh distribution, so it also runs as a
script in a venv holding just the wheel:

    python tests/k8s/run_config.py run examples.wordcount --config-file ... -> JSON on stdout
"""

from __future__ import annotations

import argparse
import json
import sys

from instance.app_loader import load_topology
from instance.config import StreamsConfig
from iqmesh import run
from iqmesh.main import parser
from iqmesh.options import build_properties


def run_config(argv: list[str]) -> tuple[argparse.Namespace, StreamsConfig]:
    args = parser().parse_args(argv)
    if args.func is not run.cmd_run:
        raise SystemExit(f"not an `iqmesh run` command line: {argv}")
    props = build_properties(args, {
        "application.id": args.application_id, "client.id": args.instance_id,
        "bootstrap.servers": args.bootstrap, "state.dir": args.state_dir,
    })
    if args.grpc_port is not None and "application.server" not in props:
        props["application.server"] = f"{args.advertised_host}:{args.grpc_port}"
    return args, StreamsConfig.from_properties(props)


if __name__ == "__main__":
    a, config = run_config(sys.argv[1:])
    load_topology(a.app)  # the application the pod names is importable
    out = {k: v for k, v in config.to_properties().items() if k != "iqmesh.auth.token"}
    print(json.dumps({"config": out, "instance_id": config.instance_id, "listen_host": config.listen_host,
                      "instance_module": run.__file__}))
