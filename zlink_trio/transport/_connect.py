"""Opening a link: the websocket upgrade and the authentication driver, for both sides.

Theory of operation
-------------------
:func:`accept` runs on the server for one accepted stream; :func:`dial`
runs on the client for one endpoint. Both return an authenticated
``(WebSocket, PeerIdentity)`` or raise. ``accept`` applies no timeout (the
transport wraps it in ``handshake_timeout``); ``dial`` applies
``connect_timeout`` up to the websocket upgrade and ``handshake_timeout`` after.

The websocket is upgraded by :mod:`._ws_upgrade` (wsproto's handshake
machine) and then framed by :mod:`._ws`, both driven on the stream by the
calling task, so nothing runs in the background while a link is being
opened. The sans-IO handshake machines (:mod:`zlink_trio.wire.handshake`)
decide; this module only moves their bytes. Until the peer is authenticated
the websocket accepts messages of at most :data:`MIN_FRAME_BYTES` (1 KiB),
unfragmented, and at most two Pings or Pongs (:mod:`._ws`), so an
unauthenticated peer cannot make the node buffer a large message or answer a
flood; either ends the connection. The server reads exactly one message (the
HELLO): anything behind it before the WELCOME is sent -- a second frame, a
Ping, part of a frame -- ends the connection before the MAC is checked. The
client reads exactly two (CHALLENGE, WELCOME) and refuses anything behind the
CHALLENGE; what arrives behind the WELCOME is the link's first traffic and is
parsed under the new limit. Once authenticated, the limit becomes
``identity.max_frame_bytes``.

:func:`dial` opens the TCP (or TLS) stream itself, so that whatever happens --
refusal, timeout, cancellation -- the socket is closed here and never leaks.
"""

from __future__ import annotations

import ssl
import urllib.parse
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import InvalidOperation, RemoteProtocolError, Unavailable
from zlink_trio.transport._ws import WebSocket, WebSocketClosed
from zlink_trio.transport._ws_upgrade import client_upgrade, server_upgrade
from zlink_trio.wire.frames import MIN_FRAME_BYTES
from zlink_trio.wire.handshake import ClientHandshake, PeerIdentity, ServerHandshake

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.core.identity import NodeRid
    from zlink_trio.transport._config import TransportConfig
    from zlink_trio.transport._link import LinkHandler

__all__ = ("Endpoint", "accept", "dial")


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


def _reason(exc: BaseException | None) -> str:
    """The underlying reason of a broken stream (an SSL error is the cause, not the text)."""
    if exc is None:
        return "the peer closed the connection"
    return str(exc.__cause__ or exc) or type(exc).__name__


async def _admit(handler: LinkHandler, peer: PeerIdentity) -> bool:
    verdict = await handler.check_peer(peer)
    return verdict is True


# --------------------------------------------------------------------------- server


async def accept(
    stream: trio.abc.Stream,
    config: TransportConfig,
    handler: LinkHandler,
    on_verified: Callable[[], None] | None = None,
) -> tuple[WebSocket, PeerIdentity] | None:
    """Authenticate one accepted stream; ``None`` if ``check_peer`` refused the peer.

    ``on_verified`` is called once the HELLO's MAC checked out, before
    ``check_peer``. Raises :class:`RemoteProtocolError` for an upgrade or
    handshake the peer got wrong and :class:`WebSocketClosed` if the peer
    went away. The caller closes ``stream`` on every outcome but success.
    """
    if isinstance(stream, trio.SSLStream):
        # Fail a bad TLS client now, with the TLS error as the reason.
        await stream.do_handshake()
    ws = await server_upgrade(stream, MIN_FRAME_BYTES)
    machine = ServerHandshake(
        secret=config.secret, identity=config.identity, random_bytes=config.random_bytes
    )
    await ws.send_message(machine.start())
    hello = await ws.get_message()
    if ws.pending():
        raise RemoteProtocolError("a second websocket frame before authentication (only the "
                                  "HELLO may come before the WELCOME)")
    welcome = machine.receive(hello)
    peer = machine.result
    if on_verified is not None:
        on_verified()
    if not await _admit(handler, peer):
        return None
    for data in welcome:
        await ws.send_message(data)
    ws.authenticated(config.identity.max_frame_bytes)
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
    endpoint: Endpoint,
    config: TransportConfig,
    handler: LinkHandler,
    *,
    node_id: str,
    node_rid: NodeRid,
) -> tuple[trio.abc.Stream, WebSocket, PeerIdentity]:
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
            ws = await client_upgrade(stream, endpoint.host_header, endpoint.resource,
                                      MIN_FRAME_BYTES)
        phase = "authenticating"
        with trio.fail_after(config.handshake_timeout):
            machine = ClientHandshake(
                secret=config.secret,
                identity=config.identity,
                random_bytes=config.random_bytes,
                expected_node_id=node_id,
            )
            machine.start()
            challenge = await ws.get_message()
            if ws.pending():
                raise RemoteProtocolError("a second websocket frame before the HELLO (the "
                                          "server may send only the CHALLENGE)")
            for data in machine.receive(challenge):
                await ws.send_message(data)
            machine.receive(await ws.get_message())
            peer = machine.result
            if peer.node_rid != node_rid:
                raise RemoteProtocolError(
                    f"node {peer.node_id!r} answered with rid {peer.node_rid}, expected "
                    f"{node_rid} (the node restarted, or another process took its address)"
                )
            if not await _admit(handler, peer):
                raise Unavailable(f"cannot link to {where}: this node's check_peer refused it")
            # Frames behind the WELCOME are the link's; a Ping among them is answered now.
            ws.authenticated(config.identity.max_frame_bytes)
            await ws.send_control()
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
    except WebSocketClosed as exc:
        if phase == "connecting":
            raise Unavailable(
                f"cannot link to {where}: connection refused or broken while connecting "
                f"({exc.reason}); check that the node is running and serves this scheme "
                "(and, for wss://, that it accepts this node's client certificate), then retry"
            ) from None
        raise Unavailable(
            f"cannot link to {where}: {exc.reason} while {phase} (wrong cluster secret or "
            "mesh, or the peer refused this node); check the configuration of both nodes"
        ) from None
    finally:
        if stream is not None:
            await trio.aclose_forcefully(stream)
