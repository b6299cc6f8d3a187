"""One authenticated mesh link: a reader, a writer and a keepalive task over one websocket.

Theory of operation
-------------------
A :class:`Link` exists only after the handshake authenticated the peer. From
then on three tasks serve it, all in one nursery owned by the transport:

* the **reader** loops on ``get_message()``, decodes each binary message
  with :func:`zlink_trio.wire.frames.decode` and dispatches it
  *synchronously*: application frames go to ``handler.frame_received``, a
  Ping is answered with a Pong, a Pong only proves liveness. No task is
  spawned per frame, and because the reader never waits for anything but the
  next message, trio-websocket's small internal queue never fills behind it.
* the **writer** drains a queue of encoded frames into the websocket,
  joining what is queued into as few socket writes as it can.
  :meth:`Link.send_nowait` only encodes and enqueues, so a caller never waits
  for the network; a caller about to wait anyway may :meth:`Link.flush` a
  small backlog itself and save the hop to the writer (one sender at a time).
  The queued bytes are counted; a link whose peer stops reading is closed
  once they would pass ``max_send_buffer_bytes`` instead of growing without
  bound.
* the **keepalive** sleeps until the link has been silent (nothing
  received) for one ``keepalive_interval``, then sends a Ping every interval;
  after three intervals of silence it closes the link.

Whichever task ends first -- the peer closed, a protocol error, a handler
bug, the writer's socket broke, keepalive expiry, :meth:`Link.aclose` or the
transport's shutdown -- ends the other two. Then the websocket is closed
(gracefully, bounded by :data:`CLOSE_TIMEOUT`, shielded so it also runs on
cancellation) and the transport's ``on_closed`` callback runs exactly once;
it calls ``handler.link_closed``.

Errors. Bytes from the peer that are not a valid frame, a text message, or a
handshake frame after authentication are a :class:`RemoteProtocolError`:
logged, and that link alone is closed.
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, Final, Protocol

import trio
from trio_websocket import ConnectionClosed
from wsproto.events import BytesMessage

from zlink_trio.core.errors import (
    InvalidOperation,
    LocalProtocolError,
    RemoteProtocolError,
    Unavailable,
)
from zlink_trio.wire.frames import (
    Frame,
    Ping,
    Pong,
    Reply,
    SpotMessage,
    UserSpotClose,
    UserSpotCreate,
    decode,
    encode,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from trio_websocket import WebSocketConnection

    from zlink_trio.wire.handshake import PeerIdentity

__all__ = ("CLOSE_TIMEOUT", "ApplicationFrame", "Link", "LinkHandler")

logger: Final = logging.getLogger("zlink_trio.transport")

#: Seconds a closing link waits for the websocket close handshake before dropping TCP.
CLOSE_TIMEOUT: Final = 1.0
#: A link closes after this many keepalive intervals without receiving anything.
SILENT_INTERVALS: Final = 3

ApplicationFrame = SpotMessage | UserSpotCreate | UserSpotClose | Reply
_APPLICATION: Final = frozenset({SpotMessage, UserSpotCreate, UserSpotClose, Reply})


#: A caller's :meth:`Link.flush` writes at most this many queued bytes itself.
FLUSH_MAX_BYTES: Final = 64 * 1024
#: Seconds a flush may take before the link counts as stalled and is closed.
FLUSH_TIMEOUT: Final = 1.0

#: At most this many queued frames are joined into one socket write.
_WRITE_BATCH: Final = 256


async def _send_messages(ws: WebSocketConnection, messages: list[bytes]) -> None:
    """Send ``messages`` as binary websocket messages with one ``send_all``.

    trio-websocket sends one message per socket write; under load that is a
    system call and a task switch per frame. This does what its
    ``send_message`` does (wsproto event, then ``send_all`` under the
    connection's stream lock, a broken stream means ConnectionClosed) for a
    whole batch. It relies on the 0.12 internals ``_wsproto``, ``_stream``,
    ``_stream_lock``, ``_close_reason`` and ``_abort_web_socket``.
    """
    if len(messages) == 1:
        await ws.send_message(messages[0])
        return
    if ws._close_reason:
        raise ConnectionClosed(ws._close_reason)
    encoder = ws._wsproto.send
    data = b"".join([encoder(BytesMessage(data=message)) for message in messages])
    async with ws._stream_lock:
        try:
            await ws._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await ws._abort_web_socket()
            raise ConnectionClosed(ws._close_reason) from None


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
    Built by the transport only.
    """

    __slots__ = (
        "_closed",
        "_config_max_send",
        "_finished",
        "_handler",
        "_keepalive_interval",
        "_last_received",
        "_queue",
        "_queued_bytes",
        "_scope",
        "_sending",
        "_stream",
        "_writer_task",
        "_ws",
        "outbound",
        "peer",
    )

    def __init__(
        self,
        *,
        peer: PeerIdentity,
        outbound: bool,
        ws: WebSocketConnection,
        stream: trio.abc.AsyncResource,
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
        self._config_max_send = max_send_buffer_bytes
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued_bytes = 0
        #: A task is writing queued frames to the websocket (the writer or a flush).
        self._sending = False
        #: The writer task while it is parked waiting for frames.
        self._writer_task: trio.lowlevel.Task | None = None
        self._closed = False
        self._scope: trio.CancelScope | None = None
        self._finished = trio.Event()
        self._last_received = trio.current_time()

    def __repr__(self) -> str:
        direction = "to" if self.outbound else "from"
        state = "closed" if self._closed else "open"
        return f"<Link {direction} {self.peer.node_id!r} {self.peer.node_rid} {state}>"

    @property
    def closed(self) -> bool:
        """True once the link is closing or closed; it never reopens."""
        return self._closed

    def _describe(self) -> str:
        return f"node {self.peer.node_id!r} (rid {self.peer.node_rid})"

    def send_nowait(self, frame: Frame) -> None:
        """Encode ``frame`` and queue it for the link's writer; never blocks.

        Raises :class:`Unavailable` (naming the peer) if the link is closed,
        or -- after closing the link -- if the queued bytes would exceed
        ``max_send_buffer_bytes``. Raises :class:`InvalidOperation` if
        ``frame`` is not an application frame (SpotMessage, UserSpotCreate,
        UserSpotClose, Reply) or encodes above ``peer.max_frame_bytes``;
        then nothing is sent and the link stays open.
        """
        if self._closed:
            raise Unavailable(
                f"the link to {self._describe()} is closed; call link_to again to reconnect"
            )
        if type(frame) not in _APPLICATION:
            raise InvalidOperation(
                f"send_nowait sends application frames (SpotMessage, UserSpotCreate, "
                f"UserSpotClose, Reply), got {type(frame).__name__}; the transport sends "
                "handshake and keepalive frames itself"
            )
        try:
            data = encode(frame, max_frame_bytes=self.peer.max_frame_bytes)
        except LocalProtocolError as exc:
            raise InvalidOperation(
                f"cannot send to {self._describe()}: {exc.message}; the link's negotiated "
                f"frame limit is {self.peer.max_frame_bytes} bytes"
            ) from exc
        self._enqueue(data)

    def _enqueue(self, data: bytes) -> None:
        queued = self._queued_bytes + len(data)
        if queued > self._config_max_send:
            logger.warning(
                "closing the link to %s: %d bytes queued and unsent, above "
                "max_send_buffer_bytes=%d (the peer is not reading)",
                self._describe(), self._queued_bytes, self._config_max_send,
            )
            self._close_now()
            raise Unavailable(
                f"the link to {self._describe()} was closed: {queued} bytes would be queued, "
                f"above max_send_buffer_bytes={self._config_max_send} (the peer is not "
                "reading); retry later or raise the bound"
            )
        self._queued_bytes = queued
        self._queue.append(data)
        self._wake_writer()

    def _wake_writer(self) -> None:
        writer = self._writer_task
        if writer is not None:
            self._writer_task = None
            trio.lowlevel.reschedule(writer)

    async def flush(self) -> None:
        """Write the queued frames from the calling task, unless a write is under way.

        A caller that is about to wait anyway (a request waiting for its reply) saves the
        hop to the writer task. Only a small backlog is written here (at most
        :data:`FLUSH_MAX_BYTES`, which a socket takes at once unless the peer stopped
        reading); the write is shielded -- a write cut in half would break the stream --
        and bounded by :data:`FLUSH_TIMEOUT`, after which the link is closed. Never
        raises: a broken link closes through its own tasks.
        """
        if (self._sending or not self._queue or self._closed
                or self._queued_bytes > FLUSH_MAX_BYTES):
            return
        self._sending = True
        try:
            with trio.CancelScope(shield=True):
                # One batch only: what others queue meanwhile is the writer's.
                with trio.move_on_after(FLUSH_TIMEOUT) as scope:
                    await self._send_batch()
        except ConnectionClosed:
            self._close_now()
            return
        finally:
            self._sending = False
            if self._queue:
                self._wake_writer()
        if scope.cancelled_caught:
            logger.warning("closing the link to %s: a write did not complete within %s s "
                           "(the peer is not reading)", self._describe(), FLUSH_TIMEOUT)
            self._close_now()

    async def _send_batch(self) -> None:
        """Send up to :data:`_WRITE_BATCH` queued frames in one write (caller holds _sending)."""
        queue = self._queue
        batch = [queue.popleft() for _ in range(min(len(queue), _WRITE_BATCH))]
        await _send_messages(self._ws, batch)
        self._queued_bytes -= sum(map(len, batch))

    async def _drain(self) -> None:
        """Send everything queued (also what is queued meanwhile); one sender at a time."""
        self._sending = True
        try:
            while self._queue:
                await self._send_batch()
        finally:
            self._sending = False

    def _close_now(self) -> None:
        """Start closing without waiting: mark closed, cancel the link's tasks."""
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()

    async def aclose(self) -> None:
        """Close the link and wait until it is closed (``link_closed`` has run).

        Idempotent. The wait is bounded: closing takes at most
        :data:`CLOSE_TIMEOUT` for the websocket close handshake.
        """
        self._close_now()
        await self._finished.wait()

    # ----------------------------------------------------------------- tasks

    async def _serve(self, on_closed: Callable[[Link], None]) -> None:
        """Run the link until it closes; then close the websocket and call ``on_closed``."""
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                if self._closed:
                    nursery.cancel_scope.cancel()
                nursery.start_soon(self._until_done, self._writer, nursery.cancel_scope)
                nursery.start_soon(self._until_done, self._keepalive, nursery.cancel_scope)
                await self._until_done(self._reader, nursery.cancel_scope)
        finally:
            self._closed = True
            with trio.CancelScope(shield=True):
                with trio.move_on_after(CLOSE_TIMEOUT):
                    await self._ws.aclose()
                # A client-side websocket leaves TCP open after the close handshake.
                await trio.aclose_forcefully(self._stream)
            try:
                on_closed(self)
            finally:
                self._finished.set()

    @staticmethod
    async def _until_done(
        task: Callable[[], Awaitable[None]],
        scope: trio.CancelScope,
    ) -> None:
        try:
            await task()
        finally:
            scope.cancel()

    async def _reader(self) -> None:
        ws = self._ws
        handler = self._handler
        limit = self.peer.max_frame_bytes
        application = _APPLICATION
        now = trio.current_time
        try:
            while True:
                data = await ws.get_message()
                self._last_received = now()
                frame = decode(data, max_frame_bytes=limit)
                kind = type(frame)
                if kind in application:
                    try:
                        handler.frame_received(self, frame)  # type: ignore[arg-type]
                    except Exception:
                        logger.exception(
                            "frame_received raised on the link to %s (a bug in the handler); "
                            "closing that link", self._describe(),
                        )
                        return
                elif kind is Ping:
                    assert isinstance(frame, Ping)
                    self._enqueue(encode(Pong(token=frame.token)))
                elif kind is not Pong:
                    raise RemoteProtocolError(
                        f"{kind.__name__} frame on an authenticated link; the handshake is over"
                    )
        except ConnectionClosed as exc:
            logger.info("the link to %s closed: %s", self._describe(), exc.reason)
        except RemoteProtocolError as exc:
            logger.warning(
                "closing the link to %s: protocol error: %s", self._describe(), exc.message
            )
        except Unavailable:
            pass  # _enqueue already logged the overflow and closed the link.

    def _abort_park(self, _: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
        self._writer_task = None
        return trio.lowlevel.Abort.SUCCEEDED

    async def _writer(self) -> None:
        try:
            while True:
                if self._sending or not self._queue:
                    # Parked until _enqueue has something (a flush may take it first).
                    self._writer_task = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(self._abort_park)
                    continue
                # Everything queued meanwhile goes out in as few socket writes as it can.
                await self._drain()
        except ConnectionClosed as exc:
            logger.info("the link to %s broke while sending: %s", self._describe(), exc.reason)

    async def _keepalive(self) -> None:
        interval = self._keepalive_interval
        token = 0
        pinged: tuple[float, int] | None = None
        while True:
            last = self._last_received
            silence = trio.current_time() - last
            if silence >= SILENT_INTERVALS * interval:
                logger.warning(
                    "closing the link to %s: nothing received for %.3f s (keepalive_interval "
                    "%.3f s)", self._describe(), silence, interval,
                )
                return
            intervals = int(silence // interval)
            if intervals >= 1 and pinged != (last, intervals):
                pinged = (last, intervals)
                token = (token + 1) & 0xFFFF_FFFF_FFFF_FFFF
                try:
                    self._enqueue(encode(Ping(token=token)))
                except Unavailable:
                    return
            await trio.sleep_until(last + (intervals + 1) * interval)
