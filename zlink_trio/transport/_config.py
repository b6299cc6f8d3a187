"""The mesh transport's configuration: one frozen value, checked when it is built.

Theory of operation
-------------------
Every knob of :func:`~zlink_trio.transport.open_transport` lives in
:class:`TransportConfig`. Values that cannot work (a short secret, a zero
timeout, a cap below one) raise :class:`InvalidConfiguration` at
construction, so a node fails at startup, not at its first connection. The
secret never appears in an error message or a ``repr``.
"""

from __future__ import annotations

import math
import os
import ssl
from typing import TYPE_CHECKING, Any

import attrs

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.wire.handshake import MIN_SECRET_BYTES, LocalIdentity

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("TransportConfig",)


def _check_identity(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, LocalIdentity):
        raise InvalidConfiguration(
            f"identity must be a zlink_trio.wire.handshake.LocalIdentity, got {value!r}"
        )


def _check_secret(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # The handshake machines refuse anything shorter, so refuse it here, at startup.
    if type(value) is not bytes or len(value) < MIN_SECRET_BYTES:
        raise InvalidConfiguration(
            f"secret must be bytes of at least {MIN_SECRET_BYTES} bytes (an HMAC-SHA256 key "
            "shared by every node of the cluster); generate one with os.urandom(32)"
        )


def _check_positive_time(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidConfiguration(
            f"{attribute.name} must be a finite number of seconds above 0, got {value!r}"
        )


def _check_positive_int(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not int or value < 1:
        raise InvalidConfiguration(f"{attribute.name} must be an int of at least 1, got {value!r}")


def _check_port(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not int or not 0 <= value <= 65535:
        raise InvalidConfiguration(
            f"listen_port must be an int in 0..65535 (0 = any free port), got {value!r}"
        )


def _check_host(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidConfiguration(f"listen_host must be a non-empty str, got {value!r}")


def _check_ssl(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, ssl.SSLContext):
        raise InvalidConfiguration(f"{attribute.name} must be None or an ssl.SSLContext")


def _check_callable(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not callable(value):
        raise InvalidConfiguration("random_bytes must be a callable returning n random bytes")


@attrs.frozen(kw_only=True)
class TransportConfig:
    """How a node's mesh transport listens, dials, authenticates and keeps links alive.

    ``identity.max_frame_bytes`` is the largest frame this node accepts.
    ``secret`` is the cluster's shared HMAC-SHA256 key (at least
    :data:`~zlink_trio.wire.handshake.MIN_SECRET_BYTES` bytes).
    ``listen_port=0`` binds any free port; the bound one is in
    :attr:`MeshTransport.endpoint`. With ``server_ssl_context`` the server
    speaks ``wss://``; ``client_ssl_context`` is used to dial ``wss://``
    endpoints (the system default context when ``None``).

    ``handshake_timeout`` bounds a whole authentication (TLS, websocket
    upgrade and HELLO/WELCOME on the server; HELLO/WELCOME and ``check_peer``
    on the client); ``connect_timeout`` bounds dialling up to the websocket
    upgrade. At most ``max_unauthenticated`` connections may be
    authenticating at once, shared fairly between source addresses: when all
    are taken, a newcomer evicts the oldest pending handshake of the source
    holding the most, if that source holds at least two more than the
    newcomer's, and is otherwise closed as soon as it is accepted (no cap per
    source: peers sharing an address, as on loopback, are never refused for
    it; see ``_handshake_slots``). At
    most ``max_links`` links (inbound and outbound) are open at once: a
    connection beyond it is closed when accepted, a dial beyond it is
    :class:`Unavailable`. A
    link that received nothing for ``keepalive_interval`` seconds sends a Ping;
    after three intervals of silence it is closed. A link whose queued,
    unsent bytes would exceed ``max_send_buffer_bytes`` is closed (its peer
    is not reading).
    """

    identity: LocalIdentity = attrs.field(validator=_check_identity)
    secret: bytes = attrs.field(validator=_check_secret, repr=False)
    listen_host: str = attrs.field(default="127.0.0.1", validator=_check_host)
    listen_port: int = attrs.field(default=0, validator=_check_port)
    server_ssl_context: ssl.SSLContext | None = attrs.field(default=None, validator=_check_ssl)
    client_ssl_context: ssl.SSLContext | None = attrs.field(default=None, validator=_check_ssl)
    handshake_timeout: float = attrs.field(default=5.0, validator=_check_positive_time)
    connect_timeout: float = attrs.field(default=5.0, validator=_check_positive_time)
    max_unauthenticated: int = attrs.field(default=16, validator=_check_positive_int)
    max_links: int = attrs.field(default=1024, validator=_check_positive_int)
    keepalive_interval: float = attrs.field(default=10.0, validator=_check_positive_time)
    max_send_buffer_bytes: int = attrs.field(
        default=64 * 1024 * 1024, validator=_check_positive_int
    )
    random_bytes: Callable[[int], bytes] = attrs.field(
        default=os.urandom, validator=_check_callable, repr=False
    )
