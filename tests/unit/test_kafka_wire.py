"""The codecs generated from Kafka's message specs (instance/kafka_wire): checked-in modules equal a
fresh generation, messages round-trip in every version, and known encodings are spelled out byte by
byte with struct (independently of the generated code), including what runtime/group_admin.py
frames by hand."""

from __future__ import annotations

import os
import struct
import sys
import types
import uuid

import pytest

from devtools import kafka_wire_generate as generate
from instance.kafka_wire.codegen import Branch, branch, generate_module, snake
from instance.kafka_wire.errors import SpecError, UnsupportedVersionError, WireFormatError
from instance.kafka_wire.generated import api_versions_response as avr
from instance.kafka_wire.generated import find_coordinator_request as fcq
from instance.kafka_wire.generated import request_header, response_header
from instance.kafka_wire.generated import streams_group_describe_response as sgd
from instance.kafka_wire.generated import streams_group_heartbeat_request as hb
from instance.kafka_wire.generated import streams_group_heartbeat_response as hbr
from instance.kafka_wire.headers import frame_request, response_header_version
from instance.kafka_wire.primitives import Reader, Writer, uvarint
from instance.kafka_wire.spec import OPEN_END, Versions, parse_spec, strip_comments
from instance.runtime import group_admin


def _str16(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else struct.pack(">h", len(s.encode())) + s.encode()


def _cstr(s: str | None) -> bytes:
    return b"\x00" if s is None else uvarint(len(s.encode()) + 1) + s.encode()


# -- the checked-in modules --------------------------------------------------------------------------


def test_checked_in_codecs_equal_a_fresh_generation() -> None:
    jar = generate.cached_jar()
    if jar is None:  # the unit tests need no Java or Maven; CI resolves Kafka before them
        why = f"Apache Kafka {generate.SPEC_KAFKA_VERSION}'s kafka-clients jar (the specs) is not resolved here"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {why}")
        pytest.skip(why)
    changed = generate.differences(generate.render(jar))
    assert not changed, f"regenerate with python -m devtools.kafka_wire_generate: {changed} differ"


def test_generate_check_reports_a_stale_module(tmp_path: pytest.TempPathFactory) -> None:
    files = {"a.py": "x = 1\n", "__init__.py": ""}
    out = tmp_path / "generated"  # type: ignore[operator]
    generate.write(files, out)
    assert generate.differences(files, out) == []
    (out / "a.py").write_text("x = 2\n")
    (out / "stale.py").write_text("")
    assert generate.differences(files, out) == ["a.py", "stale.py"]


# -- spec reading ------------------------------------------------------------------------------------------


def test_versions_parse_and_branch() -> None:
    assert Versions.parse("3+") == Versions(3, OPEN_END)
    assert Versions.parse("1-4") == Versions(1, 4) and Versions.parse("2") == Versions(2, 2)
    assert Versions.parse("none").empty and str(Versions.parse("0+")) == "0+"
    with pytest.raises(SpecError):
        Versions.parse("x+")
    possible = Versions(0, 5)
    assert branch(Versions(0, OPEN_END), possible) == (Branch.ALWAYS, "True")
    assert branch(Versions(6, OPEN_END), possible) == (Branch.NEVER, "False")
    assert branch(Versions(3, OPEN_END), possible) == (Branch.SOMETIMES, "version >= 3")
    assert branch(Versions(0, 2), possible) == (Branch.SOMETIMES, "version <= 2")
    assert branch(Versions(1, 2), possible) == (Branch.SOMETIMES, "1 <= version <= 2")


def test_comments_are_stripped_outside_strings_only() -> None:
    text = '{ "a": "x // not a comment", // a comment\n "b": 1 }'
    assert strip_comments(text) == '{ "a": "x // not a comment", \n "b": 1 }'


def test_snake_case_names() -> None:
    assert snake("ThrottleTimeMs") == "throttle_time_ms"
    assert snake("PartitionsByUserEndpoint") == "partitions_by_user_endpoint"
    assert snake("IsClassic") == "is_classic" and snake("From") == "from_"


@pytest.mark.parametrize("field", [
    '{"name": "X", "type": "int32", "versions": "0+", "tag": 0}',             # tag without taggedVersions
    '{"name": "X", "type": "int32", "versions": "0+", "nullableVersions": "0+"}',  # fixed-size nullable
    '{"name": "X", "type": "int32", "versions": "0+", "flexibleVersions": "none"}',  # override on an int
    '{"name": "X", "type": "[][]int32", "versions": "0+"}',                     # nested arrays
    '{"name": "X", "type": "int32", "versions": "0+", "shiny": true}',          # a key we do not know
])
def test_specs_the_generator_does_not_understand_are_refused(field: str) -> None:
    with pytest.raises(SpecError):
        parse_spec(f'{{"name": "M", "type": "request", "validVersions": "0", "fields": [{field}]}}')


# -- known encodings ----------------------------------------------------------------------------------------


def test_request_header_v1_and_v2_and_the_client_id_that_never_goes_compact() -> None:
    v1 = frame_request(18, 3, 7, "cli", flexible=False, body=b"BODY")
    expected = struct.pack(">hhi", 18, 3, 7) + _str16("cli") + b"BODY"
    assert v1 == struct.pack(">i", len(expected)) + expected
    v2 = frame_request(88, 1, 9, "cli", flexible=True, body=b"")
    expected = struct.pack(">hhi", 88, 1, 9) + _str16("cli") + b"\x00"  # empty tagged fields
    assert v2 == struct.pack(">i", len(expected)) + expected
    # the same header through group_admin's hand framing
    assert v1 == group_admin.encode_request(18, 3, 7, b"BODY", client_id="cli")


def test_response_headers_and_the_api_versions_exception() -> None:
    assert response_header_version(88, flexible=True) == 1
    assert response_header_version(18, flexible=True) == 0  # ApiVersions: always v0
    assert response_header_version(10, flexible=False) == 0
    r = Reader(struct.pack(">i", 42) + b"\x00" + b"rest")
    assert response_header.read(r, 1).correlation_id == 42 and r.take(4) == b"rest"
    assert request_header.decode(request_header.encode(request_header.RequestHeader(1, 2, 3, None), 2), 2) \
        == request_header.RequestHeader(1, 2, 3, None)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_find_coordinator_matches_the_hand_framed_encoding(version: int) -> None:
    ours = fcq.encode(fcq.FindCoordinatorRequest(key="grp", key_type=0), version)
    assert ours == group_admin.encode_find_coordinator("grp", version)


def test_find_coordinator_v4_batches_keys_compactly() -> None:
    ours = fcq.encode(fcq.FindCoordinatorRequest(key_type=1, coordinator_keys=("a", "bc")), 4)
    assert ours == b"\x01" + uvarint(3) + _cstr("a") + _cstr("bc") + b"\x00"
    with pytest.raises(UnsupportedVersionError):  # v4 has no single key: it would be lost
        fcq.encode(fcq.FindCoordinatorRequest(key="grp"), 4)
    with pytest.raises(UnsupportedVersionError):  # v0 has no key type, and it is not ignorable
        fcq.encode(fcq.FindCoordinatorRequest(key="grp", key_type=1), 0)


def test_api_versions_v0_matches_the_hand_decoder_and_v3_reads_tagged_fields() -> None:
    v0 = struct.pack(">hi", 0, 2) + struct.pack(">hhh", 18, 0, 3) + struct.pack(">hhh", 88, 0, 1)
    assert group_admin.decode_api_versions(v0) == (0, {18: (0, 3), 88: (0, 1)})
    assert avr.decode(v0, 0) == avr.ApiVersionsResponse(0, (avr.ApiVersion(18, 0, 3), avr.ApiVersion(88, 0, 1)))
    # v3: compact array, throttle time, then tagged fields: 1 (FinalizedFeaturesEpoch), an unknown 9
    tagged = uvarint(2) + uvarint(1) + uvarint(8) + struct.pack(">q", 5) + uvarint(9) + uvarint(2) + b"zz"
    v3 = struct.pack(">h", 0) + uvarint(2) + struct.pack(">hhh", 18, 0, 3) + b"\x00" + struct.pack(">i", 7) + tagged
    decoded = avr.decode(v3, 3)
    assert decoded.api_keys == (avr.ApiVersion(18, 0, 3),) and decoded.throttle_time_ms == 7
    assert decoded.finalized_features_epoch == 5 and decoded.supported_features == ()
    # written back: the unknown tag is gone, the known one kept, defaults left out
    assert avr.encode(decoded, 3) == v3[:-len(tagged)] + uvarint(1) + uvarint(1) + uvarint(8) + struct.pack(">q", 5)


def test_heartbeat_request_bytes_for_a_join() -> None:
    request = hb.StreamsGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, endpoint_information_epoch=0, rebalance_timeout_ms=1000,
        topology=hb.Topology(epoch=0, subtopologies=(hb.Subtopology(subtopology_id="0", source_topics=("in",)),)),
        active_tasks=(), process_id="p", user_endpoint=hb.Endpoint("h", 8080))
    subtopology = _cstr("0") + uvarint(2) + _cstr("in") + uvarint(1) * 5 + b"\x00"
    expected = (_cstr("g") + _cstr("m") + struct.pack(">ii", 0, 0) + _cstr(None) + _cstr(None)
                + struct.pack(">i", 1000)
                + b"\x01" + struct.pack(">i", 0) + uvarint(2) + subtopology + b"\x00"   # topology (non-null)
                + uvarint(1) + uvarint(0) + uvarint(0)                                  # owned: [], null, null
                + _cstr("p") + b"\x01" + _cstr("h") + struct.pack(">H", 8080) + b"\x00"  # process, endpoint
                + uvarint(0) * 3 + b"\x00" + b"\x00")                                   # tags, offsets; bool; tags
    assert hb.encode(request, 0) == expected
    assert hb.decode(expected, 1) == request


