"""Command 39 (route kind 1) and its success reply, written straight from a call's fields.

Theory of operation
-------------------
Every sequential remote request is one command 39 to a Ready Spot out and one
command 20 back. Building a :class:`~._frame_types.SpotMessage` (its route, its
validators) or a :class:`~._frame_types.Reply` only for the encoder to take it
apart again costs more than writing the bytes, so the two hot writes take the
fields themselves:

* :func:`ready_route_bytes` writes route kind 1 from a validated
  :class:`ReadyRoute` -- the part every call to one Spot repeats until the Spot
  moves, so the caller keeps these bytes with its cached route and builds the
  route object once, not per call. :func:`owner_bytes` is the same for the
  source's lifecycle fence.
* :func:`encode_ready_message` and :func:`encode_message_reply` check every
  field they write that is not such pre-written bytes -- the same checks the
  frames' validators and :func:`~zlink_trio.wire.frames.encode` run, raising
  :class:`LocalProtocolError` -- and return exactly the general encoder's bytes
  for the same frame (``tests/wire/test_direct_frames.py`` compares them). The
  frame-size limit is the link's to check.

Reading is unchanged: the receiver decodes the bytes with the full decoder's
fast path (:mod:`._fast_frames`), which refuses whatever the general decoder
would refuse.

Sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import struct
from typing import Final

from zlink_trio.core.errors import LocalProtocolError
from zlink_trio.core.identity import MAX_ID_BYTES
from zlink_trio.core.records import OwnerFence
from zlink_trio.wire._frame_fields import MAX_GEN, MAX_U64
from zlink_trio.wire._frame_types import Command, ReadyRoute
from zlink_trio.wire.codec import MAX_BODY_BYTES, EncodedMessage

__all__ = ("encode_message_reply", "encode_ready_message", "owner_bytes", "ready_route_bytes")

_Q: Final = struct.Struct(">Q")
_QQ: Final = struct.Struct(">QQ")
_QQQ: Final = struct.Struct(">QQQ")
_I: Final = struct.Struct(">I")
#: Header and route kind of a Ready call; header, result, code and answered command of a
#: 39's success reply (the correlation goes between).
_SPOT_HEADER: Final = b"ZL\x01" + bytes([Command.SPOT_MESSAGE])
_REPLY_HEADER: Final = b"ZL\x01" + bytes([Command.REPLY])
_SUCCESS_TAIL: Final = bytes((0, 0, 0, Command.SPOT_MESSAGE))  # result 0, code 0 (u16), 39
#: No source Spot ID, no metadata (a client call carries neither).
_NO_SOURCE_SPOT_NO_METADATA: Final = b"\x00\x00"


def _t8(text: str) -> bytes:
    raw = text.encode("utf-8")
    return bytes((len(raw),)) + raw


def owner_bytes(owner: OwnerFence) -> bytes:
    """The 24 bytes of a lifecycle fence (NodeRid, lifecycle generation)."""
    if not isinstance(owner, OwnerFence):
        raise LocalProtocolError(f"cannot encode the owner fence {owner!r}: it must be an "
                                 "OwnerFence(node_rid, lifecycle_generation)")
    return owner.node_rid.value + _Q.pack(owner.lifecycle_generation)


def ready_route_bytes(route: ReadyRoute) -> bytes:
    """Route kind 1's bytes: the kind, the Spot ID, both generations, the target's fence.

    ``route`` was validated when it was built (its constructor checks every field).
    """
    return (b"\x01" + _t8(route.spot_id)
            + _QQ.pack(route.object_generation, route.owner_generation)
            + owner_bytes(route.target))


def _payload_bytes(payload: EncodedMessage, what: str) -> bytes:
    """The payload's bytes (type name text8, u32 body size, body), checked like ``encode``."""
    if not isinstance(payload, EncodedMessage):
        raise LocalProtocolError(f"cannot encode {what}={payload!r}: it must be an "
                                 "EncodedMessage; build the frame from validated values")
    body = payload.body
    name = payload.type_name
    head = _NAMES.get(name) if type(name) is str else None
    if head is None:
        head = _name_bytes(name, payload, what)
    if type(body) is not bytes:
        raise LocalProtocolError(
            f"cannot encode {what}={payload!r}: its body must be bytes; build the frame from "
            "validated values")
    if len(body) > MAX_BODY_BYTES:
        raise LocalProtocolError(
            f"message body of {name!r} is {len(body)} bytes, above the {MAX_BODY_BYTES}-byte "
            "limit; send a smaller message or raise the limit")
    return head + _I.pack(len(body)) + body


