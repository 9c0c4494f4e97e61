"""The routing client: routing table, QueryRouter, the client core and its steps, the sync and
async clients, watches, scan pages, and the forwarding hop and scatter an instance uses when it
passes a query on (the query server is a client of its peers then).

It builds on :mod:`kernel` only: nothing from ``instance`` or ``router.gateway``
(tests/unit/test_import_graph.py).
"""
