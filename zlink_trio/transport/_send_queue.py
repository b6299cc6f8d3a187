"""The sending half of a link: a queue of websocket-framed bytes, its writer and flushes.

Theory of operation
-------------------
:meth:`Link.send_nowait <._link.Link.send_nowait>` only encodes and frames;
the bytes go to the link's :class:`SendQueue`, so a caller never waits for the
network.

* The **writer** (:meth:`SendQueue.writer`, one of the link's three tasks)
  drains the queue into the stream, joining what is queued into as few socket
  writes as it can. While the queue is empty, or another task is writing, it
  is parked (a ``lowlevel.parking.ParkingSlot``); :meth:`SendQueue.enqueue` wakes it.
* A caller with nothing more to send for now (``enqueue(write=True)``) or
  about to wait anyway (:meth:`SendQueue.flush`, which the link exposes as
  its own ``flush``) writes the queue itself and saves the hop to the writer
  (one sender at a time). Over plain TCP such writes, and the writer's, are
  one non-blocking ``send`` on a duplicate of the socket
  (:attr:`SendQueue.socket`, set by the link), without the checkpoint trio's
  stream adds after each write; what the socket does not take at once is
  written by the writer through the stream. Over TLS a flush writes a small
  backlog through the stream, shielded and bounded.
* **Early writes in a burst** (plain TCP): once :data:`_EARLY_WRITE` frames are
  queued, the task that queues the next one writes them at once. Without this,
  100 requests in flight became a ping-pong of whole batches -- one node built
  all 100 frames while the other idled, then the other way round -- measured at
  half the throughput of letting the peer start on the first frames.
* What a write leaves over stays at the head of the queue -- possibly the rest
  of a frame, so nothing else may be written before it, and the link skips the
  websocket close handshake then (:attr:`SendQueue.can_send_close`).
* The queued bytes are counted; a link whose peer stops reading is closed once
  they would pass ``max_send_buffer_bytes`` instead of growing without bound.
* **Flow control** for a sender with much to send (a relocation's relay): above
  :data:`HIGH_WATER_BYTES` queued the queue is not :attr:`SendQueue.writable`, and
  :meth:`SendQueue.wait_writable` waits until the writes brought it down to
  :data:`LOW_WATER_BYTES` (or the link closed). Such a sender keeps the queue near the
  high-water mark whatever it has to send, and every other frame queued meanwhile
  waits behind at most that much.

Errors. Overflow, a broken socket and a stalled flush close the link through
the ``close_link`` callback it passed in (its tasks end, the link closes);
:meth:`SendQueue.enqueue` raises :class:`Unavailable` on overflow,
:meth:`SendQueue.flush` never raises.
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import Unavailable
from zlink_trio.lowlevel.parking import ParkingSlot
from zlink_trio.transport._ws import WebSocketClosed

if TYPE_CHECKING:
    import socket
    from collections.abc import Callable

    from zlink_trio.transport._ws import WebSocket

__all__ = ("FLUSH_MAX_BYTES", "FLUSH_TIMEOUT", "HIGH_WATER_BYTES", "LOW_WATER_BYTES",
           "SendQueue")

logger: Final = logging.getLogger("zlink_trio.transport")

#: A caller's :meth:`SendQueue.flush` writes at most this many queued bytes itself.
FLUSH_MAX_BYTES: Final = 64 * 1024
#: Seconds a flush may take before the link counts as stalled and is closed.
FLUSH_TIMEOUT: Final = 1.0

#: Above this many queued bytes a link is not writable (:attr:`SendQueue.writable`).
HIGH_WATER_BYTES: Final = 1024 * 1024
#: :meth:`SendQueue.wait_writable` returns once the queued bytes are down to this.
LOW_WATER_BYTES: Final = 256 * 1024

#: A burst writes every this many queued frames from the sending task, so the peer
#: starts on the first frames while the rest are produced (not one batch at the end).
_EARLY_WRITE: Final = 16
#: At most this many queued frames are joined into one socket write.
_WRITE_BATCH: Final = 256


class SendQueue:
    """The websocket-framed bytes a link has yet to write, and the ways they are written.

    ``describe`` names the peer in logs and errors; ``close_link`` starts closing
    the link (it must set :attr:`closed` and end the link's tasks, the writer
    among them). Built by :class:`~._link.Link` only.
    """

    __slots__ = (
        "_close_link",
        "_cut_frame",
        "_describe",
        "_max_bytes",
        "_queue",
        "_queued_bytes",
        "_sending",
        "_space",
        "_writer_parked",
        "_ws",
        "closed",
        "socket",
    )

    def __init__(self, ws: WebSocket, *, max_bytes: int, describe: str,
                 close_link: Callable[[], None]) -> None:
        self._ws = ws
        self._max_bytes = max_bytes
        self._describe = describe
        self._close_link = close_link
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued_bytes = 0
        #: The link is closing or closed: callers' flushes write nothing more.
        self.closed = False
        #: A duplicate of a plain TCP stream's socket, for writes from the calling
        #: task; set (and cleared before it is closed) by the link.
        self.socket: socket.socket | None = None
        #: The queue starts with the rest of a frame written in part.
        self._cut_frame = False
        #: A task is writing queued frames to the websocket (the writer or a flush).
        self._sending = False
        #: The writer task while it is parked waiting for frames.
        #: Where the writer task waits while there is nothing to send.
        self._writer_parked = ParkingSlot()
        #: Set once the queue is down to LOW_WATER_BYTES (or closed); built by a waiter.
        self._space: trio.Event | None = None

    @property
    def queued(self) -> int:
        """The frames (or rest of a frame) queued and not written yet."""
        return len(self._queue)

    @property
    def queued_bytes(self) -> int:
        """The bytes queued and not written yet."""
        return self._queued_bytes

    @property
    def writable(self) -> bool:
        """False while more than :data:`HIGH_WATER_BYTES` are queued on an open link: a
        sender with more to send waits (:meth:`wait_writable`) before queuing more."""
        return self._queued_bytes <= HIGH_WATER_BYTES or self.closed

    async def wait_writable(self) -> None:
        """Wait until the queued bytes are down to :data:`LOW_WATER_BYTES`, or the link closed.

        Returns at once when they are; never raises (a send on a link that closed
        meanwhile raises :class:`Unavailable`). The caller bounds the wait: a peer that
        stops reading keeps it waiting.
        """
        while self._queued_bytes > LOW_WATER_BYTES and not self.closed:
            space = self._space
            if space is None:
                space = self._space = trio.Event()
            self._wake_writer()
            await space.wait()

    def _freed(self) -> None:
        """Bytes were written: wake the flow-control waiters once low water is reached."""
        if self._queued_bytes <= LOW_WATER_BYTES or self.closed:
            space, self._space = self._space, None
            if space is not None:
                space.set()

    def mark_closed(self) -> None:
        """The link is closing: nothing more is written by flushes; waiters wake."""
        self.closed = True
        self._freed()

    @property
    def can_send_close(self) -> bool:
        """True if a websocket Close may be written: no write owns the stream, no frame is cut.

        A flush still writing (shielded, bounded) owns the stream, and a Close
        behind part of a frame would be garbage.
        """
        return not self._sending and not self._cut_frame

    def enqueue(self, data: bytes, *, write: bool = False) -> None:
        """Queue websocket-framed ``data``; with ``write``, write the queue now if it can.

        ``write`` says the caller has nothing more to send for now: over plain TCP
        the queue is then written from the calling task at once, without waiting
        (what the socket does not take is left to the writer), unless a write is
        under way. Otherwise the writer is woken.

        Raises :class:`Unavailable` -- after closing the link -- if the queued bytes
        would pass ``max_bytes``.
        """
        queued = self._queued_bytes + len(data)
        if queued > self._max_bytes:
            logger.warning(
                "closing the link to %s: %d bytes queued and unsent, above "
                "max_send_buffer_bytes=%d (the peer is not reading)",
                self._describe, self._queued_bytes, self._max_bytes,
            )
            self._close_link()
            raise Unavailable(
                f"the link to {self._describe} was closed: {queued} bytes would be queued, "
                f"above max_send_buffer_bytes={self._max_bytes} (the peer is not "
                "reading); retry later or raise the bound"
            )
        queue = self._queue
        if write and not queue and not self._sending and self.socket is not None:
            # The common case of a lone request or reply: one send, no queue round trip.
            try:
                sent = self.socket.send(data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                logger.info("the link to %s broke while sending: %s", self._describe, exc)
                self._close_link()
                return
            if sent == len(data):
                return
            data = data[sent:]
            self._cut_frame = sent > 0
            queued -= sent
        self._queued_bytes = queued
        queue.append(data)
        if ((write or len(self._queue) >= _EARLY_WRITE) and self.socket is not None
                and not self._sending and self._write_now()):
            return
        self._wake_writer()

    def _wake_writer(self) -> None:
        self._writer_parked.wake()

    def _write_now(self) -> bool:
        """Write the queue to the plain TCP socket without waiting; True if it is empty now.

        Used by the writer and :meth:`flush` (one sender at a time) when the link has a
        :attr:`socket`: the write is the stream's own first, non-blocking attempt, minus
        the checkpoint trio adds after it. What the socket does not take stays at the
        head of the queue (possibly the rest of a frame, so nothing else may be written
        before it). Closes the link if the socket broke.
        """
        sock = self.socket
        queue = self._queue
        assert sock is not None
        while queue:
            if len(queue) == 1:
                data = queue.popleft()
            else:
                data = b"".join([queue.popleft() for _ in range(min(len(queue), _WRITE_BATCH))])
            try:
                sent = sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                logger.info("the link to %s broke while sending: %s", self._describe, exc)
                queue.clear()
                self._queued_bytes = 0
                self._close_link()
                return True
            self._queued_bytes -= sent
            if sent < len(data):
                queue.appendleft(data[sent:])
                self._cut_frame = sent > 0 or self._cut_frame
                if self._space is not None:
                    self._freed()
                return False
            self._cut_frame = False
        if self._space is not None:
            self._freed()
        return True

    async def flush(self) -> None:
        """Write the queued frames from the calling task, unless a write is under way.

        A caller that is about to wait anyway (a request waiting for its reply) saves the
        hop to the writer task. Over plain TCP this is a non-blocking write of what the
        socket takes at once (the rest is the writer's). Over TLS only a small backlog is
        written here (at most :data:`FLUSH_MAX_BYTES`, which a socket takes at once unless
        the peer stopped reading); that write is shielded -- a write cut in half would
        break the stream -- and bounded by :data:`FLUSH_TIMEOUT`, after which the link is
        closed. Never raises: a broken link closes through its own tasks.
        """
        if self._sending or not self._queue or self.closed:
            return
        if self.socket is not None:
            if not self._write_now():
                self._wake_writer()
            return
        if self._queued_bytes > FLUSH_MAX_BYTES:
            return
        self._sending = True
        try:
            with trio.CancelScope(shield=True):
                # One batch only: what others queue meanwhile is the writer's.
                with trio.move_on_after(FLUSH_TIMEOUT) as scope:
                    await self._send_batch()
        except WebSocketClosed:
            self._close_link()
            return
        finally:
            self._sending = False
            if self._queue:
                self._wake_writer()
        if scope.cancelled_caught:
            logger.warning("closing the link to %s: a write did not complete within %s s "
                           "(the peer is not reading)", self._describe, FLUSH_TIMEOUT)
            self._close_link()

    async def _send_batch(self) -> None:
        """Send up to :data:`_WRITE_BATCH` queued frames in one write (caller holds _sending)."""
        queue = self._queue
        if len(queue) == 1:
            data = queue.popleft()
        else:
            data = b"".join([queue.popleft() for _ in range(min(len(queue), _WRITE_BATCH))])
        await self._ws.send_all(data)
        self._cut_frame = False
        self._queued_bytes -= len(data)
        if self._space is not None:
            self._freed()

    async def _drain(self) -> None:
        """Send everything queued (also what is queued meanwhile); one sender at a time."""
        self._sending = True
        try:
            while self._queue:
                await self._send_batch()
        finally:
            self._sending = False

    async def writer(self) -> None:
        """The link's writer task: write what is queued until cancelled or the stream breaks.

        Returns (after logging) when the websocket broke; the link then closes.
        """
        try:
            while True:
                if self._sending or not self._queue:
                    # Parked until enqueue has something (a flush may take it first).
                    await self._writer_parked.park()
                    continue
                # Everything queued meanwhile goes out in as few socket writes as it can:
                # without waiting if the socket takes it all, else through the stream.
                if self.socket is not None and self._write_now():
                    continue
                await self._drain()
        except WebSocketClosed as exc:
            logger.info("the link to %s broke while sending: %s", self._describe, exc.reason)
