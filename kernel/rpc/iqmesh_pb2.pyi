from google.protobuf import any_pb2 as _any_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_ACTIVE: _ClassVar[Role]
    ROLE_STANDBY: _ClassVar[Role]
    ROLE_RESTORING: _ClassVar[Role]
    ROLE_GLOBAL: _ClassVar[Role]

class InstanceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INSTANCE_STATE_UNSPECIFIED: _ClassVar[InstanceState]
    INSTANCE_STATE_CREATED: _ClassVar[InstanceState]
    INSTANCE_STATE_REBALANCING: _ClassVar[InstanceState]
    INSTANCE_STATE_RUNNING: _ClassVar[InstanceState]
    INSTANCE_STATE_PENDING_SHUTDOWN: _ClassVar[InstanceState]
    INSTANCE_STATE_NOT_RUNNING: _ClassVar[InstanceState]
    INSTANCE_STATE_PENDING_ERROR: _ClassVar[InstanceState]
    INSTANCE_STATE_ERROR: _ClassVar[InstanceState]
ROLE_UNSPECIFIED: Role
ROLE_ACTIVE: Role
ROLE_STANDBY: Role
ROLE_RESTORING: Role
ROLE_GLOBAL: Role
INSTANCE_STATE_UNSPECIFIED: InstanceState
INSTANCE_STATE_CREATED: InstanceState
INSTANCE_STATE_REBALANCING: InstanceState
INSTANCE_STATE_RUNNING: InstanceState
INSTANCE_STATE_PENDING_SHUTDOWN: InstanceState
INSTANCE_STATE_NOT_RUNNING: InstanceState
INSTANCE_STATE_PENDING_ERROR: InstanceState
INSTANCE_STATE_ERROR: InstanceState

class QueryOptions(_message.Message):
    __slots__ = ("allow_stale", "max_lag", "position")
    ALLOW_STALE_FIELD_NUMBER: _ClassVar[int]
    MAX_LAG_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    allow_stale: bool
    max_lag: int
    position: str
    def __init__(self, allow_stale: _Optional[bool] = ..., max_lag: _Optional[int] = ..., position: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("store", "key", "raw_key", "options", "forwarded")
    STORE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RAW_KEY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    store: str
    key: str
    raw_key: bytes
    options: QueryOptions
    forwarded: bool
    def __init__(self, store: _Optional[str] = ..., key: _Optional[str] = ..., raw_key: _Optional[bytes] = ..., options: _Optional[_Union[QueryOptions, _Mapping]] = ..., forwarded: _Optional[bool] = ...) -> None: ...

class ReadMetadata(_message.Message):
    __slots__ = ("served_by", "endpoint", "role", "instance_state", "partition", "position", "end_offset", "lag", "stale", "forwarded", "position_token")
    SERVED_BY_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_STATE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    POSITION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    served_by: str
    endpoint: str
    role: Role
    instance_state: InstanceState
    partition: int
    position: int
    end_offset: int
    lag: int
    stale: bool
    forwarded: bool
    position_token: str
    def __init__(self, served_by: _Optional[str] = ..., endpoint: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., instance_state: _Optional[_Union[InstanceState, str]] = ..., partition: _Optional[int] = ..., position: _Optional[int] = ..., end_offset: _Optional[int] = ..., lag: _Optional[int] = ..., stale: _Optional[bool] = ..., forwarded: _Optional[bool] = ..., position_token: _Optional[str] = ...) -> None: ...

class GetReply(_message.Message):
    __slots__ = ("found", "value_json", "metadata", "value", "value_serde")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUE_SERDE_FIELD_NUMBER: _ClassVar[int]
    found: bool
    value_json: str
    metadata: ReadMetadata
    value: bytes
    value_serde: str
    def __init__(self, found: _Optional[bool] = ..., value_json: _Optional[str] = ..., metadata: _Optional[_Union[ReadMetadata, _Mapping]] = ..., value: _Optional[bytes] = ..., value_serde: _Optional[str] = ...) -> None: ...

class GetBatchRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[GetRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[GetRequest, _Mapping]]] = ...) -> None: ...

class GetBatchReply(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[GetOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[GetOutcome, _Mapping]]] = ...) -> None: ...

class GetOutcome(_message.Message):
    __slots__ = ("reply", "error")
    REPLY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    reply: GetReply
    error: ErrorStatus
    def __init__(self, reply: _Optional[_Union[GetReply, _Mapping]] = ..., error: _Optional[_Union[ErrorStatus, _Mapping]] = ...) -> None: ...

