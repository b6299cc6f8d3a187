"""One authenticated mesh link: what the layer above provides, and the link's sending side.

Theory of operation
-------------------
A :class:`Link` exists only after the handshake authenticated the peer. From
then on three tasks serve it -- a reader, a writer and a keepalive, all in
one nursery owned by the transport -- until it closes, and then the transport's
``on_closed`` callback runs exactly once; it calls ``handler.link_closed``.
:func:`._link_tasks.serve_link` runs them and describes them, what they do
with the peer's frames and how a link closes. This module holds what the rest
of the node sees of a link:

* :class:`LinkHandler`, what the layer above provides: admitting a peer, every
  application frame of a link (from its reader, synchronously, in arrival
  order) and the one ``link_closed`` per link.
* the **sending** side. The link's :class:`~._send_queue.SendQueue` holds
  websocket-framed bytes; the writer drains it into the stream, joining what is
  queued into as few socket writes as it can. :meth:`Link.send_nowait` only
  encodes, frames and enqueues, so a caller never waits for the network; a
  caller with nothing more to send for now (``send_nowait(write=True)``) or
  about to wait anyway (``await link.flush()``) writes the queue itself and
  saves the hop to the writer. Over plain TCP those writes, and the reader's
  reads, use a duplicate of the socket directly. A link whose peer stops
  reading is closed once its queue would pass ``max_send_buffer_bytes``.
  :mod:`._send_queue` describes how the queue is written.
* closing: :meth:`Link.aclose`, bounded by :data:`CLOSE_TIMEOUT` for the
  websocket close handshake; a closed link never reopens.

Errors. Sending on a closed link is :class:`Unavailable` (naming the peer); a
frame the link cannot send is :class:`InvalidOperation`, and nothing is sent.
What the peer sends wrong is the reader's to judge (:mod:`._link_tasks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import trio

from zlink_trio.core.errors import (
    InvalidOperation,
    LocalProtocolError,
    Unavailable,
)
from zlink_trio.transport._send_queue import SendQueue
from zlink_trio.transport._ws import WebSocketClosed
from zlink_trio.transport._ws_frames import CLOSE_NORMAL
from zlink_trio.wire.frames import (
    Frame,
    LinkDecoder,
    NodeOperation,
    RelocateSpot,
    Reply,
    SpotMessage,
    UserSpotClose,
    UserSpotCreate,
    encode,
)

if TYPE_CHECKING:
    import socket
    from collections.abc import Awaitable, Callable

    from zlink_trio.transport._ws import WebSocket
    from zlink_trio.wire.handshake import PeerIdentity

__all__ = ("CLOSE_TIMEOUT", "ApplicationFrame", "Link", "LinkHandler")

#: Seconds a closing link waits for the websocket close handshake before dropping TCP.
CLOSE_TIMEOUT: Final = 1.0

ApplicationFrame = SpotMessage | UserSpotCreate | UserSpotClose | Reply
#: The frames a link carries for the layer above (:meth:`Link.send_nowait`, the reader).
_APPLICATION: Final = frozenset({SpotMessage, UserSpotCreate, UserSpotClose, RelocateSpot,
                                 NodeOperation, Reply})


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
    Built by the transport only, and served by :func:`._link_tasks.serve_link`,
    which shares the link's private state (its websocket, stream, send queue,
    socket duplicate, close code and cancel scope) with the methods here.

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
        #: The frames to write; its ``closed`` is the link's (set by _close_now).
        self._sender = SendQueue(ws, max_bytes=max_send_buffer_bytes,
                                 describe=self._describe(), close_link=self._close_now)
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

    def _describe(self) -> str:
        return f"node {self.peer.node_id!r} (rid {self.peer.node_rid})"

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
                f"UserSpotClose, RelocateSpot, NodeOperation, Reply), got "
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
            self._close_now()
            raise Unavailable(
                f"the link to {self._describe()} is closing; call link_to again to reconnect"
            ) from None
        self._sender.enqueue(wire, write=write)

    def _close_now(self) -> None:
        """Start closing without waiting: mark closed, cancel the link's tasks."""
        self._sender.closed = True
        if self._scope is not None:
            self._scope.cancel()

    async def aclose(self) -> None:
        """Close the link and wait until it is closed (``link_closed`` has run).

        Idempotent. The wait is bounded: closing takes at most
        :data:`CLOSE_TIMEOUT` for the websocket close handshake.
        """
        self._close_now()
        await self._finished.wait()

