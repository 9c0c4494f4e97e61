"""Watch without a broker: request checks (what is watched, which partitions, the resume token) and
the status each refusal maps to. The stream itself is tested on a cluster (tests/integration)."""

from __future__ import annotations

import grpc
import pytest

from instance.errors import StoreNotLoggedException, TooManyWatchesException, UnknownStateStoreException
from instance.runtime.internal_topics import plan
from instance.runtime.kafka_streams import KafkaStreams
from instance.serde import StringSerde
from instance.server.status import to_status
from instance.server.watch import plan_watch, start_offsets
from instance.topology import Materialized, StreamsBuilder
from kernel.partitioner import default_partition
from kernel.rpc import iqmesh_pb2 as pb
from kernel.tokens import encode_json_token
from kernel.watch_token import MAX_WATCH_TOKEN_CHARS, WatchToken, watch_fingerprint
from router.client.watch_client import watch_request

N = 4


@pytest.fixture(scope="module")
def streams() -> KafkaStreams:
    """A client that was never started, with the topic layout a start would compute."""
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    words = b.stream("lines").flat_map_values(str.split)
    words.group_by(lambda _k, w: w).count("counts")
    words.group_by(lambda _k, w: w[:1]).count(Materialized("initials", logging_enabled=False))
    topology = b.build()
    s = KafkaStreams(topology, {"application.id": "app", "bootstrap.servers": "unused:9092"})
    s.layout = plan(topology, "app", {"lines": N})[0]
    return s


def _key(text: str) -> pb.Key:
    return pb.Key(text=text)


def test_a_key_watch_reads_the_keys_partition_and_a_prefix_or_all_every_partition(streams: KafkaStreams) -> None:
    p, resumed = plan_watch(streams, watch_request("counts", key=_key("kafka")))
    assert (p.kind, p.key, p.topic, resumed) == ("KEY", b"kafka", "app-counts-changelog", None)
    assert list(p.start) == [default_partition(b"kafka", N)]
    assert p.matches(b"kafka") and not p.matches(b"kafkas") and not p.matches(None)
    p, _ = plan_watch(streams, watch_request("counts", prefix=_key("ka")))
    assert (p.kind, sorted(p.start)) == ("PREFIX", list(range(N)))
    assert p.matches(b"kafka") and not p.matches(b"k")
    p, _ = plan_watch(streams, watch_request("counts", all_keys=True))
    assert (p.kind, sorted(p.start)) == ("ALL", list(range(N)))
    assert p.matches(b"") and p.matches(b"x") and not p.matches(None)


def test_a_token_resumes_only_the_watch_that_issued_it(streams: KafkaStreams) -> None:
    p, _ = plan_watch(streams, watch_request("counts", all_keys=True))
    token = WatchToken(p.fingerprint, {0: 5, 1: 0, 2: 7, 3: 1}).encode()
    assert WatchToken.decode(token).advanced(2, 9).offsets == {0: 5, 1: 0, 2: 9, 3: 1}
    _, resumed = plan_watch(streams, watch_request("counts", all_keys=True, resume_token=token))
    assert resumed == {0: 5, 1: 0, 2: 7, 3: 1}
    with pytest.raises(ValueError, match="another watch"):
        plan_watch(streams, watch_request("counts", prefix=_key(""), resume_token=token))
    partial = WatchToken(p.fingerprint, {0: 5}).encode()
    with pytest.raises(ValueError, match="covers partitions"):
        plan_watch(streams, watch_request("counts", all_keys=True, resume_token=partial))


