"""Opening a link: the websocket plumbing and the authentication driver, for both sides.

Theory of operation
-------------------
:func:`accept` runs on the server for one accepted stream; :func:`dial`
runs on the client for one endpoint. Both take a nursery that will hold the
websocket's background reader task, and both return an authenticated
``(websocket, PeerIdentity)`` or raise. Neither applies a timeout: the
transport wraps them in ``handshake_timeout`` / ``connect_timeout``.

The sans-IO handshake machines (:mod:`zlink_trio.wire.handshake`) decide;
this module only moves their bytes. Until the peer is authenticated the
websocket accepts messages of at most :data:`MIN_FRAME_BYTES` (1 KiB), so an
unauthenticated peer cannot make the node buffer a large message; a larger
one closes the connection (websocket code 1009). Once authenticated, the
limit becomes ``identity.max_frame_bytes``. trio-websocket has no public
setter for it, so :func:`_raise_message_limit` sets the connection's
``_max_message_size`` -- the same attribute its constructor sets.

:func:`dial` opens the TCP (or TLS) stream itself and wraps it with
``wrap_client_stream``, so that whatever happens -- refusal, timeout,
cancellation -- the socket is closed here and never leaks.
"""

from __future__ import annotations

import ssl
import urllib.parse
from typing import TYPE_CHECKING, Final, cast

import trio
from trio_websocket import (
    ConnectionClosed,
    HandshakeError,
    WebSocketConnection,
    wrap_client_stream,
    wrap_server_stream,
)

from zlink_trio.core.errors import InvalidOperation, RemoteProtocolError, Unavailable
from zlink_trio.wire.frames import MIN_FRAME_BYTES
from zlink_trio.wire.handshake import ClientHandshake, PeerIdentity, ServerHandshake

if TYPE_CHECKING:
    from zlink_trio.core.identity import NodeRid
    from zlink_trio.transport._config import TransportConfig
    from zlink_trio.transport._link import LinkHandler

__all__ = ("MESSAGE_QUEUE_SIZE", "RECEIVE_BUFFER_BYTES", "Endpoint", "accept", "dial")

#: trio-websocket's queue between its socket reader and ``get_message``. The link's
#: reader dispatches synchronously, so a short queue only has to absorb one burst.
MESSAGE_QUEUE_SIZE: Final = 16
#: Bytes asked of the socket per read (trio-websocket's default is 4 KiB).
RECEIVE_BUFFER_BYTES: Final = 64 * 1024


class Endpoint:
    """A parsed ``ws://host:port[/path]`` or ``wss://...`` endpoint."""

    __slots__ = ("host", "host_header", "port", "resource", "secure", "text")

    def __init__(self, text: str) -> None:
        try:
            parts = urllib.parse.urlsplit(text)
            port = parts.port
        except (TypeError, ValueError) as exc:
            raise InvalidOperation(
                f"endpoint {text!r} is not a ws:// or wss:// URL ({exc}); pass the peer's "
                "MeshTransport.endpoint"
            ) from None
        if parts.scheme not in ("ws", "wss") or not parts.hostname:
            raise InvalidOperation(
                f"endpoint {text!r} is not a ws://host:port or wss://host:port URL; pass the "
                "peer's MeshTransport.endpoint"
            )
        self.text: Final = text
        self.secure: Final = parts.scheme == "wss"
        self.host: Final = parts.hostname
        self.port: Final = port if port is not None else (443 if self.secure else 80)
        resource = parts.path or "/"
        self.resource: Final = f"{resource}?{parts.query}" if parts.query else resource
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header: Final = shown if self.port in (80, 443) else f"{shown}:{self.port}"


def _raise_message_limit(ws: WebSocketConnection, limit: int) -> None:
    # trio-websocket 0.12 reads this attribute for every message; no public setter exists.
    ws._max_message_size = limit


def _binary(message: str | bytes) -> bytes:
    if isinstance(message, str):
        raise RemoteProtocolError("a text message during the handshake; frames are binary")
    return message