#: The text8 bytes of the message type names written lately (a node sends few types).
_NAMES: Final[dict[str, bytes]] = {}
_NAMES_KEPT: Final = 1024


def _name_bytes(name: object, payload: EncodedMessage, what: str) -> bytes:
    """``name`` as text8, checked (1..255 UTF-8 bytes) and remembered."""
    try:
        raw = name.encode("utf-8") if type(name) is str else b""
    except UnicodeEncodeError:
        raw = b""
    if not 1 <= len(raw) <= MAX_ID_BYTES:
        raise LocalProtocolError(
            f"cannot encode {what}={payload!r}: it must be an EncodedMessage(type_name: "
            f"1..{MAX_ID_BYTES} UTF-8 bytes, body: bytes); build the frame from validated values")
    assert isinstance(name, str)
    if len(_NAMES) >= _NAMES_KEPT:
        _NAMES.clear()
    head = _NAMES[name] = bytes((len(raw),)) + raw
    return head


def encode_ready_message(route: bytes, operation_id: int, correlation: int, deadline_ms: int,
                         source: bytes, payload: EncodedMessage) -> bytes:
    """Command 39 on route kind 1 with no source Spot ID and no metadata.

    ``route`` is :func:`ready_route_bytes`, ``source`` :func:`owner_bytes` of the
    sender's lifecycle. The same bytes as ``encode(SpotMessage(route=...,
    operation_id=..., reply_correlation=correlation, deadline_ms=..., source=...,
    source_spot_id=None, metadata=None, payload=...))``. Raises
    :class:`LocalProtocolError` for a field out of range (an ID 0 or above 2**64-1,
    a deadline outside 1..2**63-1, a malformed payload, a body above the wire's limit).
    """
    if not (type(operation_id) is int and 1 <= operation_id <= MAX_U64
            and type(correlation) is int and 0 <= correlation <= MAX_U64
            and type(deadline_ms) is int and 1 <= deadline_ms <= MAX_GEN):
        raise LocalProtocolError(
            f"cannot encode a Spot message with operation_id={operation_id!r}, "
            f"reply_correlation={correlation!r}, deadline_ms={deadline_ms!r}: they must be "
            f"ints in 1..{MAX_U64}, 0..{MAX_U64} and 1..{MAX_GEN}; build the frame from "
            "validated values")
    return b"".join((_SPOT_HEADER, route, _QQQ.pack(operation_id, correlation, deadline_ms),
                     source, _NO_SOURCE_SPOT_NO_METADATA, _payload_bytes(payload, "payload")))


def encode_message_reply(correlation: int, reply: EncodedMessage | None) -> bytes:
    """Command 20 answering a 39 with success and ``reply`` (``None``: no reply value).

    The same bytes as ``encode(Reply(correlation=..., answers=Command.SPOT_MESSAGE,
    outcome=MessageOutcome(reply=reply)))``. Raises :class:`LocalProtocolError` for a
    correlation outside 1..2**64-1 or a malformed reply (as that constructor and
    ``encode``).
    """
    if not (type(correlation) is int and 1 <= correlation <= MAX_U64):
        raise LocalProtocolError(f"cannot encode correlation={correlation!r}: it must be an "
                                 f"int in 1..{MAX_U64} (0 is reserved); build the frame from "
                                 "validated values")
    value = b"\x00" if reply is None else b"\x01" + _payload_bytes(reply, "reply")
    return b"".join((_REPLY_HEADER, _Q.pack(correlation), _SUCCESS_TAIL, value))
