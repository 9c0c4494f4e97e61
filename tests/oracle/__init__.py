"""Kafka Streams as the oracle: differential tests of iqmesh against Kafka Streams' own
TopologyTestDriver (docs/architecture.md, "Kafka Streams as the oracle").

``.venv/bin/pytest -q tests/oracle`` (needs Maven and Java 17; the jar is built once and cached);
a longer run: ``IQMESH_ORACLE_EXAMPLES=2000 .venv/bin/pytest -q tests/oracle``."""
