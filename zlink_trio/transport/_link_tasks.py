"""The tasks that serve an open :class:`~._link.Link`: its reader, writer and keepalive.

Theory of operation
-------------------
:func:`serve_link` runs one authenticated link, from the moment the transport
registered it, in the task that opened it; three tasks serve it, all in one
nursery:

* the **reader** reads the stream, feeds the bytes to the link's
  :class:`~._ws.WebSocket` (a frame parser with no task of its own), decodes
  each complete binary message with :func:`zlink_trio.wire.frames.decode` and
  dispatches it *synchronously*: application frames go to
  ``handler.frame_received``, a Ping is answered with a Pong, a Pong only
  proves liveness. No task is spawned per frame and nothing sits between the
  socket and the handler; the reader never waits for anything but the next
  bytes, so it never blocks on a handler. A websocket-level Ping is answered
  through the send queue. Over plain TCP it reads a duplicate of the socket
  directly (one wait and one non-blocking ``recv`` per read), which the send
  queue writes to as well.
* the **writer** is the link's :meth:`~._send_queue.SendQueue.writer`: it
  drains the queue :meth:`Link.send_nowait <._link.Link.send_nowait>` fills
  into the stream (:mod:`._link` describes the sending side).
* the **keepalive** sleeps until the link has been silent (nothing
  received) for one ``keepalive_interval``, then sends a Ping every interval;
  after :data:`SILENT_INTERVALS` intervals of silence it closes the link.

Whichever task ends first -- the peer closed, a protocol error, a handler
bug, the writer's socket broke, keepalive expiry, :meth:`Link.aclose
<._link.Link.aclose>` or the transport's shutdown -- ends the other two. Then
the websocket close handshake runs (bounded by
:data:`~._link.CLOSE_TIMEOUT`, shielded so it also runs on cancellation), the
stream is closed, and the transport's ``on_closed`` callback runs exactly
once; it calls ``handler.link_closed``.

Errors. Bytes from the peer that are not a valid frame (at the websocket or
the mesh level), a text message, a message above the negotiated
``max_frame_bytes``, or a handshake frame after authentication are a
:class:`RemoteProtocolError`: logged, and that link alone is closed.

These functions are the other half of :class:`~._link.Link`: they use the
link's private state (its websocket, stream, send queue, socket duplicate,
close code, cancel scope), which only the link's own methods share with them.
"""

from __future__ import annotations

import logging
import socket
from functools import partial
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import RemoteProtocolError, Unavailable
from zlink_trio.transport._link import _APPLICATION, CLOSE_TIMEOUT
from zlink_trio.transport._ws import RECEIVE_BUFFER_BYTES, WebSocketClosed
from zlink_trio.transport._ws_frames import CLOSE_PROTOCOL_ERROR
from zlink_trio.wire.frames import Ping, Pong, encode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.transport._link import Link

__all__ = ("SILENT_INTERVALS", "serve_link")

logger: Final = logging.getLogger("zlink_trio.transport")

#: A link closes after this many keepalive intervals without receiving anything.
SILENT_INTERVALS: Final = 3

#: Websocket close code for a handler bug (RFC 6455 7.4.1, internal error).
_CLOSE_INTERNAL: Final = 1011


def _duplicate_socket(stream: trio.abc.Stream) -> socket.socket | None:
    """A duplicate of a plain TCP stream's non-blocking socket, ``None`` for TLS or on failure.

    Writing to it from synchronous code is the same as the stream's own first,
    non-blocking ``send`` attempt, without the checkpoint trio adds after it (the
    reader reads from it too, see :func:`_receive`). The duplicate shares the
    open socket (and its O_NONBLOCK flag); closing it closes only the duplicate.
    """
    if type(stream) is not trio.SocketStream:
        return None
    original = stream.socket
    try:
        return socket.fromfd(original.fileno(), original.family, original.type, original.proto)
    except (OSError, AttributeError):
        return None


async def serve_link(link: Link, on_closed: Callable[[Link], None]) -> None:
    """Run ``link`` until it closes; then close its websocket and call ``on_closed``.

    Called once per link, by the transport, in the task that registered it;
    returns once ``on_closed`` has run (exactly once, whatever ended the link).
    """
    sender = link._sender
    try:
        link._socket = sender.socket = _duplicate_socket(link._stream)
        async with trio.open_nursery() as nursery:
            link._scope = nursery.cancel_scope
            if sender.closed:
                nursery.cancel_scope.cancel()
            nursery.start_soon(_until_done, link, sender.writer)
            nursery.start_soon(_until_done, link, partial(_keepalive, link))
            await _until_done(link, partial(_reader, link))
    finally:
        sender.closed = True
        if link._socket is not None:
            # Only the duplicate: the stream still owns the socket.
            trio.lowlevel.notify_closing(link._socket)
            link._socket.close()
            link._socket = sender.socket = None
        with trio.CancelScope(shield=True):
            # A flush still writing (shielded, bounded) owns the stream, and a Close
            # behind part of a frame would be garbage: no close handshake then.
            if sender.can_send_close:
                with trio.move_on_after(CLOSE_TIMEOUT):
                    await link._ws.aclose(link._close_code)
            await trio.aclose_forcefully(link._stream)
        try:
            on_closed(link)
        finally:
            link._finished.set()


