"""Orders per region: a stream-table join, then a regrouping (Kafka Streams'
StreamToTableJoin example, reshaped).

``customers`` (customer id → region) is a table in the queryable store ``customers``; each order
on ``orders`` (customer id → amount) is joined with its customer's region (``unknown`` if there
is none yet), re-keyed by region through a repartition topic and counted into the queryable
store ``orders-by-region``. The two input topics must be co-partitioned (same partition count).
"""

import os

from instance.serde import StringSerde
from instance.topology import StreamsBuilder, Topology

# overridable so several runs can share one broker (the tests do)
CUSTOMERS_TOPIC = os.environ.get("ORDERS_CUSTOMERS_TOPIC", "customers")
ORDERS_TOPIC = os.environ.get("ORDERS_ORDERS_TOPIC", "orders")


def build() -> Topology:
    builder = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    customers = builder.table(CUSTOMERS_TOPIC, "customers")
    (builder.stream(ORDERS_TOPIC)
            .left_join(customers, lambda amount, region: region or "unknown")
            .group_by(lambda customer, region: region)
            .count("orders-by-region"))
    return builder.build()
