"""Fast paths of the frame codec for the two frames of every request: 39 and 20.

Theory of operation
-------------------
Every remote request is one Spot message (command 39) out and one reply (command 20)
back, so their encoding and decoding is on the hot path of the mesh.  The general codec
(:mod:`zlink_trio.wire.frames`) reads field by field through a checking
:class:`~._frame_fields.Reader` and builds frames through their validating
constructors; here the same layouts are read with precompiled :mod:`struct` formats at
computed offsets, and the frames are built without re-running validators on values this
module has just checked.  The owner fences and Ready routes of recent frames are kept
(bounded; each is immutable), since a link carries the same few in every frame: a
cached one is returned for the same bytes instead of being decoded again.

The fast paths are *partial*: the decoders return ``None`` for anything they do not
accept -- a success reply to 47, 48 or 60, a Message Follow relay (route kind 3: rare,
only in the Message Follow window after a relocation), any field out of range,
truncation, trailing bytes, invalid UTF-8 -- and the caller then runs the general
decoder, which produces the value or the precise :class:`RemoteProtocolError`; the
encoders return ``None`` for the same frames, which the general encoder then writes.
So for every input the result is exactly the general decoder's
(``tests/wire/test_fast_frames.py`` checks it on generated frames and mutations).  The
fast encoders write the same bytes as the general encoder (the golden byte tests run
through them); size limits are checked by the caller.

Sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import struct
from typing import Final, TypeVar

from zlink_trio.core.identity import NodeRid
from zlink_trio.core.records import OwnerFence
from zlink_trio.wire._frame_fields import MAX_GEN, MAX_METADATA_BYTES
from zlink_trio.wire._frame_types import (
    ActivationRoute,
    Command,
    Failure,
    MessageOutcome,
    ReadyRoute,
    Reply,
    SpotMessage,
)
from zlink_trio.wire.codec import EncodedMessage

__all__ = ("decode_reply", "decode_spot_message", "encode_reply", "encode_spot_message")

T = TypeVar("T")

_Q: Final = struct.Struct(">Q")
_QQ: Final = struct.Struct(">QQ")
_QQQ: Final = struct.Struct(">QQQ")
_I: Final = struct.Struct(">I")
_H: Final = struct.Struct(">H")
_REPLY_HEAD: Final = struct.Struct(">QBHB")
_ZERO_RID: Final = bytes(16)
_SPOT_HEADER: Final = b"ZL\x01" + bytes([Command.SPOT_MESSAGE])
_REPLY_HEADER: Final = b"ZL\x01" + bytes([Command.REPLY])
_ANSWERS: Final = {int(c): c for c in (Command.SPOT_MESSAGE, Command.USER_SPOT_CREATE,
                                       Command.USER_SPOT_CLOSE, Command.RELOCATE_SPOT)}
_new = object.__new__
_set = object.__setattr__


class _Refused(Exception):
    """The fast path does not take this input; the general decoder decides."""


def _build(cls: type[T], **fields: object) -> T:
    """An attrs frame whose fields this module already checked (no validators rerun)."""
    obj = _new(cls)
    for name, value in fields.items():
        _set(obj, name, value)
    return obj


def _gen(value: int) -> int:
    if not 1 <= value <= MAX_GEN:
        raise _Refused
    return value


#: Owner fences decoded lately, by their 24 bytes: a link carries the same two or three
#: (its two nodes' lifecycles) in every frame. Fences are immutable, so one is shared.
_OWNERS: Final[dict[bytes, OwnerFence]] = {}
_OWNERS_KEPT: Final = 256


#: Ready routes decoded lately, by their bytes: every call to one Spot carries the same
#: route (its ID, generations and owner) until the Spot moves. Routes are immutable.
_ROUTES: Final[dict[bytes, ReadyRoute]] = {}
_ROUTES_KEPT: Final = 1024


def _owner(data: bytes, pos: int) -> OwnerFence:
    key = data[pos:pos + 24]
    owner = _OWNERS.get(key)
    if owner is not None:
        return owner
    raw = key[:16]
    if len(key) != 24 or raw == _ZERO_RID:
        raise _Refused
    owner = _build(OwnerFence, node_rid=_build(NodeRid, value=raw),
                   lifecycle_generation=_gen(_Q.unpack_from(key, 16)[0]))
    if len(_OWNERS) >= _OWNERS_KEPT:
        _OWNERS.clear()
    _OWNERS[key] = owner
    return owner


def _text8(data: bytes, pos: int) -> tuple[str, int]:
    size = data[pos]
    end = pos + 1 + size
    if size == 0 or end > len(data):
        raise _Refused
    return data[pos + 1:end].decode("utf-8"), end


#: Message type names decoded lately, by their UTF-8 bytes (a link carries few types).
_NAMES: Final[dict[bytes, str]] = {}
_NAMES_KEPT: Final = 1024


def _payload(data: bytes, pos: int, max_body_bytes: int) -> tuple[EncodedMessage, int]:
    size = data[pos]
    start = pos + 1 + size
    raw = data[pos + 1:start]
    type_name = _NAMES.get(raw)
    if type_name is None:
        type_name, _ = _text8(data, pos)
        if len(_NAMES) >= _NAMES_KEPT:
            _NAMES.clear()
        _NAMES[raw] = type_name
    size = _I.unpack_from(data, start)[0]
    end = start + 4 + size
    if size > max_body_bytes or end > len(data):
        raise _Refused
    obj = _new(EncodedMessage)
    _set(obj, "type_name", type_name)
    _set(obj, "body", data[start + 4:end])
    return obj, end


def _route(data: bytes) -> tuple[ReadyRoute | ActivationRoute, int]:
    kind = data[4]
    if kind == 1:
        end = 46 + data[5]  # kind, spot_id (text8), two generations, the target's fence
        key = data[4:end]
        route = _ROUTES.get(key)
        if route is not None:
            return route, end
        spot_id, pos = _text8(data, 5)
        object_generation, owner_generation = _QQ.unpack_from(data, pos)
        route = _build(ReadyRoute, spot_id=spot_id, object_generation=_gen(object_generation),
                       owner_generation=_gen(owner_generation), target=_owner(data, pos + 16))
        if len(_ROUTES) >= _ROUTES_KEPT:
            _ROUTES.clear()
        _ROUTES[key] = route
        return route, end
    if kind == 2:
        mesh, pos = _text8(data, 5)
        target = _owner(data, pos)
        spot_id, pos = _text8(data, pos + 24)
        stable_type, pos = _text8(data, pos)
        return _build(ActivationRoute, target_mesh=mesh, target=target, spot_id=spot_id,
                      stable_type=stable_type,
                      descriptor_version=_gen(_Q.unpack_from(data, pos)[0])), pos + 8
    raise _Refused


def decode_spot_message(data: bytes, max_body_bytes: int) -> SpotMessage | None:
    """Command 39 (header already checked), or ``None``: let the general decoder decide."""
    try:
        route, pos = _route(data)
        operation_id, correlation, deadline = _QQQ.unpack_from(data, pos)
        if operation_id == 0:
            raise _Refused
        source = _owner(data, pos + 24)
        pos += 48
        size = data[pos]
        source_spot_id = None
        if size:
            source_spot_id, pos = _text8(data, pos)
        else:
            pos += 1
        flag = data[pos]
        pos += 1
        metadata = None
        if flag == 1:
            size = _I.unpack_from(data, pos)[0]
            end = pos + 4 + size
            if size > MAX_METADATA_BYTES or end > len(data):
                raise _Refused
            metadata, pos = data[pos + 4:end], end
        elif flag != 0:
            raise _Refused
        payload, pos = _payload(data, pos, max_body_bytes)
        if pos != len(data):
            raise _Refused
        frame = _new(SpotMessage)
        _set(frame, "route", route)
        _set(frame, "operation_id", operation_id)
        _set(frame, "reply_correlation", correlation)
        _set(frame, "deadline_ms", _gen(deadline))
        _set(frame, "source", source)
        _set(frame, "source_spot_id", source_spot_id)
        _set(frame, "metadata", metadata)
        _set(frame, "payload", payload)
        return frame
    except (_Refused, IndexError, struct.error, UnicodeDecodeError):
        return None


def decode_reply(data: bytes, max_body_bytes: int) -> Reply | None:
    """Command 20 answering 39 (or any failure), else ``None`` (general decoder)."""
    try:
        correlation, result, code, answers = _REPLY_HEAD.unpack_from(data, 4)
        command = _ANSWERS.get(answers)
        if correlation == 0 or command is None:
            raise _Refused
        pos = 16
        outcome: Failure | MessageOutcome
        if result == 1 and code != 0:
            size = _H.unpack_from(data, pos)[0]
            end = pos + 2 + size
            if end != len(data):
                raise _Refused
            outcome = _build(Failure, code=code, message=data[pos + 2:end].decode("utf-8"))
        elif result == 0 and code == 0 and command is Command.SPOT_MESSAGE:
            flag = data[pos]
            reply = None
            if flag == 1:
                reply, pos = _payload(data, pos + 1, max_body_bytes)
            elif flag == 0:
                pos += 1
            else:
                raise _Refused
            if pos != len(data):
                raise _Refused
            outcome = _new(MessageOutcome)
            _set(outcome, "reply", reply)
        else:
            raise _Refused
        frame = _new(Reply)
        _set(frame, "correlation", correlation)
        _set(frame, "answers", command)
        _set(frame, "outcome", outcome)
        return frame
    except (_Refused, IndexError, struct.error, UnicodeDecodeError):
        return None


def _t8(text: str) -> bytes:
    raw = text.encode("utf-8")
    return bytes((len(raw),)) + raw


def _owner_bytes(owner: OwnerFence) -> bytes:
    return owner.node_rid.value + _Q.pack(owner.lifecycle_generation)


def _payload_bytes(payload: EncodedMessage) -> bytes:
    return _t8(payload.type_name) + _I.pack(len(payload.body)) + payload.body


def encode_spot_message(frame: SpotMessage) -> bytes | None:
    """Command 39's bytes, exactly as the general encoder writes them (limits unchecked).

    ``None`` for a Message Follow relay (route kind 3): the general encoder writes it.
    """
    route = frame.route
    if isinstance(route, ReadyRoute):
        head = (b"\x01" + _t8(route.spot_id)
                + _QQ.pack(route.object_generation, route.owner_generation)
                + _owner_bytes(route.target))
    elif isinstance(route, ActivationRoute):
        head = (b"\x02" + _t8(route.target_mesh) + _owner_bytes(route.target)
                + _t8(route.spot_id) + _t8(route.stable_type)
                + _Q.pack(route.descriptor_version))
    else:
        return None
    source_spot = b"\x00" if frame.source_spot_id is None else _t8(frame.source_spot_id)
    metadata = (b"\x00" if frame.metadata is None
                else b"\x01" + _I.pack(len(frame.metadata)) + frame.metadata)
    return b"".join((
        _SPOT_HEADER, head,
        _QQQ.pack(frame.operation_id, frame.reply_correlation, frame.deadline_ms),
        _owner_bytes(frame.source), source_spot, metadata, _payload_bytes(frame.payload)))


def encode_reply(frame: Reply) -> bytes | None:
    """Command 20's bytes for a Failure or a 39 success, else ``None`` (general encoder)."""
    outcome = frame.outcome
    if isinstance(outcome, Failure):
        message = outcome.message.encode("utf-8")
        return b"".join((_REPLY_HEADER,
                         _REPLY_HEAD.pack(frame.correlation, 1, outcome.code, frame.answers),
                         _H.pack(len(message)), message))
    if isinstance(outcome, MessageOutcome):
        reply = b"\x00" if outcome.reply is None else b"\x01" + _payload_bytes(outcome.reply)
        return b"".join((_REPLY_HEADER, _REPLY_HEAD.pack(frame.correlation, 0, 0, frame.answers),
                         reply))
    return None
