"""The mesh transport: serve inbound links, dial outbound ones, keep a registry of both.

Theory of operation
-------------------
:func:`open_transport` binds ``listen_host:listen_port`` and serves it with
``trio.serve_listeners`` in one nursery that it owns; every connection, every
dialling attempt and every link's tasks run in that nursery, so nothing
outlives the ``async with`` block. On exit every link is closed (and
``link_closed`` called for each) before the block returns.

Inbound. Each accepted stream first takes one of ``max_unauthenticated``
slots (:mod:`._handshake_slots`); with none free it takes the slot of the
oldest pending handshake of the source holding the most, if that source holds
more than its own, and is otherwise closed at once, unread. The slot is held
through TLS, the websocket upgrade and the HELLO/WELCOME exchange, all bounded
by one ``handshake_timeout``, and freed when the peer is authenticated or
refused; an evicted handshake is cancelled and its connection closed.
A refused peer sees its connection close; no frame says why. Refusals are
logged on ``zlink_trio.transport`` without any secret.

Outbound. :meth:`MeshTransport.link_to` returns an open link to the node
(either direction) if there is one. Otherwise it joins, or starts, the one
dialling attempt for that node rid: a task in the transport's nursery bounded
by ``connect_timeout + handshake_timeout``. Callers only wait for the
attempt's outcome, so a caller that gives up (its own cancel scope) does not
abort the attempt for the others. A failed attempt is logged as part of the peer's
outage episode (``lowlevel.outage``): one WARNING when the first attempt fails, a
count of the calls that failed at most every 30 s after it, one INFO when a link to
that NodeId opens again (either direction) -- never a line per call.

Both directions end in the same place: a :class:`Link` registered by the
peer's node rid and served by :meth:`~._link.Link.serve` in the task
that opened it.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import attrs
import trio

from zlink_trio.core.errors import InvalidConfiguration, RemoteProtocolError, Unavailable
from zlink_trio.lowlevel.outage import Outage
from zlink_trio.transport import _connect, _memory
from zlink_trio.transport._connect import Endpoint
from zlink_trio.transport._handshake_slots import HandshakeSlots, source_of
from zlink_trio.transport._link import Link
from zlink_trio.transport._ws import WebSocketClosed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.core.identity import NodeRid
    from zlink_trio.transport._config import TransportConfig
    from zlink_trio.transport._link import LinkHandler
    from zlink_trio.transport._memory import MemoryNetwork
    from zlink_trio.transport._ws import WebSocket
    from zlink_trio.wire.handshake import LocalIdentity, PeerIdentity

__all__ = ("MeshTransport", "TransportStatistics", "open_transport")

logger: Final = logging.getLogger("zlink_trio.transport")


class _Dial:
    """One dialling attempt that any number of ``link_to`` callers wait for."""

    __slots__ = ("done", "error", "link", "waiting")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.link: Link | None = None
        self.error: Unavailable | None = None
        #: Callers waiting for the outcome (the calls a failure fails).
        self.waiting = 0


@attrs.frozen(kw_only=True)
class TransportStatistics:
    """A snapshot of a transport's links and counters (metrics read it on scrape)."""

    #: Open authenticated links, both directions.
    links: int
    #: Links opened since the transport started, both directions.
    links_opened: int
    #: Links opened to a NodeId this transport had a link to before that closed.
    reconnects: int
    #: Outbound attempts that ended Unavailable (connect, TLS or handshake failed).
    dial_failures: int