class _Watched(trio.abc.Stream):
    """Delegates to ``inner``; ``ended`` is set once a read or write failed or hit EOF.

    trio-websocket 0.12's ``wrap_client_stream`` waits for the HTTP upgrade with no
    regard for its reader task: when the stream breaks or closes first (a TLS alert,
    a server that closes the connection unread), the reader ends and the upgrade is
    awaited forever. Racing the upgrade against ``ended`` turns that into an error.
    """

    __slots__ = ("ended", "error", "inner")

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.ended = trio.Event()
        self.error: BaseException | None = None

    def _end(self, error: BaseException | None) -> None:
        if not self.ended.is_set():
            self.error = error
            self.ended.set()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await self.inner.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._end(exc)
            raise

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        try:
            data = await self.inner.receive_some(max_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._end(exc)
            raise
        if not data:
            self._end(None)
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


def _reason(exc: BaseException | None) -> str:
    """The underlying reason of a broken stream (an SSL error is the cause, not the text)."""
    if exc is None:
        return "the peer closed the connection"
    return str(exc.__cause__ or exc) or type(exc).__name__


async def _upgrade(nursery: trio.Nursery, stream: trio.abc.Stream,
                   endpoint: Endpoint) -> WebSocketConnection:
    watched = _Watched(stream)
    ws: WebSocketConnection | None = None

    async def upgrade(race: trio.CancelScope) -> None:
        nonlocal ws
        ws = await wrap_client_stream(
            nursery,
            # Annotated as SocketStream | SSLStream, but only the Stream interface is used.
            cast("trio.SocketStream", watched),
            endpoint.host_header,
            endpoint.resource,
            message_queue_size=MESSAGE_QUEUE_SIZE,
            max_message_size=MIN_FRAME_BYTES,
            receive_buffer_size=RECEIVE_BUFFER_BYTES,
        )
        race.cancel()

    async with trio.open_nursery() as race:
        race.start_soon(upgrade, race.cancel_scope)
        await watched.ended.wait()
        race.cancel_scope.cancel()
    if ws is None:
        raise trio.BrokenResourceError(_reason(watched.error))
    return ws


async def _admit(handler: LinkHandler, peer: PeerIdentity) -> bool:
    verdict = await handler.check_peer(peer)
    return verdict is True


# --------------------------------------------------------------------------- server


async def accept(
    nursery: trio.Nursery,
    stream: trio.abc.Stream,
    config: TransportConfig,
    handler: LinkHandler,
) -> tuple[WebSocketConnection, PeerIdentity] | None:
    """Authenticate one accepted stream; ``None`` if ``check_peer`` refused the peer.

    Raises :class:`RemoteProtocolError` for a handshake the peer got wrong
    and trio-websocket's ``ConnectionClosed`` if the peer went away. The
    caller closes ``stream`` on every outcome but success.
    """
    if isinstance(stream, trio.SSLStream):
        # Fail a bad TLS client now: wrap_server_stream would wait for its upgrade
        # request until handshake_timeout once the stream broke.
        await stream.do_handshake()
    request = await wrap_server_stream(
        nursery,
        stream,
        message_queue_size=MESSAGE_QUEUE_SIZE,
        max_message_size=MIN_FRAME_BYTES,
        receive_buffer_size=RECEIVE_BUFFER_BYTES,
    )
    ws = await request.accept()
    machine = ServerHandshake(
        secret=config.secret, identity=config.identity, random_bytes=config.random_bytes
    )
    await ws.send_message(machine.start())
    welcome = machine.receive(_binary(await ws.get_message()))
    peer = machine.result
    if not await _admit(handler, peer):
        return None
    for data in welcome:
        await ws.send_message(data)
    _raise_message_limit(ws, config.identity.max_frame_bytes)
    return ws, peer


# --------------------------------------------------------------------------- client


async def _open_stream(
    endpoint: Endpoint, config: TransportConfig
) -> trio.SocketStream | trio.SSLStream[trio.SocketStream]:
    if not endpoint.secure:
        return await trio.open_tcp_stream(endpoint.host, endpoint.port)
    context = config.client_ssl_context or ssl.create_default_context()
    return await trio.open_ssl_over_tcp_stream(
        endpoint.host, endpoint.port, ssl_context=context, https_compatible=True
    )


async def dial(
    nursery: trio.Nursery,
    endpoint: Endpoint,
    config: TransportConfig,
    handler: LinkHandler,
    *,
    node_id: str,
    node_rid: NodeRid,
) -> tuple[trio.abc.Stream, WebSocketConnection, PeerIdentity]:
    """Dial ``endpoint`` and authenticate as a client; the peer must be ``node_id``/``node_rid``.

    Raises :class:`Unavailable` naming the endpoint and the reason. Timeouts
    are the caller's (``connect_timeout`` for the first phase is applied
    here, ``handshake_timeout`` for the second); on any failure or
    cancellation the stream is closed before this returns.
    """
    where = f"node {node_id!r} at {endpoint.text}"
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream] | None = None
    try:
        phase = "connecting"
        with trio.fail_after(config.connect_timeout):
            stream = await _open_stream(endpoint, config)
            if isinstance(stream, trio.SSLStream):
                phase = "in the TLS handshake"
                await stream.do_handshake()
            phase = "connecting"
            ws = await _upgrade(nursery, stream, endpoint)
        phase = "authenticating"
        with trio.fail_after(config.handshake_timeout):
            machine = ClientHandshake(
                secret=config.secret,
                identity=config.identity,
                random_bytes=config.random_bytes,
                expected_node_id=node_id,
            )
            machine.start()
            for data in machine.receive(_binary(await ws.get_message())):
                await ws.send_message(data)
            machine.receive(_binary(await ws.get_message()))
            peer = machine.result
            if peer.node_rid != node_rid:
                raise RemoteProtocolError(
                    f"node {peer.node_id!r} answered with rid {peer.node_rid}, expected "
                    f"{node_rid} (the node restarted, or another process took its address)"
                )
            if not await _admit(handler, peer):
                raise Unavailable(f"cannot link to {where}: this node's check_peer refused it")
        _raise_message_limit(ws, config.identity.max_frame_bytes)
        opened, stream = stream, None
        return opened, ws, peer
    except trio.TooSlowError:
        timeout = (config.handshake_timeout if phase == "authenticating"
                   else config.connect_timeout)
        raise Unavailable(
            f"cannot link to {where}: timed out {phase} after {timeout} s; check that the "
            "node is running and reachable, then retry"
        ) from None
    except RemoteProtocolError as exc:
        raise Unavailable(
            f"cannot link to {where}: authentication failed: {exc.message}"
        ) from None
    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        if phase == "in the TLS handshake":
            raise Unavailable(
                f"cannot link to {where}: TLS handshake failed ({_reason(exc)}); check that "
                "client_ssl_context trusts the CA of the peer's certificate, that the "
                "certificate names the endpoint's host, and that the peer serves wss://"
            ) from None
        raise Unavailable(
            f"cannot link to {where}: connection refused or broken while {phase} "
            f"({_reason(exc)}); check that the node is running (and, for wss://, that it "
            "accepts this node's client certificate), then retry"
        ) from None
    except (ConnectionClosed, HandshakeError):
        raise Unavailable(
            f"cannot link to {where}: the peer closed the connection while {phase} (wrong "
            "cluster secret or mesh, or the peer refused this node); check the "
            "configuration of both nodes"
        ) from None
    finally:
        if stream is not None:
            await trio.aclose_forcefully(stream)
