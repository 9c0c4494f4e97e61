"""Generated gRPC stubs of proto/iqmesh.proto (regenerate with proto/generate.sh)."""
