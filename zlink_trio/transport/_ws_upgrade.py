"""The HTTP upgrade of a link's websocket, checked by wsproto's handshake machine.

Theory of operation
-------------------
:func:`client_upgrade` sends the HTTP upgrade request and reads up to the 101
response; :func:`server_upgrade` reads the request and answers 101. wsproto's
handshake machine (``WSConnection``) checks both (headers, key, accept token);
it is fed the HTTP head as it arrives -- a peer that does not speak HTTP is
refused without waiting for more -- but never a byte past its end, so whatever
arrived behind it is handed to the :class:`~._ws.WebSocket` the upgrade
returns, which parses those bytes as its first frames (docs/decisions.md,
"Links drive the websocket themselves"). That websocket starts in its
pre-authentication state; the handshake driver ends it.

Nothing here applies a timeout or closes the stream.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from typing import Final

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Event, RejectConnection, Request
from wsproto.utilities import ProtocolError

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.transport._ws import RECEIVE_BUFFER_BYTES, WebSocket, WebSocketClosed
from zlink_trio.transport._ws_frames import _broken

__all__ = ("MAX_UPGRADE_HEAD", "client_upgrade", "server_upgrade")

#: The longest HTTP head (request or response) the upgrade accepts.
MAX_UPGRADE_HEAD: Final = 16 * 1024


#: What a peer whose first bytes are not an HTTP request gets before the close.
NOT_HTTP_ANSWER: Final = (b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n"
                          b"connection: close\r\n\r\n")


async def _upgrade_event(stream: trio.abc.Stream, ws: WSConnection,
                         what: str, start: bytes) -> tuple[Event, bytes]:
    """Feed ``ws`` the HTTP head as it arrives; its first event and the bytes behind the head.

    wsproto sees each chunk at once but never a byte past the head: those are frames.
    A head must begin with ``start`` (``GET `` for a request, ``HTTP/`` for a response):
    bytes that cannot (a TLS hello, an SSH banner, a probe) are refused at the first
    chunk, not after the handshake timeout. Raises wsproto's ProtocolError for a bad
    head, RemoteProtocolError for one that is not HTTP at all.
    """
    data = b""
    fed = 0
    while True:
        try:
            chunk = await stream.receive_some(RECEIVE_BUFFER_BYTES)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _broken(exc) from None
        if not chunk:
            raise WebSocketClosed(f"the peer closed the connection during the websocket {what}")
        data += chunk
        if not data.startswith(start[:len(data)]):
            raise RemoteProtocolError(
                f"the websocket {what} does not begin with {start!r} (got {data[:16]!r}): "
                "the peer does not speak HTTP")
        end = data.find(b"\r\n\r\n", max(0, fed - 3))
        stop = end + 4 if end >= 0 else len(data)
        ws.receive_data(data[fed:stop])
        fed = stop
        for event in ws.events():
            return event, data[stop:]
        if end >= 0:
            raise RemoteProtocolError(f"the websocket {what} is not a complete HTTP message")
        if len(data) > MAX_UPGRADE_HEAD:
            raise RemoteProtocolError(f"a websocket {what} longer than {MAX_UPGRADE_HEAD} bytes")


async def _send_upgrade_bytes(stream: trio.abc.Stream, data: bytes) -> None:
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise _broken(exc) from None


async def client_upgrade(stream: trio.abc.Stream, host: str, resource: str,
                         max_message: int) -> WebSocket:
    """Upgrade ``stream`` as the client (``Host: host``, ``GET resource``).

    Raises :class:`WebSocketClosed` if the server refuses the upgrade or the
    stream ends first, :class:`RemoteProtocolError` for a response that is not
    a valid upgrade.
    """
    ws = WSConnection(ConnectionType.CLIENT)
    await _send_upgrade_bytes(stream, ws.send(Request(host=host, target=resource)))
    try:
        event, behind = await _upgrade_event(stream, ws, "upgrade response", b"HTTP/")
    except ProtocolError as exc:
        raise RemoteProtocolError(f"a bad websocket upgrade response: {exc}") from None
    if isinstance(event, AcceptConnection):
        return WebSocket(stream, client=True, max_message=max_message, buffered=behind,
                         pre_auth=True)
    if isinstance(event, RejectConnection):
        raise WebSocketClosed(
            f"the server refused the websocket upgrade (HTTP {event.status_code})")
    raise RemoteProtocolError(f"a bad websocket upgrade response ({type(event).__name__})")


def _bad_key(request: Request) -> str:
    """What is wrong with the request's Sec-WebSocket-Key ("" when it is valid).

    RFC 6455 §4.2.1: the key is the base64 of 16 bytes. wsproto accepts any value, so a
    scanner's or a broken client's upgrade would otherwise get 101.
    """
    headers = {bytes(name).lower(): bytes(value) for name, value in request.extra_headers}
    value = headers.get(b"sec-websocket-key")
    if value is None:
        return "no Sec-WebSocket-Key header"
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return f"Sec-WebSocket-Key {value[:40]!r} is not base64"
    if len(raw) != 16:
        return f"Sec-WebSocket-Key decodes to {len(raw)} bytes, not 16"
    return ""


async def server_upgrade(stream: trio.abc.Stream, max_message: int) -> WebSocket:
    """Read an upgrade request on ``stream`` and accept it.

    Raises :class:`RemoteProtocolError` for a request that is not a websocket
    upgrade (after answering it with HTTP 400, best effort) and
    :class:`WebSocketClosed` if the stream ends first.
    """
    ws = WSConnection(ConnectionType.SERVER)
    try:
        try:
            event, behind = await _upgrade_event(stream, ws, "upgrade request", b"GET ")
        except RemoteProtocolError:
            # Not HTTP at all: a 400 still tells a TLS client it reached a plain server
            # (its handshake then fails with WRONG_VERSION_NUMBER, not a bare EOF).
            with contextlib.suppress(WebSocketClosed):
                await _send_upgrade_bytes(stream, NOT_HTTP_ANSWER)
            raise
        if isinstance(event, Request):
            problem = _bad_key(event)
            if problem:
                with contextlib.suppress(WebSocketClosed, ProtocolError):
                    await _send_upgrade_bytes(stream, ws.send(RejectConnection(
                        status_code=400, headers=[(b"content-length", b"0")],
                        has_body=False)))
                raise RemoteProtocolError(f"not a websocket upgrade request: {problem}")
            await _send_upgrade_bytes(stream, ws.send(AcceptConnection()))
            return WebSocket(stream, client=False, max_message=max_message, buffered=behind,
                             pre_auth=True)
    except ProtocolError as exc:
        hint = getattr(exc, "event_hint", None)
        if isinstance(hint, RejectConnection):
            with contextlib.suppress(WebSocketClosed, ProtocolError):
                await _send_upgrade_bytes(stream, ws.send(hint))
        raise RemoteProtocolError(f"not a websocket upgrade request: {exc}") from None
    raise RemoteProtocolError(f"not a websocket upgrade request ({type(event).__name__})")