# -- round trips -----------------------------------------------------------------------------------------------


def _full_response(version: int) -> hbr.StreamsGroupHeartbeatResponse:
    tasks = (hbr.TaskIds("0", (0, 2)), hbr.TaskIds("1", (1,)))
    return hbr.StreamsGroupHeartbeatResponse(
        throttle_time_ms=1, error_code=0, error_message=None, member_id="m", member_epoch=4,
        heartbeat_interval_ms=5000, acceptable_recovery_lag_legacy=10 if version == 0 else 0,
        task_offset_interval_ms=60000, acceptable_recovery_lag=-1 if version == 0 else 10_000,
        status=(hbr.Status(3, "Internal topics are missing: x"),), active_tasks=tasks, standby_tasks=(),
        warmup_tasks=None, topology_description_required=version >= 1, endpoint_information_epoch=2,
        partitions_by_user_endpoint=(hbr.EndpointToPartitions(
            hbr.Endpoint("h", 65535), (hbr.TopicPartition("t", (0, 1)),), ()),))


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_round_trips_in_every_version(version: int) -> None:
    message = _full_response(version)
    assert hbr.decode(hbr.encode(message, version), version) == message


def test_a_value_a_version_cannot_carry_is_refused_unless_ignorable() -> None:
    v1_only = _full_response(1)
    with pytest.raises(UnsupportedVersionError, match="TopologyDescriptionRequired"):
        hbr.encode(v1_only, 0)
    # AcceptableRecoveryLag (v1+) is ignorable: dropped in v0, read back as its default
    lax = hbr.StreamsGroupHeartbeatResponse(member_id="m", acceptable_recovery_lag=5)
    assert hbr.decode(hbr.encode(lax, 0), 0).acceptable_recovery_lag == -1
    with pytest.raises(UnsupportedVersionError, match="has no version 2"):
        hbr.encode(lax, 2)


