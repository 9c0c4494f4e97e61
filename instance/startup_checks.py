"""What ``iqmesh run`` checks before the instance joins its group, so that a mistake is one error
line at start rather than a failure after the group rebalanced around the new member."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import grpc

from instance.config import StreamsConfig
from instance.errors import ConfigException


def check_state_dir(state_dir: str | Path, application_id: str) -> None:
    """``state.dir`` must be a directory (created if missing) in which files can be written: the
    application's directory is created there and a probe file written and removed."""
    root = Path(state_dir)
    if root.exists() and not root.is_dir():
        raise ConfigException(f"state.dir {root} is a file, not a directory: give --state-dir a directory")
    app_dir = root / application_id
    probe = app_dir / f".iqmesh-write-check-{uuid.uuid4().hex[:8]}"
    try:
        app_dir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        os.unlink(probe)
    except OSError as e:
        raise ConfigException(f"state.dir {root} cannot be written ({e.strerror or e}: {e.filename or app_dir}): "
                              "give --state-dir a writable directory") from e


def check_advertised_endpoint(config: StreamsConfig, timeout: float = 2.0) -> None:
    """The advertised ``application.server`` must reach this instance's own query server (asked
    once it listens): peers and clients route there. Raises ConfigException when another server
    answers there (another application's, or another instance's: a listen host that differs from
    the advertised one, a port someone else holds). A call that gets no answer proves nothing (a
    starting pod's DNS name is published only once it is ready) and passes."""
    from kernel.application_guard import is_wrong_application
    from kernel.channels import ChannelPool
    from kernel.rpc import iqmesh_pb2 as pb

    endpoint = config.application_server
    pool = ChannelPool(config.security, config.application_id)
    try:
        reply = pool.stub(endpoint).Metadata(pb.MetadataRequest(), timeout=timeout)
    except grpc.RpcError as e:
        if is_wrong_application(e):
            raise ConfigException(f"application.server {endpoint} is served by another application, not by this "
                                  f"instance (listening on {config.listen_host}): give iqmesh.listen.host and "
                                  "application.server the same address, or a free port") from None
        return
    finally:
        pool.close()
    if (reply.asked, reply.application_id) != (config.instance_id, config.application_id):
        raise ConfigException(f"application.server {endpoint} is served by instance {reply.asked!r} of application "
                              f"{reply.application_id!r}, not by this instance (listening on {config.listen_host}): "
                              "give iqmesh.listen.host and application.server the same address, or a free port")
