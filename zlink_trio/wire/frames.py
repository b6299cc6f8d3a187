"""The binary frame codec: ``encode(frame) -> bytes`` and ``decode(data) -> Frame``.

Theory of operation
-------------------
Frames travel one per websocket *binary* message, so there is no framing
layer: a message is a whole frame. Every frame starts with the 4-byte
header ``b"ZL"`` (magic), the version byte (:data:`VERSION`) and the command
byte (:class:`Command`), followed by the command's fields in a fixed order.
``docs/wire.md`` has the byte table of every frame; the field encodings
(``text8``, ``rid``, ``gen``, ...) are in :mod:`zlink_trio.wire._frame_fields`.

The encoding is canonical: each frame has exactly one byte form, so for any
``data`` that decodes, ``encode(decode(data)) == data``. Flags are exactly 0
or 1, enums have no unknown values, lengths are exact and trailing bytes are
refused.

Who is at fault. :func:`decode` reads a peer's bytes and is total: any input
either decodes or raises :class:`RemoteProtocolError` (unknown magic, version
or command, truncation, trailing bytes, lengths past the end or past a cap,
invalid UTF-8, empty required text, all-zero rid, a generation of 0 or
>= 2**63, an unknown enum value, a text websocket message). The caller fails
that one link. Frame constructors and :func:`encode` refuse what this side
may not send with :class:`LocalProtocolError` (a bug of the caller); limits
that are not ints in range are :class:`InvalidConfiguration`.

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
from zlink_trio.wire._fast_frames import (
    decode_reply,
    decode_spot_message,
    encode_reply,
    encode_spot_message,
)
from zlink_trio.wire._frame_fields import (
    MAX_METADATA_BYTES,
    MAX_U32,
    NONCE_BYTES,
    Reader,
    Writer,
)
from zlink_trio.wire._frame_types import (
    MIN_FRAME_BYTES,
    ActivationRoute,
    Challenge,
    CloseOutcome,
    Command,
    CreateOutcome,
    Failure,
    Frame,
    Hello,
    MessageOutcome,
    Outcome,
    Ping,
    Pong,
    ReadyRoute,
    Reply,
    RouteKind,
    SpotMessage,
    TerminalResult,
    UserSpotClose,
    UserSpotCreate,
    Welcome,
    WireCreateState,
)
from zlink_trio.wire.codec import MAX_BODY_BYTES, EncodedMessage

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = (
    "DEFAULT_MAX_FRAME_BYTES",
    "FRAME_HEADROOM_BYTES",
    "HEADER_BYTES",
    "MAGIC",
    "MAX_BODY_BYTES",
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
    "Frame",
    "Hello",
    "MessageOutcome",
    "Outcome",
    "Ping",
    "Pong",
    "ReadyRoute",
    "Reply",
    "RouteKind",
    "SpotMessage",
    "TerminalResult",
    "UserSpotClose",
    "UserSpotCreate",
    "Welcome",
    "WireCreateState",
    "decode",
    "encode",
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


# --------------------------------------------------------------------------- encode


def _check_body(payload: EncodedMessage | None, max_body_bytes: int) -> None:
    if payload is not None and len(payload.body) > max_body_bytes:
        raise LocalProtocolError(
            f"message body of {payload.type_name!r} is {len(payload.body)} bytes, above the "
            f"{max_body_bytes}-byte limit; send a smaller message or raise the limit"
        )


def _encode_handshake(w: Writer, frame: Hello | Welcome) -> None:
    w.text8(frame.node_id)
    w.rid(frame.node_rid)
    w.u64(frame.lifecycle_generation)
    w.text8(frame.mesh)
    w.u32(frame.max_frame_bytes)
    w.raw(frame.nonce)
    w.raw(frame.mac)


def _encode_spot_message(w: Writer, frame: SpotMessage) -> None:
    route = frame.route
    w.u8(frame.route_kind)
    if isinstance(route, ReadyRoute):
        w.text8(route.spot_id)
        w.u64(route.object_generation)
        w.u64(route.owner_generation)
        w.owner(route.target)
    else:
        w.text8(route.target_mesh)
        w.owner(route.target)
        w.text8(route.spot_id)
        w.text8(route.stable_type)
        w.u64(route.descriptor_version)
    w.u64(frame.operation_id)
    w.u64(frame.reply_correlation)
    w.u64(frame.deadline_ms)
    w.owner(frame.source)
    w.optional_text8(frame.source_spot_id)
    w.flag(frame.metadata is not None)
    if frame.metadata is not None:
        w.blob32(frame.metadata)
    w.payload(frame.payload)


def _encode_create(w: Writer, frame: UserSpotCreate) -> None:
    w.u64(frame.correlation)
    w.u64(frame.operation_id)
    w.owner(frame.source)
    w.text8(frame.spot_id)
    w.text8(frame.stable_type)
    w.u64(frame.expected_store_version)
    w.u64(frame.object_generation)
    w.u64(frame.owner_generation)
    w.owner(frame.target)
    w.u64(frame.owner_lease_expires_ms)
    w.u32(frame.pending_capacity)
    w.u64(frame.deadline_ms)


def _encode_close(w: Writer, frame: UserSpotClose) -> None:
    w.u64(frame.correlation)
    w.u64(frame.operation_id)
    w.owner(frame.source)
    w.spot_ref(frame.ref)
    w.owner(frame.target)
    w.u64(frame.expected_owner_generation)
    w.u64(frame.expected_store_version)
    w.u64(frame.deadline_ms)


def _encode_reply(w: Writer, frame: Reply) -> None:
    outcome = frame.outcome
    w.u64(frame.correlation)
    w.u8(frame.terminal_result)
    w.u16(frame.failure_code)
    w.u8(frame.answers)
    if isinstance(outcome, Failure):
        w.text16(outcome.message)
    elif isinstance(outcome, CreateOutcome):
        w.u8(outcome.state)
        w.spot_ref(outcome.ref)
        w.optional_payload(outcome.reply)
    elif isinstance(outcome, CloseOutcome):
        w.flag(outcome.closed)
    else:
        w.optional_payload(outcome.reply)


def _payloads(frame: Frame) -> tuple[EncodedMessage | None, ...]:
    if isinstance(frame, SpotMessage):
        return (frame.payload,)
    if isinstance(frame, Reply) and isinstance(frame.outcome, CreateOutcome | MessageOutcome):
        return (frame.outcome.reply,)
    return ()


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
    fast: bytes | None = None
    if type(frame) is SpotMessage:
        _check_body(frame.payload, max_body_bytes)
        fast = encode_spot_message(frame)
    elif type(frame) is Reply:
        fast = encode_reply(frame)
        if fast is not None and isinstance(frame.outcome, MessageOutcome):
            _check_body(frame.outcome.reply, max_body_bytes)
    if fast is not None:
        if len(fast) > max_frame_bytes:
            raise LocalProtocolError(
                f"{type(frame).__name__} frame is {len(fast)} bytes, above the "
                f"{max_frame_bytes}-byte frame limit; send less or raise the limit"
            )
        return fast
    w = Writer()
    w.raw(MAGIC)
    w.u8(VERSION)
    if isinstance(frame, Challenge):
        w.u8(Command.CHALLENGE)
        w.raw(frame.nonce)
    elif isinstance(frame, Hello):
        w.u8(Command.HELLO)
        _encode_handshake(w, frame)
    elif isinstance(frame, Welcome):
        w.u8(Command.WELCOME)
        _encode_handshake(w, frame)
    elif isinstance(frame, Ping):
        w.u8(Command.PING)
        w.u64(frame.token)
    elif isinstance(frame, Pong):
        w.u8(Command.PONG)
        w.u64(frame.token)
    elif isinstance(frame, SpotMessage):
        w.u8(Command.SPOT_MESSAGE)
        _encode_spot_message(w, frame)
    elif isinstance(frame, UserSpotCreate):
        w.u8(Command.USER_SPOT_CREATE)
        _encode_create(w, frame)
    elif isinstance(frame, UserSpotClose):
        w.u8(Command.USER_SPOT_CLOSE)
        _encode_close(w, frame)
    elif isinstance(frame, Reply):
        w.u8(Command.REPLY)
        _encode_reply(w, frame)
    else:
        raise LocalProtocolError(f"cannot encode {frame!r}: it is not a frame")
    for payload in _payloads(frame):
        _check_body(payload, max_body_bytes)
    data = bytes(w)
    if len(data) > max_frame_bytes:
        raise LocalProtocolError(
            f"{type(frame).__name__} frame is {len(data)} bytes, above the "
            f"{max_frame_bytes}-byte frame limit; send less or raise the limit"
        )
    return data


# --------------------------------------------------------------------------- decode


def _decode_challenge(r: Reader, max_body_bytes: int) -> Challenge:
    return Challenge(nonce=r.raw(NONCE_BYTES, "nonce"))


def _decode_limit(r: Reader) -> int:
    value = r.u32("max frame bytes")
    if value < MIN_FRAME_BYTES:
        raise RemoteProtocolError(
            f"max frame bytes is {value}, below the {MIN_FRAME_BYTES}-byte minimum"
        )
    return value


def _decode_hello(r: Reader, max_body_bytes: int) -> Hello:
    return Hello(
        node_id=r.text8("node id"),
        node_rid=r.rid("node rid"),
        lifecycle_generation=r.gen("lifecycle generation"),
        mesh=r.text8("mesh"),
        max_frame_bytes=_decode_limit(r),
        nonce=r.raw(NONCE_BYTES, "nonce"),
        mac=r.raw(NONCE_BYTES, "mac"),
    )


def _decode_welcome(r: Reader, max_body_bytes: int) -> Welcome:
    hello = _decode_hello(r, max_body_bytes)
    return Welcome(
        node_id=hello.node_id,
        node_rid=hello.node_rid,
        lifecycle_generation=hello.lifecycle_generation,
        mesh=hello.mesh,
        max_frame_bytes=hello.max_frame_bytes,
        nonce=hello.nonce,
        mac=hello.mac,
    )


def _decode_ping(r: Reader, max_body_bytes: int) -> Ping:
    return Ping(token=r.u64("token"))


def _decode_pong(r: Reader, max_body_bytes: int) -> Pong:
    return Pong(token=r.u64("token"))


def _decode_route(r: Reader) -> ReadyRoute | ActivationRoute:
    kind = r.u8("route kind")
    if kind == RouteKind.READY:
        return ReadyRoute(
            spot_id=r.text8("Spot ID"),
            object_generation=r.gen("object generation"),
            owner_generation=r.gen("owner generation"),
            target=r.owner("target"),
        )
    if kind == RouteKind.ACTIVATION:
        return ActivationRoute(
            target_mesh=r.text8("target mesh"),
            target=r.owner("target"),
            spot_id=r.text8("Spot ID"),
            stable_type=r.text8("stable type"),
            descriptor_version=r.gen("descriptor version"),
        )
    raise RemoteProtocolError(f"unknown route kind {kind}; known: 1 (ready), 2 (activation)")


def _decode_spot_message(r: Reader, max_body_bytes: int) -> SpotMessage:
    route = _decode_route(r)
    operation_id = r.u64_nonzero("operation id")
    reply_correlation = r.u64("reply correlation")
    deadline_ms = r.gen("deadline")
    source = r.owner("source")
    source_spot_id = r.optional_text8("source Spot ID")
    metadata = r.blob32("metadata", MAX_METADATA_BYTES) if r.flag("metadata flag") else None
    return SpotMessage(
        route=route,
        operation_id=operation_id,
        reply_correlation=reply_correlation,
        deadline_ms=deadline_ms,
        source=source,
        source_spot_id=source_spot_id,
        metadata=metadata,
        payload=r.payload("payload", max_body_bytes),
    )


def _decode_create(r: Reader, max_body_bytes: int) -> UserSpotCreate:
    correlation = r.u64_nonzero("correlation")
    operation_id = r.u64_nonzero("operation id")
    source = r.owner("source")
    spot_id = r.text8("Spot ID")
    stable_type = r.text8("stable type")
    expected_store_version = r.gen("expected store version")
    object_generation = r.gen("object generation")
    owner_generation = r.gen("owner generation")
    target = r.owner("target")
    owner_lease_expires_ms = r.bounded_u64("owner lease")
    pending_capacity = r.u32("pending capacity")
    if pending_capacity == 0:
        raise RemoteProtocolError("pending capacity is 0; a reservation holds at least 1")
    return UserSpotCreate(
        correlation=correlation,
        operation_id=operation_id,
        source=source,
        spot_id=spot_id,
        stable_type=stable_type,
        expected_store_version=expected_store_version,
        object_generation=object_generation,
        owner_generation=owner_generation,
        target=target,
        owner_lease_expires_ms=owner_lease_expires_ms,
        pending_capacity=pending_capacity,
        deadline_ms=r.gen("deadline"),
    )


def _decode_close(r: Reader, max_body_bytes: int) -> UserSpotClose:
    return UserSpotClose(
        correlation=r.u64_nonzero("correlation"),
        operation_id=r.u64_nonzero("operation id"),
        source=r.owner("source"),
        ref=r.spot_ref("SpotRef"),
        target=r.owner("target"),
        expected_owner_generation=r.gen("expected owner generation"),
        expected_store_version=r.gen("expected store version"),
        deadline_ms=r.gen("deadline"),
    )


_CREATE_STATES: Final = frozenset(int(state) for state in WireCreateState)


def _decode_outcome(r: Reader, answers: int, max_body_bytes: int) -> Outcome:
    if answers == Command.USER_SPOT_CREATE:
        raw_state = r.u8("create state")
        if raw_state not in _CREATE_STATES:
            raise RemoteProtocolError(
                f"unknown create state {raw_state}; known: 1 (existing), 2 (created), 3 (rejected)"
            )
        state = WireCreateState(raw_state)
        ref = r.spot_ref("SpotRef")
        reply = r.optional_payload("create reply", max_body_bytes)
        if state is WireCreateState.EXISTING and reply is not None:
            raise RemoteProtocolError("an EXISTING create result carries an application reply")
        return CreateOutcome(state=state, ref=ref, reply=reply)
    if answers == Command.USER_SPOT_CLOSE:
        return CloseOutcome(closed=r.flag("closed"))
    return MessageOutcome(reply=r.optional_payload("reply", max_body_bytes))


_ANSWERABLE: Final = frozenset(
    {Command.SPOT_MESSAGE, Command.USER_SPOT_CREATE, Command.USER_SPOT_CLOSE}
)


def _decode_reply(r: Reader, max_body_bytes: int) -> Reply:
    correlation = r.u64_nonzero("correlation")
    result = r.u8("terminal result")
    code = r.u16("failure code")
    if result == TerminalResult.OK and code != 0:
        raise RemoteProtocolError(f"an OK reply has failure code {code}; it must be 0")
    if result == TerminalResult.FAILED and code == 0:
        raise RemoteProtocolError("a FAILED reply has failure code 0; it must be a ZLinkError code")
    if result not in (TerminalResult.OK, TerminalResult.FAILED):
        raise RemoteProtocolError(f"unknown terminal result {result}; known: 0 (ok), 1 (failed)")
    answers = r.u8("answered command")
    if answers not in _ANSWERABLE:
        raise RemoteProtocolError(f"a reply cannot answer command {answers}; known: 39, 47, 48")
    outcome: Outcome
    if result == TerminalResult.FAILED:
        outcome = Failure(code=code, message=r.text16("failure message"))
    else:
        outcome = _decode_outcome(r, answers, max_body_bytes)
    return Reply(correlation=correlation, answers=Command(answers), outcome=outcome)


_DECODERS: Final[dict[int, Callable[[Reader, int], Frame]]] = {
    Command.CHALLENGE: _decode_challenge,
    Command.HELLO: _decode_hello,
    Command.WELCOME: _decode_welcome,
    Command.PING: _decode_ping,
    Command.PONG: _decode_pong,
    Command.SPOT_MESSAGE: _decode_spot_message,
    Command.USER_SPOT_CREATE: _decode_create,
    Command.USER_SPOT_CLOSE: _decode_close,
    Command.REPLY: _decode_reply,
}


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
    if data[:3] == _HEADER:  # the hot frames first (docs: _fast_frames)
        command = data[3] if len(data) > 3 else -1
        fast: Frame | None = None
        if command == Command.SPOT_MESSAGE:
            fast = decode_spot_message(data, max_body_bytes)
        elif command == Command.REPLY:
            fast = decode_reply(data, max_body_bytes)
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
    decoder = _DECODERS.get(command)
    if decoder is None:
        raise RemoteProtocolError(f"unknown command {command}")
    try:
        frame = decoder(r, max_body_bytes)
    except (InvalidOperation, LocalProtocolError) as exc:  # pragma: no cover - defence in depth
        # The reader checks every value before a constructor sees it; should a
        # constructor still refuse one, it is the peer's bytes that are wrong.
        raise RemoteProtocolError(f"invalid {Command(command).name} frame: {exc}") from exc
    r.end()
    return frame