def test_describe_response_round_trips_with_nested_structs() -> None:
    member = sgd.Member(member_id="m", member_epoch=3, client_id="c", client_host="/1.2.3.4", process_id="p",
                        user_endpoint=sgd.Endpoint("h", 1), client_tags=(sgd.KeyValue("az", "a"),),
                        assignment=sgd.Assignment(active_tasks=(sgd.TaskIds("0", (1,)),)))
    group = sgd.DescribedGroup(group_id="g", group_state="Stable", group_epoch=7, members=(member,),
                               topology=sgd.Topology(epoch=0, subtopologies=None), assignor_name="sticky")
    message = sgd.StreamsGroupDescribeResponse(groups=(group,))
    for version in (0, 1):
        want = message if version else sgd.StreamsGroupDescribeResponse(
            groups=(sgd.DescribedGroup(**{**group.__dict__, "assignor_name": None}),))
        assert sgd.decode(sgd.encode(message if version else want, version), version) == want


def test_nulls_where_a_version_forbids_them() -> None:
    assert hbr.decode(hbr.encode(hbr.StreamsGroupHeartbeatResponse(status=None), 0), 0).status is None
    with pytest.raises(UnsupportedVersionError, match="null where a string is required"):
        hbr.encode(hbr.StreamsGroupHeartbeatResponse(member_id=None), 0)  # type: ignore[arg-type]
    null_member_id = struct.pack(">ih", 0, 0) + b"\x00" + b"\x00"
    with pytest.raises(WireFormatError, match="MemberId"):
        hbr.decode(null_member_id, 0)


