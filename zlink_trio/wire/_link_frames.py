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
sent (see :mod:`zlink_trio.wire._frame_types`). Each class is its layout: its
attrs fields, in order, with their encodings (:mod:`zlink_trio.wire._frame_layouts`).

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from zlink_trio.wire._frame_layouts import (
    GEN,
    MAX_U32,
    NONCE_BYTES,
    RID,
    TEXT8,
    U64,
    Int,
    Raw,
    wire,
)

if TYPE_CHECKING:
    from zlink_trio.core.identity import NodeRid

__all__ = ("MIN_FRAME_BYTES", "Challenge", "Hello", "Ping", "Pong", "Welcome")

#: Smallest frame-size limit a node may announce or configure; every handshake frame fits.
MIN_FRAME_BYTES: Final = 1024

_NONCE: Final = Raw(NONCE_BYTES)
_LIMIT: Final = Int(
    "I", MIN_FRAME_BYTES, MAX_U32,
    refusal=lambda what, value: f"{what} is {value}, below the {MIN_FRAME_BYTES}-byte minimum")


@attrs.frozen(kw_only=True)
class Challenge:
    """Command 1: the server's fresh nonce, sent first on every accepted link."""

    nonce: bytes = attrs.field(validator=_NONCE.validator, metadata=wire(_NONCE, "nonce"))


@attrs.frozen(kw_only=True)
class _Introduction:
    """The fields HELLO and WELCOME share (each side introduces itself the same way).

    ``mac`` is opaque here (HMAC-SHA256 over the transcript, computed by the
    handshake); ``max_frame_bytes`` is the largest frame the sender accepts.
    """

    node_id: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "node id"))
    node_rid: NodeRid = attrs.field(validator=RID.validator, metadata=wire(RID, "node rid"))
    lifecycle_generation: int = attrs.field(validator=GEN.validator,
                                            metadata=wire(GEN, "lifecycle generation"))
    mesh: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "mesh"))
    max_frame_bytes: int = attrs.field(validator=_LIMIT.validator,
                                       metadata=wire(_LIMIT, "max frame bytes"))
    nonce: bytes = attrs.field(validator=_NONCE.validator, metadata=wire(_NONCE, "nonce"))
    mac: bytes = attrs.field(validator=_NONCE.validator, metadata=wire(_NONCE, "mac"))


@attrs.frozen(kw_only=True)
class Hello(_Introduction):
    """Command 2: the client introduces itself."""


@attrs.frozen(kw_only=True)
class Welcome(_Introduction):
    """Command 3: the server introduces itself and proves the key; same fields as HELLO."""


@attrs.frozen(kw_only=True)
class Ping:
    """Command 4: keepalive probe; ``token`` is any u64, echoed by PONG."""

    token: int = attrs.field(validator=U64.validator, metadata=wire(U64, "token"))


@attrs.frozen(kw_only=True)
class Pong:
    """Command 5: keepalive answer carrying the PING's token."""

    token: int = attrs.field(validator=U64.validator, metadata=wire(U64, "token"))