async def _until_done(link: Link, task: Callable[[], Awaitable[None]]) -> None:
    try:
        await task()
    finally:
        link._close_now()  # the link is closing: no more sends, the other tasks end


async def _receive(link: Link) -> bytes:
    """The next bytes from the peer (b"" at end of stream); one wait per read.

    With a plain TCP socket the read skips the stream's wrappers: wait until the
    socket is readable (this task's checkpoint), then one non-blocking ``recv``.
    """
    sock = link._socket
    if sock is None:
        return bytes(await link._stream.receive_some(RECEIVE_BUFFER_BYTES))
    while True:
        await trio.lowlevel.wait_readable(sock)
        try:
            return sock.recv(RECEIVE_BUFFER_BYTES)
        except BlockingIOError:
            continue  # a spurious wake-up
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc


async def _reader(link: Link) -> None:
    ws = link._ws
    receive = _receive
    enqueue = link._sender.enqueue
    dispatch = _dispatch
    sock = link._socket
    wait_readable = trio.lowlevel.wait_readable
    # The run's clock itself: what trio.current_time() reads, one call instead of three.
    now = trio.lowlevel.current_clock().current_time
    try:
        # Messages that arrived with the last handshake message come first.
        while ws.inbox:
            if not dispatch(link, ws.inbox.popleft()):
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
                data = await receive(link)
            if not data:
                logger.info("the link to %s closed: the peer closed the connection",
                            link._describe())
                return
            link._last_received = now()
            one = ws.single(data)  # the common read: one whole frame
            if one is not None:
                if not dispatch(link, one):
                    return
                continue
            for message in ws.receive(data):
                if not dispatch(link, message):
                    return
            if ws.control:  # Pongs to websocket Pings, in order with our frames
                for control in ws.control:
                    enqueue(control)
                ws.control.clear()
    except WebSocketClosed as exc:
        logger.info("the link to %s closed: %s", link._describe(), exc.reason)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        logger.info("the link to %s broke: %s", link._describe(), exc)
    except RemoteProtocolError as exc:
        link._close_code = CLOSE_PROTOCOL_ERROR
        logger.warning(
            "closing the link to %s: protocol error: %s", link._describe(), exc.message
        )
    except Unavailable:
        pass  # enqueue already logged the overflow and closed the link.


def _dispatch(link: Link, data: bytes) -> bool:
    """Decode and hand on one message; False if the link must close (a handler bug).

    Raises RemoteProtocolError for a message that is not a frame of an open link.
    """
    frame = link._decode(data)
    kind = type(frame)
    if kind in _APPLICATION:
        try:
            link._handler.frame_received(link, frame)  # type: ignore[arg-type]
        except Exception:
            logger.exception(
                "frame_received raised on the link to %s (a bug in the handler); "
                "closing that link", link._describe(),
            )
            link._close_code = _CLOSE_INTERNAL
            return False
    elif kind is Ping:
        assert isinstance(frame, Ping)
        link._sender.enqueue(link._ws.frame(encode(Pong(token=frame.token))))
    elif kind is not Pong:
        raise RemoteProtocolError(
            f"{kind.__name__} frame on an authenticated link; the handshake is over"
        )
    return True


async def _keepalive(link: Link) -> None:
    interval = link._keepalive_interval
    token = 0
    pinged: tuple[float, int] | None = None
    while True:
        last = link._last_received
        silence = trio.current_time() - last
        if silence >= SILENT_INTERVALS * interval:
            logger.warning(
                "closing the link to %s: nothing received for %.3f s (keepalive_interval "
                "%.3f s)", link._describe(), silence, interval,
            )
            return
        intervals = int(silence // interval)
        if intervals >= 1 and pinged != (last, intervals):
            pinged = (last, intervals)
            token = (token + 1) & 0xFFFF_FFFF_FFFF_FFFF
            try:
                link._sender.enqueue(link._ws.frame(encode(Ping(token=token))))
            except (Unavailable, WebSocketClosed):
                return
        await trio.sleep_until(last + (intervals + 1) * interval)
