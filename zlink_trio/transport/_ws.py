"""A link's websocket after the upgrade: RFC 6455 frames on the stream.

Theory of operation
-------------------
:class:`WebSocket` is the whole websocket layer of a link once
:mod:`._ws_upgrade` has upgraded the stream, and has no task of its own: the
task that reads the stream (the link's reader, or the handshake driver before
it) gets each complete binary message the moment its bytes are parsed -- no
internal reader task and no channel between it and the consumer
(docs/decisions.md, "Links drive the websocket themselves").

* Frames are parsed and built here (:meth:`WebSocket.receive`,
  :meth:`WebSocket.frame`, with :mod:`._ws_frames`' primitives: one frame,
  masking, a Close's payload): the subset a link speaks -- binary messages,
  possibly fragmented, Ping, Pong and Close, no extension -- checked as strictly
  as RFC 6455 requires (reserved bits, masking direction, minimal lengths,
  control frames short and unfragmented). It is the same job wsproto's
  frame protocol does, at a fraction of its cost per message.
* :meth:`WebSocket.receive` feeds bytes read from the stream and yields the
  binary messages they complete, in order. It answers a Ping by appending the
  Pong's bytes to :attr:`WebSocket.control` (the caller sends them, in order
  with its own writes). A Close from the peer raises :class:`WebSocketClosed`
  (from :mod:`._ws_frames`, re-exported here); anything the link does not
  speak (a text message, a malformed frame, a message above ``max_message``)
  raises :class:`~zlink_trio.core.errors.RemoteProtocolError` -- both after
  the messages that came before it. A message larger than ``max_message`` is
  refused from its header, never buffered.
* :meth:`WebSocket.frame` turns one message into its websocket bytes (masked
  on the client side, as RFC 6455 requires); callers queue and write those.
* Messages that arrived behind the HTTP upgrade (``buffered``) are parsed
  at once into :attr:`WebSocket.inbox`; its consumer takes them first.
* Until :meth:`WebSocket.authenticated` the websocket is in its
  *pre-authentication* state: the parser stops after each complete message
  (what follows it stays unparsed, to be read under the limits that apply
  once the handshake decided), refuses a fragmented message, and answers at
  most :data:`PRE_AUTH_CONTROL_FRAMES` Pings or Pongs in all -- one more is
  a :class:`~zlink_trio.core.errors.RemoteProtocolError`, so a peer that has
  not proved the secret can neither flood the node with Pings nor make it
  send more than a few hundred bytes of Pongs.
* :meth:`WebSocket.get_message` is for the handshake phase only, when one
  task both reads and writes.
* :meth:`WebSocket.aclose` sends a Close (unless a write was cut short, which
  would leave half a frame on the stream) and waits for the peer's; callers
  bound it (``CLOSE_TIMEOUT``) and then close the stream themselves.

Nothing here applies a timeout or closes the stream.
"""

from __future__ import annotations