class MeshTransport:
    """A node's serving websocket endpoint and its authenticated links.

    Built by :func:`open_transport` only. ``endpoint`` is the URL peers dial
    (``ws://host:port``, ``wss://...`` with a server SSL context).
    """

    def __init__(
        self, config: TransportConfig, handler: LinkHandler, nursery: trio.Nursery, endpoint: str,
        network: MemoryNetwork | None = None,
    ) -> None:
        self.endpoint: Final = endpoint
        #: The in-process network of a test transport (``_memory``), else None.
        self._network = network
        self._config = config
        self._handler = handler
        self._nursery = nursery
        self._links: dict[NodeRid, list[Link]] = {}
        self._dials: dict[NodeRid, _Dial] = {}
        self._handshakes = HandshakeSlots(config.max_unauthenticated)
        self._closing = False
        self._opened = self._reconnects = self._dial_failures = 0
        #: NodeIds a link to which has closed (a later link to one is a reconnect).
        self._lost_peers: set[str] = set()
        #: The outage episode of each NodeId whose last dial failed (until a link opens).
        self._outages: dict[str, Outage] = {}

    def __repr__(self) -> str:
        return f"<MeshTransport {self._config.identity.node_id!r} {self.endpoint}>"

    def links(self) -> list[Link]:
        """The open authenticated links, both directions (diagnostics and tests)."""
        return [link for links in self._links.values() for link in links if not link.closed]

    def statistics(self) -> TransportStatistics:
        """Open links and the link counters. Never raises."""
        return TransportStatistics(links=len(self.links()), links_opened=self._opened,
                                   reconnects=self._reconnects,
                                   dial_failures=self._dial_failures)

    def set_identity(self, identity: LocalIdentity) -> None:
        """Announce ``identity`` on every handshake from now on.

        The runtime binds the transport before its descriptor claim issues the
        lifecycle generation the handshake announces, and refuses links (through
        ``check_peer``) until it has called this.
        """
        self._config = attrs.evolve(self._config, identity=identity)

    def _link_count(self) -> int:
        return sum(len(group) for group in self._links.values())

    def open_link(self, node_rid: NodeRid) -> Link | None:
        """An open authenticated link to ``node_rid`` if one exists now (never dials)."""
        return self._open_link(node_rid)

    def _open_link(self, node_rid: NodeRid) -> Link | None:
        for link in self._links.get(node_rid, ()):
            if not link.closed:
                return link
        return None

    async def link_to(self, node_rid: NodeRid, node_id: str, endpoint: str) -> Link:
        """An open authenticated link to that peer: an existing one or a new outbound one.

        Concurrent callers for one ``node_rid`` share one dialling attempt.
        The WELCOME must come from ``node_id`` with ``node_rid``. Bounded by
        ``connect_timeout + handshake_timeout`` and the caller's cancel scope.
        Raises :class:`Unavailable` naming the endpoint and the reason;
        :class:`InvalidOperation` if ``endpoint`` is not a ws(s) URL.
        """
        link = self._open_link(node_rid)
        if link is not None:
            return link
        if self._closing:
            raise Unavailable(
                f"cannot link to node {node_id!r} at {endpoint}: this node's transport is "
                "shutting down"
            )
        attempt = self._dials.get(node_rid)
        if attempt is None and self._link_count() >= self._config.max_links:
            raise Unavailable(
                f"cannot link to node {node_id!r} at {endpoint}: this node already has "
                f"{self._config.max_links} links open (max_links); retry later, or raise "
                "max_links"
            )
        if attempt is None:
            parsed = Endpoint(endpoint)
            attempt = _Dial()
            self._dials[node_rid] = attempt
            self._nursery.start_soon(self._dial, attempt, parsed, node_id, node_rid)
        # The attempt always ends within connect_timeout + handshake_timeout.
        attempt.waiting += 1
        try:
            await attempt.done.wait()
        finally:
            attempt.waiting -= 1
        if attempt.link is not None and not attempt.link.closed:
            return attempt.link
        if attempt.error is not None:
            raise attempt.error
        raise Unavailable(
            f"the link to node {node_id!r} at {endpoint} closed as soon as it opened; retry"
        )

    # ----------------------------------------------------------------- outbound

    async def _dial(self, attempt: _Dial, endpoint: Endpoint, node_id: str, rid: NodeRid) -> None:
        try:
            try:
                stream, ws, peer = await _connect.dial(
                    endpoint, self._config, self._handler, node_id=node_id, node_rid=rid,
                    network=self._network)
            except Unavailable as exc:
                self._outage(node_id).failed(exc.message, attempt.waiting)
                self._dial_failures += 1
                attempt.error = exc
                return
            link = self._register(stream, ws, peer, outbound=True)
            attempt.link = link
            attempt.done.set()
            if self._dials.get(rid) is attempt:
                del self._dials[rid]
            await link.serve(self._unregister)
        finally:
            if self._dials.get(rid) is attempt:
                del self._dials[rid]
            if attempt.link is None and attempt.error is None:
                attempt.error = Unavailable(
                    f"cannot link to node {node_id!r} at {endpoint.text}: this node's "
                    "transport is shutting down"
                )
            attempt.done.set()

    def _outage(self, node_id: str) -> Outage:
        outage = self._outages.get(node_id)
        if outage is None:
            outage = self._outages[node_id] = Outage(logger, f"the link to node {node_id!r}")
        return outage

    # ----------------------------------------------------------------- inbound

    async def _serve_stream(self, stream: trio.abc.Stream) -> None:
        """``trio.serve_listeners`` handler: one accepted connection, in the transport nursery."""
        config = self._config
        if self._link_count() >= config.max_links and not self._closing:
            logger.warning("refusing a connection: %d links are open (max_links=%d)",
                           self._link_count(), config.max_links)
            await trio.aclose_forcefully(stream)
            return
        if self._closing:
            await trio.aclose_forcefully(stream)
            return
        source = source_of(stream)
        slot, evicted = self._handshakes.admit(source)
        if slot is None:
            logger.warning(
                "refusing a connection from %s: %d connections are already authenticating "
                "(max_unauthenticated=%d), %d of them from that source, and no other source "
                "holds more", source, len(self._handshakes), config.max_unauthenticated,
                self._handshakes.held_by(source),
            )
            await trio.aclose_forcefully(stream)
            return
        if evicted is not None:
            logger.warning(
                "closing the oldest pending handshake from %s (it holds the most of the "
                "max_unauthenticated=%d slots) to admit a connection from %s",
                evicted.source, config.max_unauthenticated, source,
            )
            evicted.cancel_scope.cancel()
        authenticated: tuple[WebSocket, PeerIdentity] | None = None
        try:
            with slot.cancel_scope, trio.move_on_after(config.handshake_timeout) as timeout:
                authenticated = await _connect.accept(stream, config, self._handler,
                                                      slot.verify)
            if slot.evicted:
                logger.info("closed a pending handshake from %s: evicted for a connection "
                            "from a source holding fewer slots", source)
            elif timeout.cancelled_caught:
                logger.info(
                    "refusing a connection: not authenticated within handshake_timeout "
                    "(%s s)", config.handshake_timeout,
                )
            elif authenticated is None:
                logger.warning("refusing a connection: check_peer refused the peer")
        except RemoteProtocolError as exc:
            logger.warning("refusing a connection: %s", exc.message)
        except WebSocketClosed as exc:
            logger.info("a connection closed during authentication: %s", exc.reason)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            logger.info("a connection closed during authentication: %r", exc)
        finally:
            self._handshakes.release(slot)
            if authenticated is None:
                await trio.aclose_forcefully(stream)
        if authenticated is None:
            return
        ws, peer = authenticated
        link = self._register(stream, ws, peer, outbound=False)
        await link.serve(self._unregister)

    # ----------------------------------------------------------------- registry

    def _register(
        self,
        stream: trio.abc.Stream,
        ws: WebSocket,
        peer: PeerIdentity,
        *,
        outbound: bool,
    ) -> Link:
        config = self._config
        link = Link(
            peer=peer,
            outbound=outbound,
            ws=ws,
            stream=stream,
            handler=self._handler,
            keepalive_interval=config.keepalive_interval,
            max_send_buffer_bytes=config.max_send_buffer_bytes,
        )
        self._links.setdefault(peer.node_rid, []).append(link)
        self._opened += 1
        if peer.node_id in self._lost_peers:
            self._reconnects += 1
        outage = self._outages.pop(peer.node_id, None)
        if outage is not None:
            outage.recovered()
        logger.info(
            "link %s node %r (rid %s, lifecycle %d) open",
            "to" if outbound else "from", peer.node_id, peer.node_rid, peer.lifecycle_generation,
        )
        return link

    def _unregister(self, link: Link) -> None:
        self._lost_peers.add(link.peer.node_id)
        links = self._links.get(link.peer.node_rid, [])
        if link in links:
            links.remove(link)
            if not links:
                del self._links[link.peer.node_rid]
        try:
            self._handler.link_closed(link)
        except Exception:
            logger.exception("link_closed raised for %r (a bug in the handler)", link)

    async def _shutdown(self) -> None:
        self._closing = True
        links = [link for group in self._links.values() for link in group]
        for link in links:
            link.close_soon()
        async with trio.open_nursery() as nursery:
            for link in links:
                nursery.start_soon(link.aclose)


