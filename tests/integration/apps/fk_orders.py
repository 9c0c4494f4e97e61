"""Orders enriched with their customer through a foreign-key table-table join (KIP-213).

``orders`` (order id -> ``customer:item``) and ``customers`` (customer id -> name) need not be
co-partitioned: the join reaches each customer through the subscription topic. The result, in
the queryable store ``enriched``, is ``customer:item/name`` for every order whose customer exists.
"""

import os

from instance.serde import StringSerde
from instance.topology import Materialized, StreamsBuilder, Topology

ORDERS_TOPIC = os.environ.get("FK_ORDERS_TOPIC", "orders")
CUSTOMERS_TOPIC = os.environ.get("FK_CUSTOMERS_TOPIC", "customers")


def build() -> Topology:
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    orders = b.table(ORDERS_TOPIC, Materialized.as_("orders"))
    customers = b.table(CUSTOMERS_TOPIC, Materialized.as_("customers"))
    orders.join(customers, lambda order: order.split(":")[0], lambda order, name: f"{order}/{name}",
                Materialized.as_("enriched"))
    return b.build()