class Key(_message.Message):
    __slots__ = ("text", "raw")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    text: str
    raw: bytes
    def __init__(self, text: _Optional[str] = ..., raw: _Optional[bytes] = ...) -> None: ...

class ScanOptions(_message.Message):
    __slots__ = ("limit", "page_token", "require_complete", "with_json", "partitions")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    WITH_JSON_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    limit: int
    page_token: str
    require_complete: bool
    with_json: bool
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, limit: _Optional[int] = ..., page_token: _Optional[str] = ..., require_complete: _Optional[bool] = ..., with_json: _Optional[bool] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class MultiGetRequest(_message.Message):
    __slots__ = ("store", "keys", "options", "scan", "forwarded")
    STORE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    store: str
    keys: _containers.RepeatedCompositeFieldContainer[Key]
    options: QueryOptions
    scan: ScanOptions
    forwarded: bool
    def __init__(self, store: _Optional[str] = ..., keys: _Optional[_Iterable[_Union[Key, _Mapping]]] = ..., options: _Optional[_Union[QueryOptions, _Mapping]] = ..., scan: _Optional[_Union[ScanOptions, _Mapping]] = ..., forwarded: _Optional[bool] = ...) -> None: ...

class RangeRequest(_message.Message):
    __slots__ = ("store", "from_key", "to_key", "options", "scan", "forwarded")
    STORE_FIELD_NUMBER: _ClassVar[int]
    FROM_KEY_FIELD_NUMBER: _ClassVar[int]
    TO_KEY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    store: str
    from_key: Key
    to_key: Key
    options: QueryOptions
    scan: ScanOptions
    forwarded: bool
    def __init__(self, store: _Optional[str] = ..., from_key: _Optional[_Union[Key, _Mapping]] = ..., to_key: _Optional[_Union[Key, _Mapping]] = ..., options: _Optional[_Union[QueryOptions, _Mapping]] = ..., scan: _Optional[_Union[ScanOptions, _Mapping]] = ..., forwarded: _Optional[bool] = ...) -> None: ...

class PrefixScanRequest(_message.Message):
    __slots__ = ("store", "prefix", "options", "scan", "forwarded")
    STORE_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    store: str
    prefix: Key
    options: QueryOptions
    scan: ScanOptions
    forwarded: bool
    def __init__(self, store: _Optional[str] = ..., prefix: _Optional[_Union[Key, _Mapping]] = ..., options: _Optional[_Union[QueryOptions, _Mapping]] = ..., scan: _Optional[_Union[ScanOptions, _Mapping]] = ..., forwarded: _Optional[bool] = ...) -> None: ...

class AllRequest(_message.Message):
    __slots__ = ("store", "options", "scan", "forwarded")
    STORE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    store: str
    options: QueryOptions
    scan: ScanOptions
    forwarded: bool
    def __init__(self, store: _Optional[str] = ..., options: _Optional[_Union[QueryOptions, _Mapping]] = ..., scan: _Optional[_Union[ScanOptions, _Mapping]] = ..., forwarded: _Optional[bool] = ...) -> None: ...

class ScanHeader(_message.Message):
    __slots__ = ("store", "key_serde", "value_serde", "partitions")
    STORE_FIELD_NUMBER: _ClassVar[int]
    KEY_SERDE_FIELD_NUMBER: _ClassVar[int]
    VALUE_SERDE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    store: str
    key_serde: str
    value_serde: str
    partitions: int
    def __init__(self, store: _Optional[str] = ..., key_serde: _Optional[str] = ..., value_serde: _Optional[str] = ..., partitions: _Optional[int] = ...) -> None: ...

class PartitionStatus(_message.Message):
    __slots__ = ("partition", "available", "metadata", "reason", "message", "tried")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRIED_FIELD_NUMBER: _ClassVar[int]
    partition: int
    available: bool
    metadata: ReadMetadata
    reason: QueryRefusal.Reason
    message: str
    tried: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, partition: _Optional[int] = ..., available: _Optional[bool] = ..., metadata: _Optional[_Union[ReadMetadata, _Mapping]] = ..., reason: _Optional[_Union[QueryRefusal.Reason, str]] = ..., message: _Optional[str] = ..., tried: _Optional[_Iterable[str]] = ...) -> None: ...

