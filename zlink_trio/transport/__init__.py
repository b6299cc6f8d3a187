"""The mesh transport: authenticated websocket links between the nodes of a cluster.

Theory of operation
-------------------
:func:`open_transport` serves this node's websocket endpoint for the span of
an ``async with`` block and hands back a :class:`MeshTransport`. Every link,
inbound or outbound, is authenticated by the mutual HMAC handshake of
:mod:`zlink_trio.wire.handshake` and admitted by the layer above through
:meth:`LinkHandler.check_peer` before any application frame crosses it. An
open :class:`Link` delivers the peer's application frames to
:meth:`LinkHandler.frame_received` in arrival order and sends with
:meth:`Link.send_nowait`, which never blocks. Keepalive, Ping/Pong and
protocol errors stay inside this package: a peer that misbehaves loses its
link, never the node. ``docs/wire.md`` ("Links") describes the life of a link.
``_memory`` is an in-process network for tests (``zlink_trio.testing``'s
``links="memory"``): a transport opened while its context variable is set listens and
dials over memory streams instead of sockets.

Modules, each importing only modules listed below it:

- ``_transport``       -- :func:`open_transport`, :class:`MeshTransport`: serving, dialling,
                          the registry of links, statistics
- ``_connect``         -- opening a link: the websocket upgrade and the authentication
                          driver, for both sides
- ``_link``            -- :class:`Link`: one open link, its tasks (the reader -- decode,
                          dispatch --, the writer, the keepalive, and the close after
                          them) and its sending side; :class:`LinkHandler`, what the layer
                          above provides
- ``_send_queue``      -- a link's queue of websocket-framed bytes, its writer and flushes
- ``_ws_upgrade``      -- the HTTP upgrade, checked by wsproto's handshake machine
- ``_ws``              -- a link's :class:`~._ws.WebSocket`: RFC 6455 frames parsed and built
                          on the stream, the pre-authentication limits, the close handshake
- ``_ws_frames``       -- frame primitives without state or I/O: opcodes, close codes,
                          masking, one frame, a Close's payload, ``WebSocketClosed``
- ``_handshake_slots`` -- the ``max_unauthenticated`` slots, shared fairly between sources
- ``_memory``          -- the in-process network for tests
- ``_config``          -- :class:`TransportConfig`, checked when it is built
"""

from __future__ import annotations

from zlink_trio.transport._config import TransportConfig
from zlink_trio.transport._link import ApplicationFrame, Link, LinkHandler
from zlink_trio.transport._send_queue import HIGH_WATER_BYTES, LOW_WATER_BYTES
from zlink_trio.transport._transport import MeshTransport, TransportStatistics, open_transport

__all__ = (
    "HIGH_WATER_BYTES",
    "LOW_WATER_BYTES",
    "ApplicationFrame",
    "Link",
    "LinkHandler",
    "MeshTransport",
    "TransportConfig",
    "TransportStatistics",
    "open_transport",
)
