"""Tooling of the test suite and the benchmarks, kept out of the wheel. The local brokers and
clusters they start are the product's own (``instance.local``: ``iqmesh broker`` and ``iqmesh
demo`` use them); only what the suite alone needs is here (``suite_broker``)."""