class ScanEntry(_message.Message):
    __slots__ = ("key", "value", "found", "partition", "key_json", "value_json")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    KEY_JSON_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    found: bool
    partition: int
    key_json: str
    value_json: str
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., found: _Optional[bool] = ..., partition: _Optional[int] = ..., key_json: _Optional[str] = ..., value_json: _Optional[str] = ...) -> None: ...

class ScanEntries(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[ScanEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[ScanEntry, _Mapping]]] = ...) -> None: ...

class ScanEnd(_message.Message):
    __slots__ = ("next_page_token", "complete", "count")
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    complete: bool
    count: int
    def __init__(self, next_page_token: _Optional[str] = ..., complete: _Optional[bool] = ..., count: _Optional[int] = ...) -> None: ...

class ScanReply(_message.Message):
    __slots__ = ("header", "partition", "entries", "end")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    header: ScanHeader
    partition: PartitionStatus
    entries: ScanEntries
    end: ScanEnd
    def __init__(self, header: _Optional[_Union[ScanHeader, _Mapping]] = ..., partition: _Optional[_Union[PartitionStatus, _Mapping]] = ..., entries: _Optional[_Union[ScanEntries, _Mapping]] = ..., end: _Optional[_Union[ScanEnd, _Mapping]] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MetricsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Metric(_message.Message):
    __slots__ = ("name", "group", "tags", "value", "description")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    group: str
    tags: _containers.ScalarMap[str, str]
    value: float
    description: str
    def __init__(self, name: _Optional[str] = ..., group: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ..., value: _Optional[float] = ..., description: _Optional[str] = ...) -> None: ...

class MetricsReply(_message.Message):
    __slots__ = ("instance_id", "metrics")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    metrics: _containers.RepeatedCompositeFieldContainer[Metric]
    def __init__(self, instance_id: _Optional[str] = ..., metrics: _Optional[_Iterable[_Union[Metric, _Mapping]]] = ...) -> None: ...

class TaskList(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tasks: _Optional[_Iterable[str]] = ...) -> None: ...

class StorePartition(_message.Message):
    __slots__ = ("store", "partition", "role", "position", "end_offset", "lag")
    STORE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    store: str
    partition: int
    role: Role
    position: int
    end_offset: int
    lag: int
    def __init__(self, store: _Optional[str] = ..., partition: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., position: _Optional[int] = ..., end_offset: _Optional[int] = ..., lag: _Optional[int] = ...) -> None: ...

class InstanceCounters(_message.Message):
    __slots__ = ("records_processed", "gets_local", "gets_routed", "gets_forwarded", "get_seconds", "scans", "scan_entries", "query_errors", "dropped_records", "dirty_closes")
    class QueryErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class DroppedRecordsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RECORDS_PROCESSED_FIELD_NUMBER: _ClassVar[int]
    GETS_LOCAL_FIELD_NUMBER: _ClassVar[int]
    GETS_ROUTED_FIELD_NUMBER: _ClassVar[int]
    GETS_FORWARDED_FIELD_NUMBER: _ClassVar[int]
    GET_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SCANS_FIELD_NUMBER: _ClassVar[int]
    SCAN_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    QUERY_ERRORS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_RECORDS_FIELD_NUMBER: _ClassVar[int]
    DIRTY_CLOSES_FIELD_NUMBER: _ClassVar[int]
    records_processed: int
    gets_local: int
    gets_routed: int
    gets_forwarded: int
    get_seconds: float
    scans: int
    scan_entries: int
    query_errors: _containers.ScalarMap[str, int]
    dropped_records: _containers.ScalarMap[str, int]
    dirty_closes: int
    def __init__(self, records_processed: _Optional[int] = ..., gets_local: _Optional[int] = ..., gets_routed: _Optional[int] = ..., gets_forwarded: _Optional[int] = ..., get_seconds: _Optional[float] = ..., scans: _Optional[int] = ..., scan_entries: _Optional[int] = ..., query_errors: _Optional[_Mapping[str, int]] = ..., dropped_records: _Optional[_Mapping[str, int]] = ..., dirty_closes: _Optional[int] = ...) -> None: ...

class InstanceMetadata(_message.Message):
    __slots__ = ("instance_id", "endpoint", "state", "heartbeat_age_ms", "alive", "active_tasks", "standby_tasks", "restoring_tasks", "stores", "assigned_at_ms", "counters", "heartbeat_interval_ms", "session_timeout_ms")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TASKS_FIELD_NUMBER: _ClassVar[int]
    STANDBY_TASKS_FIELD_NUMBER: _ClassVar[int]
    RESTORING_TASKS_FIELD_NUMBER: _ClassVar[int]
    STORES_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    endpoint: str
    state: InstanceState
    heartbeat_age_ms: int
    alive: bool
    active_tasks: _containers.RepeatedScalarFieldContainer[str]
    standby_tasks: _containers.RepeatedScalarFieldContainer[str]
    restoring_tasks: _containers.RepeatedScalarFieldContainer[str]
    stores: _containers.RepeatedCompositeFieldContainer[StorePartition]
    assigned_at_ms: int
    counters: InstanceCounters
    heartbeat_interval_ms: int
    session_timeout_ms: int
    def __init__(self, instance_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., state: _Optional[_Union[InstanceState, str]] = ..., heartbeat_age_ms: _Optional[int] = ..., alive: _Optional[bool] = ..., active_tasks: _Optional[_Iterable[str]] = ..., standby_tasks: _Optional[_Iterable[str]] = ..., restoring_tasks: _Optional[_Iterable[str]] = ..., stores: _Optional[_Iterable[_Union[StorePartition, _Mapping]]] = ..., assigned_at_ms: _Optional[int] = ..., counters: _Optional[_Union[InstanceCounters, _Mapping]] = ..., heartbeat_interval_ms: _Optional[int] = ..., session_timeout_ms: _Optional[int] = ...) -> None: ...

class StoreRoute(_message.Message):
    __slots__ = ("store", "subtopology", "partitions", "key_serde", "value_serde", "global_store")
    STORE_FIELD_NUMBER: _ClassVar[int]
    SUBTOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    KEY_SERDE_FIELD_NUMBER: _ClassVar[int]
    VALUE_SERDE_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_STORE_FIELD_NUMBER: _ClassVar[int]
    store: str
    subtopology: int
    partitions: int
    key_serde: str
    value_serde: str
    global_store: bool
    def __init__(self, store: _Optional[str] = ..., subtopology: _Optional[int] = ..., partitions: _Optional[int] = ..., key_serde: _Optional[str] = ..., value_serde: _Optional[str] = ..., global_store: _Optional[bool] = ...) -> None: ...

class MetadataReply(_message.Message):
    __slots__ = ("asked", "instances", "store_partitions", "store_routes", "application_id")
    class StorePartitionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ASKED_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    STORE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    STORE_ROUTES_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    asked: str
    instances: _containers.RepeatedCompositeFieldContainer[InstanceMetadata]
    store_partitions: _containers.ScalarMap[str, int]
    store_routes: _containers.RepeatedCompositeFieldContainer[StoreRoute]
    application_id: str
    def __init__(self, asked: _Optional[str] = ..., instances: _Optional[_Iterable[_Union[InstanceMetadata, _Mapping]]] = ..., store_partitions: _Optional[_Mapping[str, int]] = ..., store_routes: _Optional[_Iterable[_Union[StoreRoute, _Mapping]]] = ..., application_id: _Optional[str] = ...) -> None: ...

class WindowFetchRequest(_message.Message):
    __slots__ = ("store", "key", "raw_key", "time_from", "time_to", "options", "forwarded")
    STORE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RAW_KEY_FIELD_NUMBER: _ClassVar[int]
    TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    store: str
    key: str
    raw_key: bytes
    time_from: int
    time_to: int
    options: QueryOptions
    forwarded: bool
    def __init__(self, store: _Optional[str] = ..., key: _Optional[str] = ..., raw_key: _Optional[bytes] = ..., time_from: _Optional[int] = ..., time_to: _Optional[int] = ..., options: _Optional[_Union[QueryOptions, _Mapping]] = ..., forwarded: _Optional[bool] = ...) -> None: ...

class SessionFetchRequest(_message.Message):
    __slots__ = ("store", "key", "raw_key", "options", "forwarded")
    STORE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RAW_KEY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    store: str
    key: str
    raw_key: bytes
    options: QueryOptions
    forwarded: bool
    def __init__(self, store: _Optional[str] = ..., key: _Optional[str] = ..., raw_key: _Optional[bytes] = ..., options: _Optional[_Union[QueryOptions, _Mapping]] = ..., forwarded: _Optional[bool] = ...) -> None: ...

class WindowEntry(_message.Message):
    __slots__ = ("start", "end", "value", "value_json")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    value: bytes
    value_json: str
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ..., value: _Optional[bytes] = ..., value_json: _Optional[str] = ...) -> None: ...

