"""Interactive queries of this instance's state, shaped like Kafka Streams' IQv2.

``KafkaStreams.query(StateQueryRequest(store, query, partitions, position_bound))`` asks the local
replicas of a store's partitions and returns one :class:`QueryResult` per partition: the answer
with the replica that gave it (role, position, lag), or a typed :class:`FailureReason`. It is the
one way anything reads a store from outside its task: the gRPC servicer (Get, fetches, scan
pages), and a program embedding ``KafkaStreams``. Routing to other instances is not here (as in
Kafka Streams): the query server does it with :mod:`router.client.query_router`.
"""

from instance.runtime.query.request import (
    UNBOUNDED,
    KeyQuery,
    PositionBound,
    Query,
    RangePageQuery,
    RangeQuery,
    StateQueryRequest,
    WindowKeyQuery,
    WindowRangeQuery,
)
from instance.runtime.query.result import QueryResult, StateQueryResult
from kernel.unavailable import FailureReason

__all__ = ["UNBOUNDED", "FailureReason", "KeyQuery", "PositionBound", "Query", "QueryResult", "RangePageQuery",
           "RangeQuery", "StateQueryRequest", "StateQueryResult", "WindowKeyQuery", "WindowRangeQuery"]
