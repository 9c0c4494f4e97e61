"""The gateway's OpenAPI 3 document (``/openapi.json``), written by hand next to the handlers it
describes; the property-based test (schemathesis) holds the two together.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kernel.instance_state import State
from kernel.local_read import Role
from kernel.unavailable import FailureReason
from router.gateway.auth import OPEN_PATHS
from router.gateway.context import GATEWAY
from router.gateway.errors import GatewayReason
from router.gateway.params import DEFAULT_PAGE, MAX_PAGE

_INT64 = {"type": "integer", "format": "int64"}
_ANY: dict[str, Any] = {"description": "any JSON value (as the store's serde gives it; null when not found)"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


def _q(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


_STORE = {"name": "store", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1},
          "description": "store name"}
_READ = [
    _q("allow_stale", {"type": "boolean", "default": False},
       "standbys and restoring replicas may answer (the reply says stale)"),
    _q("max_lag", {**_INT64, "minimum": 0}, "with allow_stale: no replica further behind than this"),
    _q("position", {"type": "string"}, "position token of an earlier reply: never read older state"),
]
_SCAN = [
    *_READ,
    _q("require_complete", {"type": "boolean", "default": False},
       "503 rather than a reply with partitions missing"),
    _q("page_token", {"type": "string"}, "next_page_token of the previous page of the same query"),
]


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _text(media: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": {"type": "string"}}}}


def _errors(*statuses: int) -> dict[str, Any]:
    text = {400: "bad parameter, key or token (INVALID_ARGUMENT)", 404: "unknown store (UNKNOWN_STORE)",
            409: "the store has no changelog, so it cannot be watched (FAILED_PRECONDITION)",
            503: "no replica can answer (UNAVAILABLE, with the reason and the instances tried)",
            504: "the instances did not answer in time (DEADLINE_EXCEEDED)"}
    out = {str(s): _json(_ref("Error"), text[s]) for s in statuses}
    out["default"] = _json(_ref("Error"), "any other error")
    return out


def _get(summary: str, responses: dict[str, Any], params: list[dict[str, Any]] | None = None,
         op_id: str = "") -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "operationId": op_id, "responses": responses}
    if params:
        op["parameters"] = params
    return {"get": op}


#: the vocabularies as the JSON spells them: each enum's names (GLOBAL: a global store's copy)
_ROLE = {"type": "string", "enum": [r.value for r in Role]}
_STATE = {"type": "string", "enum": [s.value for s in State]}
_REASON = {"type": "string", "enum": [r.value for r in FailureReason]}

_READ_METADATA = _obj(
    ["served_by", "role", "partition", "position", "lag", "stale"],
    served_by={"type": "string"}, endpoint={"type": "string"},
    role=_ROLE, instance_state=_STATE,
    partition={"type": "integer"}, position=_INT64, end_offset=_INT64, lag=_INT64, stale={"type": "boolean"},
    forwarded={"type": "boolean"}, position_token={"type": "string"})

_PARTITION_STATUS = {**_obj(["partition", "available"], partition={"type": "integer"}, available={"type": "boolean"},
                            served_by={"type": "string"}, role=_ROLE,
                            instance_state=_STATE, position=_INT64, end_offset=_INT64, lag=_INT64,
                            stale={"type": "boolean"}, forwarded={"type": "boolean"},
                            position_token={"type": "string"}, reason=_REASON,
                            message={"type": "string"}, tried={"type": "array", "items": {"type": "string"}}),
                     "description": "read metadata when available, else the reason and the instances tried"}

_SCAN_SUMMARY = {"store": {"type": "string"}, "count": {"type": "integer"}, "next_page_token": {"type": "string"},
                 "complete": {"type": "boolean"}, "stale": {"type": "boolean"},
                 "partitions": {"type": "array", "items": _ref("PartitionStatus")}, "via": {"type": "string"}}
_SUMMARY_REQUIRED = ["store", "count", "next_page_token", "complete", "stale", "partitions"]

_STORE_PART = _obj(["store", "partition", "role", "position", "end_offset", "lag"], store={"type": "string"},
                   partition={"type": "integer"}, role=_ROLE, position=_INT64, end_offset=_INT64,
                   lag=_INT64)
_TASKS = {"type": "array", "items": {"type": "string"}}
_INSTANCE = _obj(["instance_id", "endpoint", "state", "alive", "heartbeat_age_ms", "active_tasks", "standby_tasks",
                  "restoring_tasks", "stores"],
                 instance_id={"type": "string"}, endpoint={"type": "string"}, state=_STATE,
                 alive={"type": "boolean"}, heartbeat_age_ms=_INT64, active_tasks=_TASKS, standby_tasks=_TASKS,
                 restoring_tasks=_TASKS, stores={"type": "array", "items": _ref("StorePartition")},
                 store_updates_per_s={"type": "number"}, records_per_s={"type": "number"},
                 queries_per_s={"type": "number"}, lag={"type": "number"},
                 counters=_obj(["records_processed", "gets_local", "gets_routed", "gets_forwarded", "get_seconds",
                                "scans", "scan_entries", "query_errors"],
                               records_processed=_INT64, gets_local=_INT64, gets_routed=_INT64,
                               gets_forwarded=_INT64, get_seconds={"type": "number"}, scans=_INT64,
                               scan_entries=_INT64,
                               query_errors={"type": "object", "additionalProperties": _INT64},
                               dropped_records={"type": "object", "additionalProperties": _INT64},
                               dirty_closes=_INT64))
_REPLICA = {**_obj(["instance_id", "role", "position", "lag"], instance_id={"type": "string"},
                   role=_ROLE, position=_INT64, end_offset=_INT64, lag=_INT64)}
_STORE_INFO = _obj(["store", "partitions", "replicas"], store={"type": "string"}, partitions={"type": "integer"},
                   **{"global": {"type": "boolean", "description": "every instance holds the store whole and "
                                 "answers it from its own copy (GlobalKTable); replicas is then empty"}},
                   instances={"type": "array", "items": {"type": "string"},
                              "description": "a global store: the live instances holding it"},
                   replicas={"type": "array", "items": _obj(
                       ["partition", "active", "standbys"], partition={"type": "integer"},
                       active={"anyOf": [_ref("Replica"), {"type": "null"}]},
                       standbys={"type": "array", "items": _ref("Replica")})})

SCHEMAS: dict[str, Any] = {
    "Error": _obj(["error"], error=_obj(
        ["code", "message"], code={"type": "string", "description": "stable, machine-readable"},
        message={"type": "string"},
        reason={"type": "string", "enum": [*_REASON["enum"], *(r.value for r in GatewayReason)],
                "description": "503: the instances' refusal, or the gateway's own (UNREACHABLE, NOT_READY, "
                "WATCH_CAP_REACHED)"},
        tried={"type": "array", "items": {"type": "string"}},
        standby_holds={"type": "boolean", "description": "503 of a strict read: a standby holds the partition, "
                       "so the read with allow_stale=true would be answered"})),
    "ReadMetadata": _READ_METADATA,
    "PartitionStatus": _PARTITION_STATUS,
    "Entry": _obj(["key", "value", "partition"], key=_ANY, value=_ANY, partition={"type": "integer"}),
    "KeyReply": _obj(["store", "key", "found", "value", "metadata", "via"], store={"type": "string"},
                     key={"type": "string"}, found={"type": "boolean"},
                     value=_ANY, metadata=_ref("ReadMetadata"), via={"type": "string"}),
    "RangeReply": _obj([*_SUMMARY_REQUIRED, "entries"], **_SCAN_SUMMARY,
                       entries={"type": "array", "items": _ref("Entry")}),
    "StorePartition": _STORE_PART,
    "Instance": _INSTANCE,
    "Replica": _REPLICA,
    "Store": _STORE_INFO,
    "Stores": _obj(["stores", "asked", "via"], stores={"type": "array", "items": _ref("Store")},
                   asked={"type": "string"}, via={"type": "string"}),
    "Metadata": _obj(["asked", "store_partitions", "instances", "via"], asked={"type": "string"},
                     store_partitions={"type": "object", "additionalProperties": {"type": "integer"}},
                     instances={"type": "array", "items": _ref("Instance")}, via={"type": "string"},
                     at_ms=_INT64),
    "Instances": _obj(["instances", "asked", "via", "at_ms", "age_ms"],
                      instances={"type": "array", "items": _ref("Instance")}, asked={"type": "string"},
                      via={"type": "string"}, at_ms=_INT64, age_ms=_INT64, error={"type": "string"}),
    "Topology": _obj(
        ["application_id", "description", "subtopologies", "global_stores", "input_lag", "processing_lag", "via"],
        asked={"type": "string"}, application_id={"type": "string"},
        description={"type": "string", "description": "Kafka Streams' TopologyDescription text"},
        subtopologies={"type": "array", "items": _obj(
            ["id", "tasks", "source_topics", "sink_topics", "repartition_topics", "stores", "changelog_topics"],
            id={"type": "integer"}, tasks={"type": "integer"},
            **{k: {"type": "array", "items": {"type": "string"}}
               for k in ("source_topics", "sink_topics", "repartition_topics", "stores", "changelog_topics")})},
        global_stores={"type": "array", "items": _obj(["store", "topic"], store={"type": "string"},
                                                      topic={"type": "string"})},
        input_lag={"type": "array", "description": "per input partition: the group's committed offset (-1: none "
                   "yet) against the end offset", "items": _obj(
                       ["task", "topic", "partition", "committed", "end_offset", "lag"], task={"type": "string"},
                       topic={"type": "string"}, partition={"type": "integer"}, committed=_INT64,
                       end_offset=_INT64, lag=_INT64)},
        input_lag_error={"type": "string"},
        processing_lag=_obj(["by_instance", "by_topic"],
                            by_instance={"type": "object", "additionalProperties": _INT64},
                            by_topic={"type": "object", "additionalProperties": _INT64}),
        via={"type": "string"}),
    "Ready": _obj(["status"], status={"type": "string"}, running={"type": "array", "items": {"type": "string"}},
                  unowned_partitions={"type": "array", "items": _obj(["store", "partition"],
                                                                      store={"type": "string"},
                                                                      partition={"type": "integer"})},
                  via={"type": "string"}),
}


def document(token_required: bool = False) -> dict[str, Any]:
    """The API; ``token_required`` (``iqmesh.auth.token`` set): every operation but the probes
    declares the bearer scheme."""
    key = {"name": "key", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1},
           "description": "the key as text, parsed with the store's key serde"}
    paths = {
        "/v1/stores": _get("Stores with their partitions and replicas", {
            "200": _json(_ref("Stores"), "every store"), **_errors(503, 504)}, op_id="listStores"),
        "/v1/stores/{store}/keys/{key}": _get("One key (found=false when the store does not hold it)", {
            "200": _json(_ref("KeyReply"), "the value and who served it"), **_errors(400, 404, 503, 504)},
            [_STORE, key, *_READ], "getKey"),
        "/v1/stores/{store}/keys": {"post": {
            "summary": "One key given in the body (for keys too long for a URL, up to 1 MiB)",
            "operationId": "lookupKey", "parameters": [_STORE, *_READ],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                **_obj(["key"], key={"type": "string", "minLength": 1}), "additionalProperties": False}}}},
            "responses": {"200": _json(_ref("KeyReply"), "the value and who served it"),
                          **_errors(400, 404, 503, 504)}}},
        "/v1/stores/{store}/range": _get("One page of from <= key <= to (by serialized key)", {
            "200": _json(_ref("RangeReply"), "entries in key order and each partition's status"),
            **_errors(400, 404, 503, 504)},
            [_STORE, _q("from", {"type": "string"}, "first key (absent: unbounded)"),
             _q("to", {"type": "string"}, "last key (absent: unbounded)"),
             _q("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": DEFAULT_PAGE},
                "entries in this page"), *_SCAN], "getRange"),
        "/v1/stores/{store}/all": _get("Every entry, streamed as JSON lines", {
            "200": _text("application/x-ndjson", 'one {"key","value","partition"} line per entry, then '
                         '{"end": {count, next_page_token, complete, stale, partitions}} or, if the scan failed '
                         'after the first line, {"error": {...}}'),
            **_errors(400, 404, 503, 504)},
            [_STORE, _q("limit", {**_INT64, "minimum": 1}, "entries in all (absent: every one)"), *_SCAN],
            "getAll"),
        "/v1/stores/{store}/watch": _get("Server-Sent Events: the store's committed changes as they happen", {
            "200": _text("text/event-stream",
                         "event: start (store, key_serde, value_serde, partitions, served_by, resume_token, via); "
                         "event: change (key, value, deleted, partition, offset, timestamp_ms, resume_token); "
                         "event: routing (partition, previous_owner, owner, endpoint: a watched partition's "
                         "active owner changed); event: progress (resume_token); event: error ({error}) before "
                         "the stream ends. start, change and progress carry the resume token as the SSE id, so "
                         "an EventSource that reconnects (Last-Event-ID) goes on right after it."),
            **_errors(400, 404, 409, 503, 504)},
            [_STORE, _q("key", {"type": "string"}, "watch this key (text, parsed with the store's key serde); "
                        "absent: every key"),
             _q("prefix", {"type": "boolean", "default": False}, "watch every key starting with key instead"),
             _q("from_beginning", {"type": "boolean", "default": False},
                "without a token: first every change the changelog still holds"),
             _q("token", {"type": "string"}, "resume token of an earlier event: go on right after it "
                "(the Last-Event-ID header does the same)"),
             _q("max_events", {"type": "integer", "minimum": 1}, "end the stream after this many changes")],
            "watch"),
        "/v1/metadata": _get("The routing table as the asked instance sees it", {
            "200": _json(_ref("Metadata"), "instances, tasks, store partitions"), **_errors(503, 504)},
            op_id="getMetadata"),
        "/v1/instances": _get("Every instance with its tasks, lags and rates (latest snapshot)", {
            "200": _json(_ref("Instances"), "instances"), **_errors(503)}, op_id="listInstances"),
        "/v1/topology": _get("The topology the instances run, and how far processing is behind the input", {
            "200": _json(_ref("Topology"), "sub-topologies with their topics and stores; processing lag"),
            **_errors(503, 504)}, op_id="getTopology"),
        "/v1/events": _get("Server-Sent Events: a snapshot of the cluster about every second", {
            "200": _text("text/event-stream", "event: snapshot, data: the /v1/instances document plus stores"),
            **_errors(400)},
            [_q("max_events", {"type": "integer", "minimum": 1}, "end the stream after this many events")],
            "events"),
        "/healthz": _get("The process answers", {"200": _json(_obj(["status"], status={"type": "string"}), "ok")},
                         op_id="healthz"),
        "/readyz": _get("The gateway can serve (cluster=true: the cluster can answer queries)", {
            "200": _json(_ref("Ready"), "ready"), **_errors(400, 503)},
            [_q("cluster", {"type": "boolean", "default": False},
                "ready only when the cluster can answer queries (every partition owned by a running instance)")],
            "readyz"),
        "/metrics": _get("Prometheus metrics", {"200": _text("text/plain", "Prometheus text format 0.0.4")},
                         op_id="metrics"),
    }
    if token_required:
        for path, item in paths.items():
            for op in item.values():
                op["security"] = [] if path in OPEN_PATHS else [{"bearerAuth": []}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "iqmesh REST gateway", "version": "1",
                 "description": "Interactive queries over every instance of an iqmesh application. Every "
                                "answer says who served it and how fresh it is. Errors are "
                                '{"error": {"code", "message"}} with a stable code.'},
        "paths": paths,
        "components": {"schemas": SCHEMAS,
                       "securitySchemes": {"bearerAuth": {
                           "type": "http", "scheme": "bearer",
                           "description": "the iqmesh.auth.token setting; the dashboard: ?access_token= once"}}},
    }


async def openapi_json(request: web.Request) -> web.Response:
    return web.json_response(document(bool(request.app[GATEWAY].config.security.token)))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/openapi.json", openapi_json)
