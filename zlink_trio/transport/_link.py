"""One authenticated mesh link: what the layer above provides, its tasks, its sending side.

Theory of operation
-------------------
A :class:`Link` exists only after the handshake authenticated the peer. From then on
:meth:`Link.serve` runs it, in the task that registered it, until it closes; three
tasks serve it, all in one nursery, and then the transport's ``on_closed`` callback
runs exactly once; it calls ``handler.link_closed``.

* :class:`LinkHandler` is what the layer above provides: admitting a peer, every
  application frame of a link (from its reader, synchronously, in arrival order) and
  the one ``link_closed`` per link.
* the **reader** reads the stream, feeds the bytes to the link's
  :class:`~._ws.WebSocket` (a frame parser with no task of its own), decodes each
  complete binary message with the link's decoder (``wire.frames.LinkDecoder``) and
  dispatches it *synchronously*: application frames go to ``handler.frame_received``,
  a Ping is answered with a Pong, a Pong only proves liveness. No task is spawned per
  frame and nothing sits between the socket and the handler; the reader never waits
  for anything but the next bytes, so it never blocks on a handler. A websocket-level
  Ping is answered through the send queue. Over plain TCP it reads a duplicate of the
  socket directly (one wait and one non-blocking ``recv`` per read), which the send
  queue writes to as well.
* the **writer** is the link's :meth:`~._send_queue.SendQueue.writer`. The queue holds
  websocket-framed bytes; the writer drains it into the stream, joining what is queued
  into as few socket writes as it can. :meth:`Link.send_nowait` only encodes, frames
  and enqueues, so a caller never waits for the network; a caller with nothing more to
  send for now (``send_nowait(write=True)``) or about to wait anyway (``await
  link.flush()``) writes the queue itself and saves the hop to the writer. A link whose
  peer stops reading is closed once its queue would pass ``max_send_buffer_bytes``; a
  sender with much to send keeps below that with the link's flow control
  (:attr:`Link.writable`, :meth:`Link.wait_writable`).
  :mod:`._send_queue` describes how the queue is written.
* the **keepalive** sleeps until the link has been silent (nothing received) for one
  ``keepalive_interval``, then sends a Ping every interval; after
  :data:`SILENT_INTERVALS` intervals of silence it closes the link.

Whichever task ends first -- the peer closed, a protocol error, a handler bug, the
writer's socket broke, keepalive expiry, :meth:`Link.aclose` or the transport's
shutdown (:meth:`Link.close_soon`) -- ends the other two. Then the websocket close
handshake runs (bounded by :data:`CLOSE_TIMEOUT`, shielded so it also runs on
cancellation), the stream is closed, and ``on_closed`` runs exactly once. A closed
link never reopens.

Errors. Sending on a closed link is :class:`Unavailable` (naming the peer); a frame
the link cannot send is :class:`InvalidOperation`, and nothing is sent. Bytes from the
peer that are not a valid frame (at the websocket or the mesh level), a text message,
a message above the negotiated ``max_frame_bytes``, or a handshake frame after
authentication are a :class:`RemoteProtocolError`: logged, and that link alone is
closed.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Final, Protocol

import trio

from zlink_trio.core.errors import (
    InvalidOperation,
    LocalProtocolError,
    RemoteProtocolError,
    Unavailable,
)
from zlink_trio.transport._send_queue import SendQueue
from zlink_trio.transport._ws import RECEIVE_BUFFER_BYTES, WebSocketClosed
from zlink_trio.transport._ws_frames import CLOSE_NORMAL, CLOSE_PROTOCOL_ERROR
from zlink_trio.wire.frames import (
    Frame,
    LinkDecoder,
    NodeOperation,
    Ping,
    Pong,
    RelayDone,
    RelocateSpot,
    Reply,
    SpotMessage,
    UserSpotClose,
    UserSpotCreate,
    encode,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.transport._ws import WebSocket
    from zlink_trio.wire.handshake import PeerIdentity

__all__ = ("CLOSE_TIMEOUT", "SILENT_INTERVALS", "ApplicationFrame", "Link", "LinkHandler",
           "silent_intervals")

logger: Final = logging.getLogger("zlink_trio.transport")

#: Seconds a closing link waits for the websocket close handshake before dropping TCP.
CLOSE_TIMEOUT: Final = 1.0
#: A link closes after this many keepalive intervals without receiving anything.
SILENT_INTERVALS: Final = 3
#: Websocket close code for a handler bug (RFC 6455 7.4.1, internal error).
_CLOSE_INTERNAL: Final = 1011

ApplicationFrame = SpotMessage | UserSpotCreate | UserSpotClose | Reply
#: The frames a link carries for the layer above (:meth:`Link.send_nowait`, the reader).
_APPLICATION: Final = frozenset({SpotMessage, UserSpotCreate, UserSpotClose, RelocateSpot,
                                 NodeOperation, RelayDone, Reply})


class LinkHandler(Protocol):
    """What the layer above (the runtime) provides to the transport."""

    async def check_peer(self, peer: PeerIdentity) -> bool:
        """Admit an authenticated peer (``False`` refuses and closes the link).

        Called once per link after the peer's MAC checked out and before the
        link is usable (server: before WELCOME is sent; client: after WELCOME
        was verified). Bounded by ``handshake_timeout``.
        """
        ...

    def frame_received(self, link: Link, frame: ApplicationFrame) -> None:
        """Every application frame of a link, in arrival order, from its reader task.

        Must not block. An exception it raises is a bug: it is logged and
        that link is closed.
        """
        ...

    def link_closed(self, link: Link) -> None:
        """Called exactly once per authenticated link when it closes, for any reason."""
        ...


class Link:
    """An open, authenticated link to one peer node.

    ``peer`` is the authenticated identity (with the negotiated
    ``max_frame_bytes``); ``outbound`` is true if this node dialled it.
    Built by the transport only, and run by it with :meth:`serve`.

    ``await link.flush()`` writes the queued frames from the calling task, unless a
    write is under way: a caller about to wait anyway (a request waiting for its
    reply) saves the hop to the writer task. Over plain TCP this is a non-blocking
    write of what the socket takes at once (the rest is the writer's). Over TLS
    only a small backlog is written there (at most ``FLUSH_MAX_BYTES``); that write
    is shielded -- a write cut in half would break the stream -- and bounded by
    ``FLUSH_TIMEOUT``, after which the link is closed. It never raises: a broken
    link closes through its own tasks. ``flush`` is the send queue's own
    :meth:`~._send_queue.SendQueue.flush`, bound once per link: no wrapper call
    (nor coroutine) of the link's per request.
    """

    __slots__ = (
        "_close_code",
        "_decode",
        "_finished",
        "_handler",
        "_keepalive_interval",
        "_last_received",
        "_scope",
        "_sender",
        "_socket",
        "_stream",
        "_ws",
        "flush",
        "outbound",
        "peer",
    )

    def __init__(
        self,
        *,
        peer: PeerIdentity,
        outbound: bool,
        ws: WebSocket,
        stream: trio.abc.Stream,
        handler: LinkHandler,
        keepalive_interval: float,
        max_send_buffer_bytes: int,
    ) -> None:
        self.peer: Final = peer
        self.outbound: Final = outbound
        self._ws = ws
        self._stream = stream
        self._handler = handler
        self._keepalive_interval = keepalive_interval
        #: Decodes this link's messages (the negotiated limit, checked once).
        self._decode = LinkDecoder(peer.max_frame_bytes)
        #: The frames to write; its ``closed`` is the link's (set by close_soon).
        self._sender = SendQueue(ws, max_bytes=max_send_buffer_bytes,
                                 describe=self._describe(), close_link=self.close_soon)
        #: See the class docstring.
        self.flush: Final[Callable[[], Awaitable[None]]] = self._sender.flush
        #: A duplicate of a plain TCP stream's socket, to read from (and, as the
        #: sender's ``socket``, to write to) without the stream's wrappers.
        self._socket: socket.socket | None = None
        self._close_code = CLOSE_NORMAL
        self._scope: trio.CancelScope | None = None
        self._finished = trio.Event()
        self._last_received = trio.current_time()

    def __repr__(self) -> str:
        direction = "to" if self.outbound else "from"
        state = "closed" if self._sender.closed else "open"
        return f"<Link {direction} {self.peer.node_id!r} {self.peer.node_rid} {state}>"

    @property
    def closed(self) -> bool:
        """True once the link is closing or closed; it never reopens."""
        return self._sender.closed

    @property
    def unwritten(self) -> bool:
        """True while frames are queued that no write took yet (a flush would write them)."""
        return bool(self._sender.queued)

    @property
    def queued_bytes(self) -> int:
        """The bytes queued on the link and not written yet."""
        return self._sender.queued_bytes

    @property
    def writable(self) -> bool:
        """False while more than ``HIGH_WATER_BYTES`` (1 MiB) are queued on the open link.

        Flow control for a sender with much to send (a relocation's relay): queue a
        frame while the link is writable, else ``await`` :meth:`wait_writable` first.
        """
        return self._sender.writable

    async def wait_writable(self) -> None:
        """Wait until the queue is down to ``LOW_WATER_BYTES`` (256 KiB), or the link closed.

        Never raises; the caller bounds the wait (a peer that stops reading keeps it
        waiting).
        """
        await self._sender.wait_writable()

    def _describe(self) -> str:
        return f"node {self.peer.node_id!r} (lifecycle {self.peer.lifecycle_generation})"

    def send_nowait(self, frame: Frame, *, write: bool = False) -> None:
        """Encode ``frame`` and queue it for the link's writer; never blocks.

        ``write=True`` says the caller has nothing more to send for now (a requester
        about to wait for its reply, the last reply of a burst): over plain TCP the
        queue is then written from the calling task at once, without waiting and
        without the hop to the writer task (what the socket does not take is left
        to the writer). Otherwise the writer joins everything queued until it runs
        into one socket write.

        Raises :class:`Unavailable` (naming the peer) if the link is closed,
        or -- after closing the link -- if the queued bytes would exceed
        ``max_send_buffer_bytes``. Raises :class:`InvalidOperation` if
        ``frame`` is not an application frame (SpotMessage, UserSpotCreate,
        UserSpotClose, Reply) or encodes above ``peer.max_frame_bytes``;
        then nothing is sent and the link stays open.
        """
        sender = self._sender
        if sender.closed:
            raise Unavailable(
                f"the link to {self._describe()} is closed; call link_to again to reconnect"
            )
        if type(frame) not in _APPLICATION:
            raise InvalidOperation(
                f"send_nowait sends application frames (SpotMessage, UserSpotCreate, "
                f"UserSpotClose, RelocateSpot, NodeOperation, RelayDone, Reply), got "
                f"{type(frame).__name__}; the "
                "transport sends handshake and keepalive frames itself"
            )
        try:
            data = encode(frame, max_frame_bytes=self.peer.max_frame_bytes)
        except LocalProtocolError as exc:
            raise self.cannot_send(exc) from exc
        self._enqueue(data, write)

    def send_encoded_nowait(self, data: bytes, *, write: bool = False) -> None:
        """Queue one application frame already encoded (``zlink_trio.wire.frames``' direct
        writers: a Ready call, its success reply); as :meth:`send_nowait` otherwise.

        Raises :class:`Unavailable` as :meth:`send_nowait` does, and
        :class:`InvalidOperation` if ``data`` is above ``peer.max_frame_bytes``
        (nothing is sent then and the link stays open).
        """
        if self._sender.closed:
            raise Unavailable(
                f"the link to {self._describe()} is closed; call link_to again to reconnect"
            )
        if len(data) > self.peer.max_frame_bytes:
            raise self.cannot_send(LocalProtocolError(
                f"the frame is {len(data)} bytes, above the {self.peer.max_frame_bytes}-byte "
                "frame limit; send less or raise the limit"))
        try:  # (_enqueue inlined: this is every request's and reply's path)
            wire = self._ws.frame(data)
        except WebSocketClosed:
            self._enqueue(data, write)  # raises Unavailable, closing the link
            return
        self._sender.enqueue(wire, write=write)

    def cannot_send(self, exc: LocalProtocolError) -> InvalidOperation:
        """The error of a frame that cannot be sent on this link (``exc`` says why)."""
        return InvalidOperation(
            f"cannot send to {self._describe()}: {exc.message}; the link's negotiated "
            f"frame limit is {self.peer.max_frame_bytes} bytes"
        )

    def _enqueue(self, data: bytes, write: bool) -> None:
        try:
            wire = self._ws.frame(data)
        except WebSocketClosed:
            self.close_soon()
            raise Unavailable(
                f"the link to {self._describe()} is closing; call link_to again to reconnect"
            ) from None
        self._sender.enqueue(wire, write=write)

    def close_soon(self) -> None:
        """Start closing without waiting: mark closed, cancel the link's tasks."""
        self._sender.mark_closed()
        if self._scope is not None:
            self._scope.cancel()

    async def wait_closed(self) -> None:
        """Wait until the link is closed, for whatever reason (``link_closed`` has run)."""
        await self._finished.wait()

    async def aclose(self) -> None:
        """Close the link and wait until it is closed (``link_closed`` has run).

        Idempotent. The wait is bounded: closing takes at most
        :data:`CLOSE_TIMEOUT` for the websocket close handshake.
        """
        self.close_soon()
        await self._finished.wait()

    # ------------------------------------------------------------------ its tasks

    async def serve(self, on_closed: Callable[[Link], None]) -> None:
        """Run the link until it closes; then close its websocket and call ``on_closed``.

        Called once per link, by the transport, in the task that registered it;
        returns once ``on_closed`` has run (exactly once, whatever ended the link).
        """
        sender = self._sender
        try:
            self._socket = sender.socket = _duplicate_socket(self._stream)
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                if sender.closed:
                    nursery.cancel_scope.cancel()
                nursery.start_soon(self._until_done, sender.writer)
                nursery.start_soon(self._until_done, self._keepalive)
                await self._until_done(self._read)
        finally:
            sender.mark_closed()
            if self._socket is not None:
                # Only the duplicate: the stream still owns the socket.
                trio.lowlevel.notify_closing(self._socket)
                self._socket.close()
                self._socket = sender.socket = None
            with trio.CancelScope(shield=True):
                # A flush still writing (shielded, bounded) owns the stream, and a Close
                # behind part of a frame would be garbage: no close handshake then.
                if sender.can_send_close:
                    with trio.move_on_after(CLOSE_TIMEOUT):
                        await self._ws.aclose(self._close_code)
                await trio.aclose_forcefully(self._stream)
            try:
                on_closed(self)
            finally:
                self._finished.set()

    async def _until_done(self, task: Callable[[], Awaitable[None]]) -> None:
        try:
            await task()
        finally:
            self.close_soon()  # the link is closing: no more sends, the other tasks end

    async def _receive(self) -> bytes:
        """The next bytes from the peer (b"" at end of stream); one wait per read.

        With a plain TCP socket the read skips the stream's wrappers: wait until the
        socket is readable (this task's checkpoint), then one non-blocking ``recv``.
        """
        sock = self._socket
        if sock is None:
            return bytes(await self._stream.receive_some(RECEIVE_BUFFER_BYTES))
        while True:
            await trio.lowlevel.wait_readable(sock)
            try:
                return sock.recv(RECEIVE_BUFFER_BYTES)
            except BlockingIOError:
                continue  # a spurious wake-up
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc

    async def _read(self) -> None:
        """The reader task (module docstring)."""
        ws = self._ws
        receive = self._receive
        enqueue = self._sender.enqueue
        dispatch = self._dispatch
        sock = self._socket
        wait_readable = trio.lowlevel.wait_readable
        # The run's clock itself: what trio.current_time() reads, one call instead of three.
        now = trio.lowlevel.current_clock().current_time
        try:
            # Messages that arrived with the last handshake message come first.
            while ws.inbox:
                if not dispatch(ws.inbox.popleft()):
                    return
            while True:
                if sock is not None:
                    # _receive inlined (one coroutine less per read): wait, one recv.
                    await wait_readable(sock)
                    try:
                        data = sock.recv(RECEIVE_BUFFER_BYTES)
                    except BlockingIOError:
                        continue  # a spurious wake-up
                    except OSError as exc:
                        raise trio.BrokenResourceError(str(exc)) from exc
                else:
                    data = await receive()
                if not data:
                    logger.info("the link to %s closed: the peer closed the connection",
                                self._describe())
                    return
                self._last_received = now()
                one = ws.single(data)  # the common read: one whole frame
                if one is not None:
                    if not dispatch(one):
                        return
                    continue
                for message in ws.receive(data):
                    if not dispatch(message):
                        return
                if ws.control:  # Pongs to websocket Pings, in order with our frames
                    for control in ws.control:
                        enqueue(control)
                    ws.control.clear()
        except WebSocketClosed as exc:
            logger.info("the link to %s closed: %s", self._describe(), exc.reason)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            logger.info("the link to %s broke: %s", self._describe(), exc)
        except RemoteProtocolError as exc:
            self._close_code = CLOSE_PROTOCOL_ERROR
            logger.warning(
                "closing the link to %s: protocol error: %s", self._describe(), exc.message
            )
        except Unavailable:
            pass  # enqueue already logged the overflow and closed the link.

    def _dispatch(self, data: bytes) -> bool:
        """Decode and hand on one message; False if the link must close (a handler bug).

        Raises RemoteProtocolError for a message that is not a frame of an open link.
        """
        frame = self._decode(data)
        kind = type(frame)
        if kind in _APPLICATION:
            try:
                self._handler.frame_received(self, frame)  # type: ignore[arg-type]
            except Exception:
                logger.exception(
                    "frame_received raised on the link to %s (a bug in the handler); "
                    "closing that link", self._describe(),
                )
                self._close_code = _CLOSE_INTERNAL
                return False
        elif kind is Ping:
            assert isinstance(frame, Ping)
            self._sender.enqueue(self._ws.frame(encode(Pong(token=frame.token))))
        elif kind is not Pong:
            raise RemoteProtocolError(
                f"{kind.__name__} frame on an authenticated link; the handshake is over"
            )
        return True

    async def _keepalive(self) -> None:
        """The keepalive task (module docstring)."""
        interval = self._keepalive_interval
        token = 0
        pinged: tuple[float, int] | None = None
        while True:
            last = self._last_received
            now = trio.current_time()
            silence = now - last
            if silence >= SILENT_INTERVALS * interval:
                logger.warning(
                    "closing the link to %s: nothing received for %.3f s "
                    "(keepalive_interval %.3f s)", self._describe(), silence, interval,
                )
                return
            intervals, wake = silent_intervals(last, now, interval)
            if intervals >= 1 and pinged != (last, intervals):
                pinged = (last, intervals)
                token = (token + 1) & 0xFFFF_FFFF_FFFF_FFFF
                try:
                    self._sender.enqueue(self._ws.frame(encode(Ping(token=token))))
                except (Unavailable, WebSocketClosed):
                    return
            await trio.sleep_until(wake)


def silent_intervals(last: float, now: float, interval: float) -> tuple[int, float]:
    """How many whole keepalive intervals of silence lie between ``last`` and ``now``, and
    when the next one ends: always after ``now``. (A float floor division may come out
    one interval short; a wake-up at a time already past would return at once, and on a
    clock that stands still, such as a test's ``MockClock``, forever.)"""
    intervals = int((now - last) // interval)
    while last + (intervals + 1) * interval <= now:
        intervals += 1
    return intervals, last + (intervals + 1) * interval


def _duplicate_socket(stream: trio.abc.Stream) -> socket.socket | None:
    """A duplicate of a plain TCP stream's non-blocking socket, ``None`` for TLS or on failure.

    Writing to it from synchronous code is the same as the stream's own first,
    non-blocking ``send`` attempt, without the checkpoint trio adds after it (the
    reader reads from it too, see :meth:`Link._receive`). The duplicate shares the
    open socket (and its O_NONBLOCK flag); closing it closes only the duplicate.
    """
    if type(stream) is not trio.SocketStream:
        return None
    original = stream.socket
    try:
        return socket.fromfd(original.fileno(), original.family, original.type, original.proto)
    except (OSError, AttributeError):
        return None
