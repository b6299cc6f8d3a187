"""The frames of the link itself: the handshake (commands 1..3) and keepalive (4, 5).

Theory of operation
-------------------
A link opens with CHALLENGE, HELLO and WELCOME (the exchange and its MACs are
in :mod:`zlink_trio.wire.handshake`); HELLO and WELCOME introduce their sender
with the same fields, :class:`_Introduction`, which is what both MACs sign.
Nonces and MACs are exactly :data:`NONCE_BYTES` long, and an announced
``max_frame_bytes`` is at least :data:`MIN_FRAME_BYTES`, so that every
handshake frame fits below any limit a node may announce. PING and PONG
carry an opaque ``u64`` token. No frame here carries an application body.

Constructors raise :class:`LocalProtocolError` for a value that cannot be
sent (see :mod:`zlink_trio.wire._frame_types`).

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import attrs

from zlink_trio.core.errors import LocalProtocolError
from zlink_trio.core.identity import NodeRid
from zlink_trio.wire._frame_checks import T, check_gen, check_text8, check_u64, int_in
from zlink_trio.wire._frame_fields import MAX_U32, NONCE_BYTES

__all__ = ("MIN_FRAME_BYTES", "Challenge", "Hello", "Ping", "Pong", "Welcome")

#: Smallest frame-size limit a node may announce or configure; every handshake frame fits.
MIN_FRAME_BYTES = 1024


def _check_nonce(instance: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != NONCE_BYTES or type(value) is not bytes:
        raise LocalProtocolError(f"{attribute.name} must be exactly {NONCE_BYTES} bytes")


def _check_frame_limit(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, MIN_FRAME_BYTES, MAX_U32):
        raise LocalProtocolError(
            f"{attribute.name} must be an int in {MIN_FRAME_BYTES}..{MAX_U32}, got {value!r}"
        )


def _check_rid(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not isinstance(value, NodeRid):
        raise LocalProtocolError(f"{attribute.name} must be a NodeRid, got {value!r}")


@attrs.frozen(kw_only=True)
class Challenge:
    """Command 1: the server's fresh nonce, sent first on every accepted link."""

    nonce: bytes = attrs.field(validator=_check_nonce)


@attrs.frozen(kw_only=True)
class _Introduction:
    """The fields HELLO and WELCOME share (each side introduces itself the same way).

    ``mac`` is opaque here (HMAC-SHA256 over the transcript, computed by the
    handshake); ``max_frame_bytes`` is the largest frame the sender accepts.
    """

    node_id: str = attrs.field(validator=check_text8)
    node_rid: NodeRid = attrs.field(validator=_check_rid)
    lifecycle_generation: int = attrs.field(validator=check_gen)
    mesh: str = attrs.field(validator=check_text8)
    max_frame_bytes: int = attrs.field(validator=_check_frame_limit)
    nonce: bytes = attrs.field(validator=_check_nonce)
    mac: bytes = attrs.field(validator=_check_nonce)


@attrs.frozen(kw_only=True)
class Hello(_Introduction):
    """Command 2: the client introduces itself."""


@attrs.frozen(kw_only=True)
class Welcome(_Introduction):
    """Command 3: the server introduces itself and proves the key; same fields as HELLO."""


@attrs.frozen(kw_only=True)
class Ping:
    """Command 4: keepalive probe; ``token`` is any u64, echoed by PONG."""

    token: int = attrs.field(validator=check_u64)


@attrs.frozen(kw_only=True)
class Pong:
    """Command 5: keepalive answer carrying the PING's token."""

    token: int = attrs.field(validator=check_u64)
