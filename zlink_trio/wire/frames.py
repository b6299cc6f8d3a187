"""The binary frame codec: ``encode(frame) -> bytes`` and ``decode(data) -> Frame``.

Theory of operation
-------------------
Frames travel one per websocket *binary* message, so there is no framing
layer: a message is a whole frame. Every frame starts with the 4-byte
header ``b"ZL"`` (magic), the version byte (:data:`VERSION`) and the command
byte (:class:`Command`), followed by the command's fields in a fixed order.
``docs/wire.md`` has the byte table of every frame; the field encodings
(``text8``, ``rid``, ``gen``, ...) are in :mod:`zlink_trio.wire._frame_fields`.

The rules are data. :data:`FRAMES` has one row per frame class: its command
byte, the writer and reader of its fields
(:mod:`zlink_trio.wire._frame_layouts`, :mod:`zlink_trio.wire._reply_layouts`),
the application bodies it carries
and, for the two frames of every request (39 and 20), the fast paths of
:mod:`zlink_trio.wire._fast_frames`. :func:`encode` and :func:`decode` only
look rows up: adding a command is adding a row.

The encoding is canonical: each frame has exactly one byte form, so for any
``data`` that decodes, ``encode(decode(data)) == data``. Flags are exactly 0
or 1, enums have no unknown values, lengths are exact and trailing bytes are
refused.

Who is at fault. :func:`decode` reads a peer's bytes and is total: any input
either decodes or raises :class:`RemoteProtocolError` (unknown magic, version
or command, truncation, trailing bytes, lengths past the end or past a cap,
invalid UTF-8, empty required text, all-zero rid, a generation of 0 or
>= 2**63, an unknown enum value, a Message Follow route whose hops are not
1..8 or whose target owner generation is not above the source's, a root above
64 MiB, a text websocket message). The caller fails that one link. Frame
constructors and :func:`encode` refuse what this side may not send with
:class:`LocalProtocolError` (a bug of the caller); limits that are not ints
in range are :class:`InvalidConfiguration`.

Times. ``deadline_ms`` and ``owner_lease_expires_ms`` are absolute
wall-clock times in milliseconds since the Unix epoch, not remaining
durations: a frame keeps one meaning however long it waits in a queue, is
relayed by Message Follow, or is stored byte for byte as an activation
recovery root whose deadline must equal the envelope's (spec 06 §4.1). The
runtime converts between its Trio clock and the wall clock when it builds
or reads a frame; nodes are expected to run NTP-synchronised clocks, which
the shared stores' wall-clock leases already require.

Limits. ``max_frame_bytes`` (default :data:`DEFAULT_MAX_FRAME_BYTES`, 1 MiB
of body plus 32 KiB of headroom for the fixed fields and metadata) bounds the
whole frame and is checked first; ``max_body_bytes`` (default 1 MiB, the
JSON codec's bound) bounds every application body; metadata is at most
16 KiB. Configure the websocket's ``max_message_size`` to the same
``max_frame_bytes``.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from zlink_trio.core.errors import (
    InvalidConfiguration,
    InvalidOperation,
    LocalProtocolError,
    RemoteProtocolError,
)
from zlink_trio.wire._direct_frames import (
    encode_message_reply,
    encode_ready_message,
    owner_bytes,
    ready_route_bytes,
)
from zlink_trio.wire._fast_frames import (
    decode_reply,
    decode_spot_message,
    encode_reply,
    encode_spot_message,
)
from zlink_trio.wire._frame_fields import MAX_METADATA_BYTES, MAX_U32, NONCE_BYTES, Reader, Writer
from zlink_trio.wire._frame_layouts import (
    read_challenge,
    read_close,
    read_create,
    read_hello,
    read_node_operation,
    read_ping,
    read_pong,
    read_relocate,
    read_spot_message,
    read_welcome,
    spot_message_bodies,
    write_challenge,
    write_close,
    write_create,
    write_introduction,
    write_node_operation,
    write_relocate,
    write_spot_message,
    write_token,
)
from zlink_trio.wire._frame_rules import Rule, rule, rule_for
from zlink_trio.wire._frame_types import (
    MAX_FOLLOW_HOPS,
    MIN_FRAME_BYTES,
    ActivationRoute,
    Challenge,
    CloseOutcome,
    Command,
    CreateOutcome,
    Failure,
    FollowRoute,
    Frame,
    Hello,
    MessageOutcome,
    NodeAction,
    NodeOperation,
    NodeOperationOutcome,
    Outcome,
    Ping,
    Pong,
    ReadyRoute,
    RelocateOutcome,
    RelocateSpot,
    Reply,
    Route,
    RouteKind,
    SpotMessage,
    TerminalResult,
    UserSpotClose,
    UserSpotCreate,
    Welcome,
    WireCreateState,
)
from zlink_trio.wire._reply_layouts import read_reply, reply_bodies, write_reply
from zlink_trio.wire.codec import MAX_BODY_BYTES, EncodedMessage

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = (
    "DEFAULT_MAX_FRAME_BYTES",
    "FRAMES",
    "FRAME_HEADROOM_BYTES",
    "HEADER_BYTES",
    "MAGIC",
    "MAX_BODY_BYTES",
    "MAX_FOLLOW_HOPS",
    "MAX_METADATA_BYTES",
    "MIN_FRAME_BYTES",
    "NONCE_BYTES",
    "VERSION",
    "ActivationRoute",
    "Challenge",
    "CloseOutcome",
    "Command",
    "CreateOutcome",
    "EncodedMessage",
    "Failure",
    "FollowRoute",
    "Frame",
    "Hello",
    "MessageOutcome",
    "NodeAction",
    "NodeOperation",
    "NodeOperationOutcome",
    "Outcome",
    "Ping",
    "Pong",
    "ReadyRoute",
    "RelocateOutcome",
    "RelocateSpot",
    "Reply",
    "Route",
    "RouteKind",
    "SpotMessage",
    "TerminalResult",
    "UserSpotClose",
    "UserSpotCreate",
    "Welcome",
    "WireCreateState",
    "decode",
    "encode",
    "encode_message_reply",
    "encode_ready_message",
    "link_decoder",
    "owner_bytes",
    "ready_route_bytes",
)

#: The first two bytes of every frame.
MAGIC: Final = b"ZL"
#: The wire format version this module speaks (the third byte of every frame).
VERSION: Final = 1
_HEADER: Final = MAGIC + bytes((VERSION,))
#: Size of the common header: magic, version, command.
HEADER_BYTES: Final = 4
#: Room above the body bound for a frame's fixed fields and metadata (32 KiB).
FRAME_HEADROOM_BYTES: Final = 32 * 1024
#: Default bound of a whole frame: 1 MiB body + 32 KiB headroom.
DEFAULT_MAX_FRAME_BYTES: Final = MAX_BODY_BYTES + FRAME_HEADROOM_BYTES

_FRAME_RULES: Final = (
    rule(Challenge, Command.CHALLENGE, write_challenge, read_challenge),
    rule(Hello, Command.HELLO, write_introduction, read_hello),
    rule(Welcome, Command.WELCOME, write_introduction, read_welcome),
    rule(Ping, Command.PING, write_token, read_ping),
    rule(Pong, Command.PONG, write_token, read_pong),
    rule(SpotMessage, Command.SPOT_MESSAGE, write_spot_message, read_spot_message,
         spot_message_bodies, fast_write=encode_spot_message, fast_read=decode_spot_message),
    rule(UserSpotCreate, Command.USER_SPOT_CREATE, write_create, read_create),
    rule(UserSpotClose, Command.USER_SPOT_CLOSE, write_close, read_close),
    rule(RelocateSpot, Command.RELOCATE_SPOT, write_relocate, read_relocate),
    rule(NodeOperation, Command.NODE_OPERATION, write_node_operation, read_node_operation),
    rule(Reply, Command.REPLY, write_reply, read_reply, reply_bodies,
         fast_write=encode_reply, fast_read=decode_reply),
)
#: Every frame class -> its row (tag: the command byte). The codec reads nothing else.
FRAMES: Final[dict[type, Rule[Frame]]] = {row.cls: row for row in _FRAME_RULES}
_FOR_COMMAND: Final[dict[int, Rule[Frame]]] = {row.tag: row for row in _FRAME_RULES}


def _check_limits(max_frame_bytes: int, max_body_bytes: int) -> None:
    if type(max_frame_bytes) is not int or not MIN_FRAME_BYTES <= max_frame_bytes <= MAX_U32:
        raise InvalidConfiguration(
            f"max_frame_bytes must be an int in {MIN_FRAME_BYTES}..{MAX_U32}, "
            f"got {max_frame_bytes!r}"
        )
    if type(max_body_bytes) is not int or not 1 <= max_body_bytes <= MAX_U32:
        raise InvalidConfiguration(
            f"max_body_bytes must be an int in 1..{MAX_U32}, got {max_body_bytes!r}"
        )


def encode(
    frame: Frame,
    *,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> bytes:
    """Encode ``frame`` as one websocket binary message.

    Raises :class:`LocalProtocolError` if ``frame`` is not a frame, a body is
    above ``max_body_bytes`` or the frame is above ``max_frame_bytes``;
    :class:`InvalidConfiguration` if a limit is not an int in range.
    """
    _check_limits(max_frame_bytes, max_body_bytes)
    row = FRAMES.get(type(frame)) or rule_for(FRAMES, frame)
    for payload in row.bodies(frame):
        if payload is not None and len(payload.body) > max_body_bytes:
            raise LocalProtocolError(
                f"message body of {payload.type_name!r} is {len(payload.body)} bytes, above "
                f"the {max_body_bytes}-byte limit; send a smaller message or raise the limit"
            )
    data = row.fast_write(frame) if row.fast_write is not None else None
    if data is None:
        w = Writer()
        w.raw(_HEADER)
        w.u8(row.tag)
        row.write(w, frame)
        data = bytes(w)
    if len(data) > max_frame_bytes:
        raise LocalProtocolError(
            f"{type(frame).__name__} frame is {len(data)} bytes, above the "
            f"{max_frame_bytes}-byte frame limit; send less or raise the limit"
        )
    return data


def decode(
    data: bytes | bytearray | memoryview | str,
    *,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Frame:
    """Decode one websocket message received from a peer.

    Total: returns a frame or raises :class:`RemoteProtocolError` -- for a
    ``str`` (a text websocket message) too. Raises
    :class:`InvalidConfiguration` only if a limit is not an int in range.
    """
    _check_limits(max_frame_bytes, max_body_bytes)
    if isinstance(data, str):
        raise RemoteProtocolError("frames travel in binary websocket messages, got a text message")
    if isinstance(data, bytearray | memoryview):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise RemoteProtocolError(f"a frame is bytes, got {type(data).__name__}")
    if len(data) > max_frame_bytes:
        raise RemoteProtocolError(
            f"frame is {len(data)} bytes, above the {max_frame_bytes}-byte frame limit"
        )
    if data[:3] == _HEADER and len(data) > 3:  # the hot frames first (docs: _fast_frames)
        row = _FOR_COMMAND.get(data[3])
        if row is not None and row.fast_read is not None:
            fast = row.fast_read(data, max_body_bytes)
            if fast is not None:
                return fast
    r = Reader(data)
    magic = r.raw(len(MAGIC), "magic")
    if magic != MAGIC:
        raise RemoteProtocolError(f"bad magic {magic!r}; a zlink frame starts with {MAGIC!r}")
    version = r.u8("version")
    if version != VERSION:
        raise RemoteProtocolError(
            f"unsupported wire version {version}; this node speaks version {VERSION}"
        )
    command = r.u8("command")
    row = _FOR_COMMAND.get(command)
    if row is None:
        raise RemoteProtocolError(f"unknown command {command}")
    try:
        frame = row.read(r, max_body_bytes)
    except (InvalidOperation, LocalProtocolError) as exc:  # pragma: no cover - defence in depth
        # The reader checks every value before a constructor sees it; should a
        # constructor still refuse one, it is the peer's bytes that are wrong.
        raise RemoteProtocolError(f"invalid {Command(command).name} frame: {exc}") from exc
    r.end()
    return frame


def link_decoder(
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Callable[[bytes], Frame]:
    """:func:`decode` with these limits, checked once: the decoder of one link's messages.

    The function returned gives, for every input, exactly what ``decode(data,
    max_frame_bytes=..., max_body_bytes=...)`` gives (a frame or the same
    :class:`RemoteProtocolError`); the hot frames (39, 20) skip the argument checks
    and go straight to their fast paths. Raises :class:`InvalidConfiguration` at
    once if a limit is not an int in range.
    """
    _check_limits(max_frame_bytes, max_body_bytes)
    fast = {_HEADER + bytes((row.tag,)): row.fast_read
            for row in _FRAME_RULES if row.fast_read is not None}

    def decode_one(data: bytes) -> Frame:
        if type(data) is bytes and len(data) <= max_frame_bytes:
            read = fast.get(data[:4])
            if read is not None:
                frame = read(data, max_body_bytes)
                if frame is not None:
                    return frame
        return decode(data, max_frame_bytes=max_frame_bytes, max_body_bytes=max_body_bytes)

    return decode_one
