#!/usr/bin/env bash
# Regenerate the Python stubs of proto/iqmesh.proto into kernel/rpc/ (committed; needs grpcio-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m grpc_tools.protoc -Iproto --python_out=kernel/rpc --pyi_out=kernel/rpc \
  --grpc_python_out=kernel/rpc proto/iqmesh.proto
# protoc writes a top-level import; make it a package import
sed -i 's/^import iqmesh_pb2 as iqmesh__pb2/from kernel.rpc import iqmesh_pb2 as iqmesh__pb2/' kernel/rpc/iqmesh_pb2_grpc.py
