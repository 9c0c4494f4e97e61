"""What is at an endpoint's address when gRPC could not reach it, asked of the operating system
with typed answers (``ConnectionRefusedError``, an ``ssl`` handshake) rather than read from
gRPC's transport error text, which says it only in prose."""

from __future__ import annotations

import enum
import socket
import ssl
from collections.abc import Iterable

#: how long one probe waits for a connection or a handshake: it runs only once gRPC has failed
PROBE_TIMEOUT_S = 1.0


class Listener(enum.Enum):
    """What answered a TCP connection to an endpoint."""

    NOTHING = "NOTHING"  # the connection was refused: no server listens there
    TLS = "TLS"  # a TLS handshake completed (whatever the certificate)
    PLAINTEXT = "PLAINTEXT"  # something accepted the connection but no TLS handshake
    UNKNOWN = "UNKNOWN"  # no answer in time, no route, an address that does not resolve


def address_of(endpoint: str) -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port`` too) as a socket address; None for any other target form."""
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def listener_at(endpoint: str, timeout: float = PROBE_TIMEOUT_S) -> Listener:
    """Who listens at ``endpoint``: nothing, a TLS server or something else (blocking, at most
    about twice ``timeout``)."""
    address = address_of(endpoint)
    if address is None:
        return Listener.UNKNOWN
    try:
        sock = socket.create_connection(address, timeout)
    except ConnectionRefusedError:
        return Listener.NOTHING
    except OSError:
        return Listener.UNKNOWN
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the question is whether it speaks TLS, not whom to trust
    try:
        with context.wrap_socket(sock, server_hostname=address[0]):
            return Listener.TLS
    except (ssl.SSLError, ConnectionError):
        return Listener.PLAINTEXT
    except OSError:
        return Listener.UNKNOWN
    finally:
        sock.close()


def nothing_listens(endpoints: Iterable[str], timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Every one of ``endpoints`` (at least one) refused a TCP connection."""
    addresses = [address_of(e) for e in endpoints]
    if not addresses or None in addresses:
        return False
    for address in addresses:
        assert address is not None
        try:
            socket.create_connection(address, timeout).close()
        except ConnectionRefusedError:
            continue
        except OSError:
            return False
        return False
    return True