@pytest.mark.parametrize("token", [
    "garbage", "", "x" * (MAX_WATCH_TOKEN_CHARS + 1),
    encode_json_token({"w": "0" * 16}),
    encode_json_token({"w": "0" * 15, "o": {"0": 1}}),
    encode_json_token({"w": "0" * 16, "o": {}}),
    encode_json_token({"w": "0" * 16, "o": {"-1": 1}}),
    encode_json_token({"w": "0" * 16, "o": {"0": -1}}),
    encode_json_token({"w": "0" * 16, "o": {"0": True}}),
    encode_json_token({"w": "0" * 16, "o": {"0": 1.5}}),
    encode_json_token({"w": "0" * 16, "o": {"9" * 5000: 1}}),
    encode_json_token({"w": "0" * 16, "o": [1]}),
])
def test_malformed_tokens_are_value_errors(token: str) -> None:
    with pytest.raises(ValueError):
        WatchToken.decode(token)


def test_start_offsets_from_the_end_the_beginning_or_a_token(streams: KafkaStreams) -> None:
    p, _ = plan_watch(streams, watch_request("counts", prefix=_key("a")))
    marks = {q: (q, 10 + q) for q in range(N)}  # (log start, end) per partition

    def watermarks(topic: str, partition: int) -> tuple[int, int]:
        assert topic == "app-counts-changelog"
        return marks[partition]
    assert start_offsets(p, None, False, watermarks) == {q: 10 + q for q in range(N)}
    assert start_offsets(p, None, True, watermarks) == {q: q for q in range(N)}
    resumed = {q: 5 + q for q in range(N)}
    assert start_offsets(p, resumed, False, watermarks) == resumed
    with pytest.raises(ValueError, match="ahead of the changelog"):
        start_offsets(p, {**resumed, 2: 13}, False, watermarks)
    with pytest.raises(ValueError, match="too old"):
        start_offsets(p, {**resumed, 3: 2}, False, watermarks)


def test_bad_requests_and_their_status(streams: KafkaStreams) -> None:
    def status(request: pb.WatchRequest) -> grpc.StatusCode:
        with pytest.raises(Exception) as e:
            plan_watch(streams, request)
        return to_status(e.value).code

    invalid = grpc.StatusCode.INVALID_ARGUMENT
    assert status(pb.WatchRequest(store="counts")) is invalid  # nothing to watch
    assert status(pb.WatchRequest(store="counts", all=False)) is invalid
    assert status(pb.WatchRequest(all=True)) is invalid  # no store
    assert status(pb.WatchRequest(store="counts", key=pb.Key())) is invalid
    assert status(pb.WatchRequest(store="counts", key=pb.Key(raw=b"\xff\xfe"))) is invalid  # not a string key
    assert status(pb.WatchRequest(store="counts", all=True, resume_token="nope")) is invalid
    assert status(pb.WatchRequest(store="counts", prefix=pb.Key(raw=b"k" * (1 << 20 + 1)))) is invalid  # too long
    assert status(pb.WatchRequest(store="nope", all=True)) is grpc.StatusCode.NOT_FOUND
    with pytest.raises(UnknownStateStoreException):
        plan_watch(streams, pb.WatchRequest(store="nope", all=True))
    with pytest.raises(StoreNotLoggedException, match="no changelog"):
        plan_watch(streams, pb.WatchRequest(store="initials", all=True))
    assert status(pb.WatchRequest(store="initials", all=True)) is grpc.StatusCode.FAILED_PRECONDITION
    assert to_status(TooManyWatchesException("busy")).code is grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(ValueError, match="exactly one"):
        watch_request("counts", key=_key("a"), all_keys=True)


def test_tokens_are_the_json_token_codec_of_their_document() -> None:
    offsets = {3: 7, 0: 2**63 - 1, 12: 0}
    token = WatchToken("0123456789abcdef", offsets).encode()
    assert token == encode_json_token({"w": "0123456789abcdef", "o": {"0": 2**63 - 1, "3": 7, "12": 0}})
    assert WatchToken.decode(token).offsets == offsets


def test_fingerprints_tell_watches_apart() -> None:
    prints = {watch_fingerprint(s, k, b) for s in ("a", "b") for k in ("KEY", "PREFIX", "ALL") for b in (b"", b"x")}
    assert len(prints) == 12
    assert watch_fingerprint("ab", "KEY", b"") != watch_fingerprint("a", "KEY", b"b")
