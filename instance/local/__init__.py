"""The mesh on one machine: a broker (the dev broker noida-db, or Apache Kafka from Maven
Central), instances and the gateway as child processes, and the demo that puts them together.

In the product (``iqmesh broker``, ``iqmesh demo``), and what the tests and benchmarks start. The
production target is a real Kafka cluster; nothing in the runtime imports this package.
"""