class WindowFetchReply(_message.Message):
    __slots__ = ("windows", "metadata", "value_serde")
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    VALUE_SERDE_FIELD_NUMBER: _ClassVar[int]
    windows: _containers.RepeatedCompositeFieldContainer[WindowEntry]
    metadata: ReadMetadata
    value_serde: str
    def __init__(self, windows: _Optional[_Iterable[_Union[WindowEntry, _Mapping]]] = ..., metadata: _Optional[_Union[ReadMetadata, _Mapping]] = ..., value_serde: _Optional[str] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("store", "key", "prefix", "all", "resume_token", "from_beginning", "with_json")
    STORE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FROM_BEGINNING_FIELD_NUMBER: _ClassVar[int]
    WITH_JSON_FIELD_NUMBER: _ClassVar[int]
    store: str
    key: Key
    prefix: Key
    all: bool
    resume_token: str
    from_beginning: bool
    with_json: bool
    def __init__(self, store: _Optional[str] = ..., key: _Optional[_Union[Key, _Mapping]] = ..., prefix: _Optional[_Union[Key, _Mapping]] = ..., all: _Optional[bool] = ..., resume_token: _Optional[str] = ..., from_beginning: _Optional[bool] = ..., with_json: _Optional[bool] = ...) -> None: ...

class WatchHeader(_message.Message):
    __slots__ = ("store", "key_serde", "value_serde", "partitions", "resume_token", "served_by")
    STORE_FIELD_NUMBER: _ClassVar[int]
    KEY_SERDE_FIELD_NUMBER: _ClassVar[int]
    VALUE_SERDE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVED_BY_FIELD_NUMBER: _ClassVar[int]
    store: str
    key_serde: str
    value_serde: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    resume_token: str
    served_by: str
    def __init__(self, store: _Optional[str] = ..., key_serde: _Optional[str] = ..., value_serde: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., resume_token: _Optional[str] = ..., served_by: _Optional[str] = ...) -> None: ...

class WatchChange(_message.Message):
    __slots__ = ("key", "value", "deleted", "partition", "offset", "timestamp_ms", "key_json", "value_json", "resume_token")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    KEY_JSON_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    deleted: bool
    partition: int
    offset: int
    timestamp_ms: int
    key_json: str
    value_json: str
    resume_token: str
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., deleted: _Optional[bool] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., key_json: _Optional[str] = ..., value_json: _Optional[str] = ..., resume_token: _Optional[str] = ...) -> None: ...