import contextlib
from collections import deque
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.transport._ws_frames import (
    _BINARY,
    _CLOSE,
    _CONTINUATION,
    _PING,
    _PONG,
    _TEXT,
    CLOSE_NORMAL,
    WebSocketClosed,
    _broken,
    _close_payload,
    _frame,
    _masked,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = (
    "PRE_AUTH_CONTROL_FRAMES",
    "RECEIVE_BUFFER_BYTES",
    "WebSocket",
    "WebSocketClosed",
)

#: Bytes asked of the stream per read.
RECEIVE_BUFFER_BYTES: Final = 64 * 1024
#: Pings and Pongs (together) a peer may send before authentication; one more closes.
PRE_AUTH_CONTROL_FRAMES: Final = 2


class WebSocket:
    """One open websocket over ``stream``; see the module docstring.

    ``client`` is true on the side that dialled (its frames are masked, the
    peer's must not be). ``max_message`` is the largest message accepted; it
    may be raised once the peer is trusted. ``buffered`` are bytes that arrived
    behind the upgrade. With ``pre_auth`` the websocket starts in the
    pre-authentication state (module docstring) until :meth:`authenticated`.
    """

    __slots__ = ("_client", "_control_budget", "_held", "_held_size", "_more", "_need",
                 "_open", "_parts", "_parts_size", "_peer_closed", "_pre_auth", "_stream",
                 "_write_cut", "control", "inbox", "max_message")

    def __init__(self, stream: trio.abc.Stream, *, client: bool, max_message: int,
                 buffered: bytes = b"", pre_auth: bool = False) -> None:
        self._stream = stream
        self._client = client
        self.max_message = max_message
        #: Websocket bytes the caller must send (Pongs), in order with its writes.
        self.control: list[bytes] = []
        #: Messages parsed but not consumed yet (the handshake phase reads one at a time).
        self.inbox: deque[bytes] = deque()
        #: Unparsed bytes (the start of a frame whose rest has not arrived), their
        #: size, and the size the frame needs (0: its header is not complete yet).
        self._held: list[bytes] = []
        self._held_size = 0
        self._need = 0
        #: The held bytes may complete a frame without more input (the parser stopped
        #: after a pre-authentication message).
        self._more = False
        #: Pre-authentication: one message per parse, no fragments, few control frames.
        self._pre_auth = pre_auth
        self._control_budget = PRE_AUTH_CONTROL_FRAMES
        #: The fragments of a message whose last frame has not arrived (None: none).
        self._parts: list[bytes] | None = None
        self._parts_size = 0
        #: Neither side sent a Close yet.
        self._open = True
        self._peer_closed = False
        #: A write was cancelled or broke part-way: the stream may hold half a frame.
        self._write_cut = False
        if buffered:
            self.inbox.extend(self.receive(buffered))  # one message when pre_auth

    # ----------------------------------------------------------------- sending

    def frame(self, message: bytes) -> bytes:
        """The websocket bytes of ``message`` as one binary message (no I/O).

        Raises :class:`WebSocketClosed` once a Close was sent or received.
        """
        if not self._open:
            raise WebSocketClosed("the websocket is closing")
        return _frame(_BINARY, message, self._client)

    async def send_all(self, data: bytes) -> None:
        """Write websocket bytes; :class:`WebSocketClosed` if the stream is broken or closed.

        One writer at a time (the caller's rule). A write that does not complete
        (cancelled, broken) marks the stream unusable for the close handshake.
        """
        self._write_cut = True
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _broken(exc) from None
        self._write_cut = False

    # ----------------------------------------------------------------- receiving

    def receive(self, data: bytes) -> Iterator[bytes]:
        """Feed ``data`` read from the stream; yield each binary message it completes.

        Raises :class:`WebSocketClosed` when the peer sent a Close, and
        :class:`RemoteProtocolError` for a malformed frame, a text message or a
        message above ``max_message`` -- after yielding the messages before it.
        Before authentication it yields at most one message per call and keeps
        the bytes behind it (:meth:`pending`).
        """
        self._more = False
        if self._held:
            self._held.append(data)
            self._held_size += len(data)
            if self._held_size < self._need:
                return  # a large frame still arriving: parse it once, when complete
            data = b"".join(self._held)
            self._held.clear()
            self._held_size = 0
            self._need = 0
        end = len(data)
        pos = 0
        need = 0
        want_mask = 0 if self._client else 0x80
        while end - pos >= 2:
            b0 = data[pos]
            b1 = data[pos + 1]
            length = b1 & 0x7F
            head = pos + 2
            if length >= 126:
                if length == 126:
                    if end - head < 2:
                        break
                    length = int.from_bytes(data[head:head + 2], "big")
                    head += 2
                    if length < 126:
                        raise RemoteProtocolError("a websocket frame length not in its "
                                                  "shortest form")
                else:
                    if end - head < 8:
                        break
                    length = int.from_bytes(data[head:head + 8], "big")
                    head += 8
                    if length < 0x10000 or length >> 63:
                        raise RemoteProtocolError("a websocket frame length not in its "
                                                  "shortest form")
            if b0 & 0x70:
                raise RemoteProtocolError("a websocket frame with reserved bits set (no "
                                          "extension was negotiated)")
            if b1 & 0x80 != want_mask:
                raise RemoteProtocolError(
                    "an unmasked websocket frame from the client" if want_mask
                    else "a masked websocket frame from the server")
            opcode = b0 & 0x0F
            if opcode >= _CLOSE:
                if length > 125 or not b0 & 0x80:
                    raise RemoteProtocolError("a websocket control frame that is fragmented "
                                              "or longer than 125 bytes")
            elif (self._parts_size if self._parts is not None else 0) + length > \
                    self.max_message:
                raise RemoteProtocolError(
                    f"a websocket message of at least {length} bytes, above the limit of "
                    f"{self.max_message} bytes")
            stop = head + (4 if want_mask else 0) + length
            if stop > end:
                need = stop - pos
                break
            if want_mask:
                payload = _masked(data[head:head + 4], data[head + 4:stop])
            else:
                payload = data[head:stop]
            pos = stop
            if opcode == _BINARY and self._parts is None:
                if b0 & 0x80:
                    yield payload
                    if self._pre_auth:
                        self._more = pos < end
                        break  # the rest waits for the handshake's verdict
                elif self._pre_auth:
                    raise RemoteProtocolError("a fragmented websocket message before "
                                              "authentication")
                else:
                    self._parts = [payload]
                    self._parts_size = length
            elif opcode == _CONTINUATION and self._parts is not None:
                self._parts.append(payload)
                self._parts_size += length
                if b0 & 0x80:
                    message = b"".join(self._parts)
                    self._parts = None
                    self._parts_size = 0
                    yield message
            elif opcode in (_PING, _PONG) and self._pre_auth and self._control_budget < 1:
                raise RemoteProtocolError(
                    f"more than {PRE_AUTH_CONTROL_FRAMES} websocket Ping/Pong frames before "
                    "authentication")
            elif opcode == _PING:
                self._control_budget -= 1
                if self._open:
                    self.control.append(_frame(_PONG, payload, self._client))
            elif opcode == _PONG:
                self._control_budget -= 1  # liveness only; the caller noted that bytes arrived
            elif opcode == _CLOSE:
                code, reason = _close_payload(payload)
                self._peer_closed = True
                raise WebSocketClosed(
                    f"the peer closed the websocket (code {code}{', ' + reason if reason else ''})")
            elif opcode == _TEXT:
                raise RemoteProtocolError("a text websocket message; mesh frames are binary")
            elif opcode in (_BINARY, _CONTINUATION):
                raise RemoteProtocolError("a websocket continuation frame out of place")
            else:
                raise RemoteProtocolError(f"a websocket frame with the reserved opcode {opcode}")
        if pos < end:
            rest = data[pos:]
            self._held.append(rest)
            self._held_size = len(rest)
            self._need = need

    def single(self, data: bytes) -> bytes | None:
        """The message of ``data`` if it is exactly one whole binary frame; else ``None``.

        The common read of a link (one request or reply per read) without the
        general parser: only when nothing is held or fragmented, after
        authentication, for a final, unfragmented binary frame of a valid length
        under ``max_message``, masked as the peer's side must mask. Anything else --
        including every malformed frame -- is ``None`` and nothing is consumed:
        :meth:`receive` then parses ``data`` (and raises what it raises).
        """
        if self._held or self._parts is not None or self._pre_auth or len(data) < 2:
            return None
        if data[0] != 0x80 | _BINARY:  # final, no reserved bits, binary
            return None
        b1 = data[1]
        length = b1 & 0x7F
        head = 2
        if length == 126:
            if len(data) < 4:
                return None
            length = data[2] << 8 | data[3]  # (int.from_bytes without a slice)
            head = 4
            if length < 126:
                return None
        elif length == 127:
            return None  # 64 KiB or more: the general parser
        if length > self.max_message:
            return None
        if self._client:
            if b1 & 0x80 or len(data) != head + length:
                return None
            return data[head:]
        if not b1 & 0x80 or len(data) != head + 4 + length:
            return None
        return _masked(data[head:head + 4], data[head + 4:])

    def pending(self) -> bool:
        """Whether bytes arrived that no message taken so far accounts for (parsed or not)."""
        return bool(self.inbox) or bool(self._held)

    def authenticated(self, max_message: int) -> None:
        """Leave the pre-authentication state; the largest message becomes ``max_message``.

        Bytes that arrived behind the last handshake message are parsed now, under
        the new limit, into :attr:`inbox`; raises as :meth:`receive` does.
        """
        self._pre_auth = False
        self.max_message = max_message
        if self._held:
            self.inbox.extend(self.receive(b""))

    async def get_message(self) -> bytes:
        """The next binary message (handshake phase: this task alone reads and writes).

        Raises :class:`WebSocketClosed` when the peer closes or the stream ends,
        :class:`RemoteProtocolError` for anything that is not a binary message.
        """
        while not self.inbox:
            if self._more:  # complete frames held behind the previous message
                self.inbox.extend(self.receive(b""))
                await self.send_control()
                continue
            try:
                data = await self._stream.receive_some(RECEIVE_BUFFER_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise _broken(exc) from None
            if not data:
                raise WebSocketClosed("the peer closed the connection")
            self.inbox.extend(self.receive(bytes(data)))
            await self.send_control()
        return self.inbox.popleft()

    async def send_message(self, message: bytes) -> None:
        """Send one binary message (handshake phase)."""
        await self.send_all(self.frame(message))

    async def send_control(self) -> None:
        """Send the pending :attr:`control` bytes (handshake phase)."""
        if self.control:
            data = b"".join(self.control)
            self.control.clear()
            await self.send_all(data)

    # ----------------------------------------------------------------- closing

    async def aclose(self, code: int = CLOSE_NORMAL) -> None:
        """Close handshake: send a Close with ``code``, wait for the peer's; never raises.

        Answers a peer's Close with the same code and returns. Unbounded by itself
        (the caller applies ``CLOSE_TIMEOUT``); skipped when a write was cut short,
        since a Close behind half a frame would be garbage.
        """
        if self._write_cut or not self._open:
            return
        self._open = False
        with contextlib.suppress(WebSocketClosed, RemoteProtocolError, trio.BrokenResourceError,
                                 trio.ClosedResourceError, trio.BusyResourceError):
            await self.send_all(_frame(_CLOSE, code.to_bytes(2, "big"), self._client))
            while not self._peer_closed:
                data = await self._stream.receive_some(RECEIVE_BUFFER_BYTES)
                if not data:
                    return
                for _ in self.receive(bytes(data)):
                    pass  # messages after our Close are dropped