def test_truncated_input_is_a_format_error() -> None:
    data = hbr.encode(_full_response(1), 1)
    for cut in (0, 5, len(data) // 2, len(data) - 1):
        with pytest.raises(WireFormatError):
            hbr.decode(data[:cut], 1)


def test_an_array_longer_than_the_message_is_refused_before_allocating() -> None:
    with pytest.raises(WireFormatError, match="elements"):
        Reader(uvarint(1_000_000_001)).array_length(compact=True)


# -- what the checked-in specs do not exercise: every other type, tags inside structs, overrides -----------

SYNTHETIC = """
// a spec made for this test
{
  "apiKey": 999, "type": "request", "name": "SyntheticRequest",
  "validVersions": "0-3", "flexibleVersions": "2+",
  "fields": [
    { "name": "Flag", "type": "bool", "versions": "0+", "default": "true" },
    { "name": "Tiny", "type": "int8", "versions": "0+", "default": "0x7f" },
    { "name": "Port", "type": "uint16", "versions": "0+" },
    { "name": "Big", "type": "uint32", "versions": "1+", "ignorable": true },
    { "name": "Ratio", "type": "float64", "versions": "0+" },
    { "name": "Id", "type": "uuid", "versions": "0+" },
    { "name": "Blob", "type": "bytes", "versions": "0+", "nullableVersions": "1+" },
    { "name": "Recs", "type": "records", "versions": "0+" },
    { "name": "Legacy", "type": "string", "versions": "0+", "flexibleVersions": "none" },
    { "name": "Items", "type": "[]Item", "versions": "0+", "fields": [
      { "name": "Name", "type": "string", "versions": "0+" },
      { "name": "Note", "type": "string", "versions": "2+", "nullableVersions": "2+", "default": "null",
        "tag": 0, "taggedVersions": "2+" }
    ]},
    { "name": "Extra", "type": "Item", "versions": "3+", "tag": 5, "taggedVersions": "3+",
      "nullableVersions": "3+", "default": "null" },
    { "name": "Count", "type": "int64", "versions": "2+", "tag": 1, "taggedVersions": "2+", "default": -1 }
  ]
}
"""


@pytest.fixture(scope="module")
def synthetic() -> types.ModuleType:
    source = generate_module(parse_spec(SYNTHETIC), "a test spec")
    module = types.ModuleType("synthetic_codec")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, "synthetic_codec.py", "exec"), module.__dict__)
    return module


def test_defaults_from_the_spec(synthetic: types.ModuleType) -> None:
    m = synthetic.SyntheticRequest()
    assert m.flag is True and m.tiny == 127 and m.count == -1 and m.id == uuid.UUID(int=0)
    assert m.recs is None and m.blob == b"" and m.items == () and m.extra is None


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_type_round_trips(synthetic: types.ModuleType, version: int) -> None:
    item = synthetic.Item(name="a", note="n" if version >= 2 else None)
    m = synthetic.SyntheticRequest(
        flag=False, tiny=-3, port=65535, big=2**32 - 1 if version >= 1 else 0, ratio=0.25, id=uuid.uuid4(),
        blob=None if version >= 1 else b"\x00\x01", recs=b"records", legacy="old", items=(item, item),
        extra=item if version >= 3 else None, count=7 if version >= 2 else -1)
    assert synthetic.decode(synthetic.encode(m, version), version) == m


def test_tagged_fields_and_the_override_in_bytes(synthetic: types.ModuleType) -> None:
    m = synthetic.SyntheticRequest(port=1, legacy="x", recs=b"", items=(synthetic.Item(name="a", note="z"),),
                                   count=9)
    data = synthetic.encode(m, 2)
    r = Reader(data)
    assert r.boolean() is True and r.int8() == 127 and r.uint16() == 1 and r.uint32() == 0
    assert r.float64() == 0.0 and r.uuid() == uuid.UUID(int=0)
    assert r.byte_array(compact=True) == b"" and r.byte_array(compact=True) == b""
    assert r.string(compact=False) == "x"  # flexibleVersions "none": int16 length in a flexible version
    assert r.array_length(compact=True) == 1 and r.string(compact=True) == "a"
    assert r.tagged_fields() == [(0, _cstr("z"))]    # the item's own tagged Note
    assert r.tagged_fields() == [(1, struct.pack(">q", 9))]  # Count; Extra is null (its default): absent
    assert r.remaining == 0


def test_a_tagged_value_is_skipped_in_versions_before_its_tag(synthetic: types.ModuleType) -> None:
    with pytest.raises(UnsupportedVersionError, match="Count"):
        synthetic.encode(synthetic.SyntheticRequest(recs=b"", count=3), 1)
    # Big (v1+) is ignorable: dropped silently in v0
    assert synthetic.decode(synthetic.encode(synthetic.SyntheticRequest(recs=b"", big=5), 0), 0).big == 0
    # a records field is null by default, and null only where the spec allows it
    with pytest.raises(UnsupportedVersionError, match="Recs cannot be null in version 0"):
        synthetic.encode(synthetic.SyntheticRequest(), 0)


def test_writer_refuses_values_that_do_not_fit() -> None:
    with pytest.raises(UnsupportedVersionError):
        Writer().uint16(70000)
    with pytest.raises(UnsupportedVersionError):
        Writer().string("x" * 40000, compact=False)
