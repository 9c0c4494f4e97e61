"""Wire framing of the hand-made Kafka requests in instance.runtime.group_admin (no broker).

Expected bytes are spelled out field by field with struct, independently of the encoders."""

from __future__ import annotations

import socket
import struct

import pytest

from instance.errors import StreamsException
from instance.runtime.group_admin import (
    FIND_COORDINATOR,
    LEAVE_GROUP,
    GroupAdminError,
    GroupMember,
    decode_api_versions,
    decode_find_coordinator,
    decode_leave_group,
    decode_list_transactions,
    encode_find_coordinator,
    encode_leave_group,
    encode_list_transactions,
    encode_request,
    error_name,
    pick_version,
    remove_members,
)


def s16(text: str | None) -> bytes:
    """A Kafka STRING / NULLABLE_STRING: int16 length, then UTF-8 bytes (-1: null)."""
    if text is None:
        return b"\xff\xff"
    return struct.pack(">h", len(text.encode())) + text.encode()


DYNAMIC = GroupMember("m-1", "client-1", None, "/10.0.0.1")
STATIC = GroupMember("m-2", "client-2", "inst-2", "/10.0.0.2")


def test_request_header_v1_with_size_prefix() -> None:
    frame = encode_request(13, 3, 7, b"BODY", client_id="me")
    header = struct.pack(">hhi", 13, 3, 7) + b"\x00\x02me"
    assert frame == struct.pack(">i", len(header) + 4) + header + b"BODY"


def test_flexible_request_header_v2_adds_empty_tagged_fields() -> None:
    frame = encode_request(66, 0, 7, b"BODY", client_id="me", flexible=True)
    header = struct.pack(">hhi", 66, 0, 7) + b"\x00\x02me" + b"\x00"  # client id stays a STRING
    assert frame == struct.pack(">i", len(header) + 4) + header + b"BODY"


def test_list_transactions_v0_state_filter_as_compact_array() -> None:
    # COMPACT_ARRAY length is N+1 as an unsigned varint; COMPACT_STRING length is bytes+1
    assert encode_list_transactions(["Ongoing"]) == b"\x02" + b"\x08Ongoing" + b"\x01" + b"\x00"
    assert encode_list_transactions([]) == b"\x01\x01\x00"


def test_decode_list_transactions_skips_tagged_fields() -> None:
    tid = "app-inst-1-" + "ab" * 4 + "é" * 70  # 152 bytes: a two-byte varint length
    raw = tid.encode()
    state = b"\x08Ongoing"
    body = (b"\x01\x05\x02hi"  # response header: one tagged field (tag 5, 2 bytes)
            + struct.pack(">ih", 0, 0) + b"\x02\x04Bad"  # throttle, error, unknown_state_filters
            + b"\x03"  # two transaction states
            + bytes([(len(raw) + 1) & 0x7F | 0x80, (len(raw) + 1) >> 7]) + raw + struct.pack(">q", 4242)
            + state + b"\x00"
            + b"\x03t2" + struct.pack(">q", -1) + b"\x06Empty" + b"\x00"
            + b"\x00")
    assert decode_list_transactions(body) == (0, [(tid, 4242, "Ongoing"), ("t2", -1, "Empty")])
    with pytest.raises(GroupAdminError):
        decode_list_transactions(body[:20])


def test_find_coordinator_key_type_only_from_v1() -> None:
    assert encode_find_coordinator("grp", 0) == s16("grp")
    assert encode_find_coordinator("grp", 2) == s16("grp") + b"\x00"  # key type GROUP


def test_leave_group_v0_to_v2_name_one_member() -> None:
    for version in (0, 1, 2):
        assert encode_leave_group("grp", [DYNAMIC], version) == s16("grp") + s16("m-1")


def test_leave_group_v3_names_every_member_with_nullable_instance_id() -> None:
    expected = s16("grp") + struct.pack(">i", 2) + s16("m-1") + s16(None) + s16("m-2") + s16("inst-2")
    assert encode_leave_group("grp", [DYNAMIC, STATIC], 3) == expected


def test_non_ascii_strings_are_length_prefixed_in_bytes() -> None:
    assert encode_find_coordinator("grüppe", 0) == b"\x00\x07gr\xc3\xbcppe"