async def _listen(config: TransportConfig) -> list[trio.SocketListener]:
    try:
        return await trio.open_tcp_listeners(config.listen_port, host=config.listen_host)
    except OSError as exc:
        raise InvalidConfiguration(
            f"cannot listen on {config.listen_host}:{config.listen_port}: {exc.strerror or exc}; "
            "choose a free port (0 picks one) and an address of this host"
        ) from None


def _endpoint(listener: trio.SocketListener, secure: bool) -> str:
    host, port = listener.socket.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"{'wss' if secure else 'ws'}://{shown}:{port}"


@asynccontextmanager
async def open_transport(
    config: TransportConfig, handler: LinkHandler
) -> AsyncIterator[MeshTransport]:
    """Serve the mesh endpoint for the block; on exit close every link and stop every task.

    Raises :class:`InvalidConfiguration` when binding fails (the message
    names the address).
    """
    network = _memory.NETWORK.get()
    if network is not None:  # a test's in-process network (``_memory``): no socket
        memory = network.listen()
        async with _serving(config, handler, [memory], memory.endpoint, network) as transport:
            yield transport
        return
    socket_listeners = await _listen(config)
    listeners: list[trio.abc.Listener[trio.abc.Stream]]
    secure = config.server_ssl_context is not None
    if config.server_ssl_context is not None:
        listeners = [
            trio.SSLListener(listener, config.server_ssl_context, https_compatible=True)
            for listener in socket_listeners
        ]
    else:
        listeners = list(socket_listeners)
    async with _serving(config, handler, listeners, _endpoint(socket_listeners[0], secure),
                        None) as transport:
        yield transport


@asynccontextmanager
async def _serving(config: TransportConfig, handler: LinkHandler,
                   listeners: list[trio.abc.Listener[trio.abc.Stream]], endpoint: str,
                   network: MemoryNetwork | None) -> AsyncIterator[MeshTransport]:
    async with trio.open_nursery() as nursery:
        transport = MeshTransport(config, handler, nursery, endpoint, network)
        try:
            await nursery.start(trio.serve_listeners, transport._serve_stream, listeners)
        except BaseException:
            for listener in listeners:
                await trio.aclose_forcefully(listener)
            raise
        try:
            yield transport
        finally:
            with trio.CancelScope(shield=True):
                await transport._shutdown()
            nursery.cancel_scope.cancel()