class WatchChanges(_message.Message):
    __slots__ = ("changes",)
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[WatchChange]
    def __init__(self, changes: _Optional[_Iterable[_Union[WatchChange, _Mapping]]] = ...) -> None: ...

class RoutingEvent(_message.Message):
    __slots__ = ("partition", "previous_owner", "owner", "endpoint")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_OWNER_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    partition: int
    previous_owner: str
    owner: str
    endpoint: str
    def __init__(self, partition: _Optional[int] = ..., previous_owner: _Optional[str] = ..., owner: _Optional[str] = ..., endpoint: _Optional[str] = ...) -> None: ...

class WatchProgress(_message.Message):
    __slots__ = ("resume_token",)
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    resume_token: str
    def __init__(self, resume_token: _Optional[str] = ...) -> None: ...

class WatchReply(_message.Message):
    __slots__ = ("header", "changes", "routing", "progress")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    ROUTING_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    header: WatchHeader
    changes: WatchChanges
    routing: RoutingEvent
    progress: WatchProgress
    def __init__(self, header: _Optional[_Union[WatchHeader, _Mapping]] = ..., changes: _Optional[_Union[WatchChanges, _Mapping]] = ..., routing: _Optional[_Union[RoutingEvent, _Mapping]] = ..., progress: _Optional[_Union[WatchProgress, _Mapping]] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SubtopologyInfo(_message.Message):
    __slots__ = ("id", "tasks", "source_topics", "sink_topics", "repartition_topics", "stores", "changelog_topics")
    ID_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TOPICS_FIELD_NUMBER: _ClassVar[int]
    SINK_TOPICS_FIELD_NUMBER: _ClassVar[int]
    REPARTITION_TOPICS_FIELD_NUMBER: _ClassVar[int]
    STORES_FIELD_NUMBER: _ClassVar[int]
    CHANGELOG_TOPICS_FIELD_NUMBER: _ClassVar[int]
    id: int
    tasks: int
    source_topics: _containers.RepeatedScalarFieldContainer[str]
    sink_topics: _containers.RepeatedScalarFieldContainer[str]
    repartition_topics: _containers.RepeatedScalarFieldContainer[str]
    stores: _containers.RepeatedScalarFieldContainer[str]
    changelog_topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[int] = ..., tasks: _Optional[int] = ..., source_topics: _Optional[_Iterable[str]] = ..., sink_topics: _Optional[_Iterable[str]] = ..., repartition_topics: _Optional[_Iterable[str]] = ..., stores: _Optional[_Iterable[str]] = ..., changelog_topics: _Optional[_Iterable[str]] = ...) -> None: ...

