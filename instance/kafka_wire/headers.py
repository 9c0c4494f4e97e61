"""Request and response headers: which header version goes with an API version, and the frame.

A request of a flexible API version carries header v2 (tagged fields after the client id), else v1;
its response carries header v1 (tagged fields after the correlation id), else v0. ApiVersions'
response is the exception: always header v0, so that a client that asked in a version the broker
does not know can still read the answer (Kafka's rule, KIP-511).
"""

from __future__ import annotations

import struct

from instance.kafka_wire.errors import BrokerConnectionError
from instance.kafka_wire.generated import request_header, response_header
from instance.kafka_wire.primitives import Reader, Writer

API_VERSIONS_KEY = 18


def request_header_version(flexible: bool) -> int:
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    return 1 if flexible and api_key != API_VERSIONS_KEY else 0


def frame_request(api_key: int, version: int, correlation_id: int, client_id: str, flexible: bool,
                  body: bytes) -> bytes:
    """The size-prefixed request: header, then ``body`` (already encoded in ``version``)."""
    w = Writer()
    request_header.write(w, request_header.RequestHeader(api_key, version, correlation_id, client_id),
                         request_header_version(flexible))
    w.raw(body)
    payload = w.getvalue()
    return struct.pack(">i", len(payload)) + payload


def open_response(frame: bytes, api_key: int, flexible: bool, correlation_id: int, where: str) -> Reader:
    """A Reader positioned at the body of ``frame`` (the response without its size), after checking
    that it answers ``correlation_id``."""
    r = Reader(frame)
    header = response_header.read(r, response_header_version(api_key, flexible))
    if header.correlation_id != correlation_id:
        raise BrokerConnectionError(f"broker {where} answered request {header.correlation_id}, "
                                    f"not {correlation_id}")
    return r