def test_decode_api_versions() -> None:
    body = struct.pack(">hi", 0, 3) + struct.pack(">hhh", 18, 0, 3) + struct.pack(">hhh", 10, 0, 4) \
        + struct.pack(">hhh", 13, 1, 5)
    assert decode_api_versions(body) == (0, {18: (0, 3), 10: (0, 4), 13: (1, 5)})
    assert decode_api_versions(struct.pack(">hi", 35, 0)) == (35, {})


def test_decode_find_coordinator_v0_and_v1() -> None:
    v0 = struct.pack(">hi", 0, 3) + s16("broker-3") + struct.pack(">i", 9092)
    assert decode_find_coordinator(v0, 0) == (0, 3, "broker-3", 9092)
    v1 = struct.pack(">ih", 0, 15) + s16("not yet") + struct.pack(">i", -1) + s16("") + struct.pack(">i", -1)
    assert decode_find_coordinator(v1, 1) == (15, -1, "", -1)
    v2 = struct.pack(">ih", 100, 0) + s16(None) + struct.pack(">i", 1) + s16("127.0.0.1") + struct.pack(">i", 19092)
    assert decode_find_coordinator(v2, 2) == (0, 1, "127.0.0.1", 19092)


def test_decode_leave_group_per_version() -> None:
    assert decode_leave_group(struct.pack(">h", 25), 0) == (25, [])
    assert decode_leave_group(struct.pack(">ih", 0, 0), 2) == (0, [])
    v3 = struct.pack(">ihi", 0, 0, 2) + s16("m-1") + s16(None) + struct.pack(">h", 0) \
        + s16("m-2") + s16("inst-2") + struct.pack(">h", 82)
    assert decode_leave_group(v3, 3) == (0, [("m-1", None, 0), ("m-2", "inst-2", 82)])
    assert decode_leave_group(struct.pack(">ihi", 0, 16, 0), 3) == (16, [])


def test_truncated_response_is_a_group_admin_error() -> None:
    with pytest.raises(GroupAdminError, match="truncated"):
        decode_find_coordinator(struct.pack(">hi", 0, 3) + b"\x00\x09broker", 0)
    with pytest.raises(GroupAdminError, match="truncated"):
        decode_leave_group(b"\x00", 0)


def test_pick_version_prefers_the_highest_non_flexible_version() -> None:
    supported = {FIND_COORDINATOR: (0, 4), LEAVE_GROUP: (0, 5)}
    assert pick_version(supported, FIND_COORDINATOR, 2) == 2
    assert pick_version(supported, LEAVE_GROUP, 3) == 3
    assert pick_version({LEAVE_GROUP: (0, 2)}, LEAVE_GROUP, 3) == 2  # v3 unknown: one member per request
    assert pick_version({LEAVE_GROUP: (4, 5)}, LEAVE_GROUP, 3) is None  # flexible versions only
    assert pick_version({}, LEAVE_GROUP, 3) is None


def test_error_names_are_kafkas() -> None:
    assert error_name(0) == "NONE"
    assert error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert error_name(25) == "UNKNOWN_MEMBER_ID"
    assert error_name(82) == "FENCED_INSTANCE_ID"
    assert error_name(16) == "NOT_COORDINATOR"
    assert error_name(9999) == "ERROR_9999"


def test_unreachable_broker_raises_naming_broker_and_group() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(GroupAdminError) as caught:
        remove_members(f"127.0.0.1:{port}", "my-group", [DYNAMIC], timeout=2.0)
    assert f"127.0.0.1:{port}" in str(caught.value) and "my-group" in str(caught.value)
    assert isinstance(caught.value, StreamsException)


def test_a_static_member_named_by_instance_id_is_matched_as_either_broker_answers() -> None:
    from instance.runtime.group_admin import GroupMember, _answer_for

    asked = [GroupMember("", "", "pod-3-1", ""), GroupMember("", "", "pod-4-1", "")]
    # Apache Kafka echoes what was asked (member id "", the instance id)
    kafka = [("", "pod-4-1", 0), ("", "pod-3-1", 25)]
    assert [_answer_for(m, i, kafka, 2) for i, m in enumerate(asked)] == [25, 0]
    # the dev broker answers under the member ids it had, without the instance ids, in request order
    dev = [("c-1-abc", None, 0), ("c-2-def", None, 25)]
    assert [_answer_for(m, i, dev, 2) for i, m in enumerate(asked)] == [0, 25]
    # a member named by its member id is only ever matched by it
    assert _answer_for(GroupMember("m-9", "", None, ""), 0, dev[:1], 1) is None