class GlobalStoreInfo(_message.Message):
    __slots__ = ("store", "topic")
    STORE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    store: str
    topic: str
    def __init__(self, store: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class InputLag(_message.Message):
    __slots__ = ("task", "topic", "partition", "committed", "end_offset", "lag")
    TASK_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    task: str
    topic: str
    partition: int
    committed: int
    end_offset: int
    lag: int
    def __init__(self, task: _Optional[str] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., committed: _Optional[int] = ..., end_offset: _Optional[int] = ..., lag: _Optional[int] = ...) -> None: ...

class DescribeReply(_message.Message):
    __slots__ = ("asked", "application_id", "description", "subtopologies", "global_stores", "input_lag", "input_lag_error")
    ASKED_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SUBTOPOLOGIES_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_STORES_FIELD_NUMBER: _ClassVar[int]
    INPUT_LAG_FIELD_NUMBER: _ClassVar[int]
    INPUT_LAG_ERROR_FIELD_NUMBER: _ClassVar[int]
    asked: str
    application_id: str
    description: str
    subtopologies: _containers.RepeatedCompositeFieldContainer[SubtopologyInfo]
    global_stores: _containers.RepeatedCompositeFieldContainer[GlobalStoreInfo]
    input_lag: _containers.RepeatedCompositeFieldContainer[InputLag]
    input_lag_error: str
    def __init__(self, asked: _Optional[str] = ..., application_id: _Optional[str] = ..., description: _Optional[str] = ..., subtopologies: _Optional[_Iterable[_Union[SubtopologyInfo, _Mapping]]] = ..., global_stores: _Optional[_Iterable[_Union[GlobalStoreInfo, _Mapping]]] = ..., input_lag: _Optional[_Iterable[_Union[InputLag, _Mapping]]] = ..., input_lag_error: _Optional[str] = ...) -> None: ...

class ErrorStatus(_message.Message):
    __slots__ = ("code", "message", "details")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    details: _containers.RepeatedCompositeFieldContainer[_any_pb2.Any]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., details: _Optional[_Iterable[_Union[_any_pb2.Any, _Mapping]]] = ...) -> None: ...

class QueryRefusal(_message.Message):
    __slots__ = ("reason", "tried", "message", "standby_holds")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REASON_UNSPECIFIED: _ClassVar[QueryRefusal.Reason]
        NOT_UP_TO_BOUND: _ClassVar[QueryRefusal.Reason]
        NO_REPLICA_WITHIN_LAG: _ClassVar[QueryRefusal.Reason]
        REBALANCING: _ClassVar[QueryRefusal.Reason]
        NOT_ACTIVE: _ClassVar[QueryRefusal.Reason]
        NOT_AVAILABLE: _ClassVar[QueryRefusal.Reason]
    REASON_UNSPECIFIED: QueryRefusal.Reason
    NOT_UP_TO_BOUND: QueryRefusal.Reason
    NO_REPLICA_WITHIN_LAG: QueryRefusal.Reason
    REBALANCING: QueryRefusal.Reason
    NOT_ACTIVE: QueryRefusal.Reason
    NOT_AVAILABLE: QueryRefusal.Reason
    REASON_FIELD_NUMBER: _ClassVar[int]
    TRIED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STANDBY_HOLDS_FIELD_NUMBER: _ClassVar[int]
    reason: QueryRefusal.Reason
    tried: _containers.RepeatedScalarFieldContainer[str]
    message: str
    standby_holds: bool
    def __init__(self, reason: _Optional[_Union[QueryRefusal.Reason, str]] = ..., tried: _Optional[_Iterable[str]] = ..., message: _Optional[str] = ..., standby_holds: _Optional[bool] = ...) -> None: ...

class WrongApplication(_message.Message):
    __slots__ = ("serving", "expected")
    SERVING_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    serving: str
    expected: str
    def __init__(self, serving: _Optional[str] = ..., expected: _Optional[str] = ...) -> None: ...
