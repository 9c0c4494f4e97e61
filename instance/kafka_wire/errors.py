"""Errors of the wire layer: bytes that do not decode, a message a version cannot carry, a broker
that cannot be reached or answers out of turn."""

from __future__ import annotations

from instance.errors import StreamsException


class WireError(StreamsException):
    """Base of the wire layer's errors."""


class WireFormatError(WireError):
    """Bytes that are not a valid encoding of the message (truncated, negative length, bad UTF-8)."""


class UnsupportedVersionError(WireError):
    """A message holds a value that the chosen version cannot carry (a field it lacks, a null it
    does not allow), so encoding it would lose information silently."""


class SpecError(WireError):
    """A message spec the generator does not understand."""


class BrokerConnectionError(WireError):
    """No connection to a broker, a broken one, a timeout, or an answer to another request."""


class ApiNotOfferedError(WireError):
    """The broker does not offer the API, or none of the versions our codecs speak."""

    def __init__(self, api: str, where: str, offered: tuple[int, int] | None, ours: tuple[int, int]) -> None:
        said = "does not offer it" if offered is None else f"offers versions {offered[0]}-{offered[1]}"
        super().__init__(f"broker {where} cannot take {api} (versions {ours[0]}-{ours[1]} here): it {said}")
        self.api = api
        self.offered = offered
