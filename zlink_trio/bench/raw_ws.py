"""The raw websocket echo: the physical baseline of the remote figures, on trio-websocket.

Theory of operation
-------------------
The remote figures (:mod:`zlink_trio.bench.remote`) are measured beside a
websocket echo between the same two processes that involves no zlink code:
the peer process serves :func:`serve_echo` (every message sent back
unchanged, one at a time per connection), and the measuring process opens
:func:`open_echo` and times its round trips. It is built on trio-websocket,
the library most Trio programs would reach for.

trio-websocket is an optional dependency: the ``bench`` extra (``pip install
'zlink-trio[bench]'``; the ``test`` extra includes it). The mesh transport
does not use it (it speaks RFC 6455 itself), so this is the only module of
the package that imports it, and :mod:`zlink_trio.bench.remote` imports this
module only once it found trio-websocket installed: without it the benchmark
still runs and reports the raw figures as ``null``, the reason under
``unavailable``.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

from trio_websocket import ConnectionClosed, WebSocketServer, open_websocket_url, serve_websocket

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    import trio
    from trio_websocket import WebSocketRequest

__all__ = ("open_echo", "serve_echo")


async def _echo(request: WebSocketRequest) -> None:
    ws = await request.accept()
    try:
        while True:
            await ws.send_message(await ws.get_message())
    except ConnectionClosed:
        pass


async def serve_echo(nursery: trio.Nursery) -> str:
    """Serve the echo on 127.0.0.1 (a free port) in ``nursery``; return its ``ws://`` URL."""
    server: WebSocketServer = await nursery.start(
        partial(serve_websocket, _echo, "127.0.0.1", 0, ssl_context=None))
    return f"ws://127.0.0.1:{server.port}"


@asynccontextmanager
async def open_echo(url: str, payload: bytes) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Connect to the echo at ``url``; yield one round trip of ``payload`` (send, await echo).

    With several tasks calling it the echo each one reads may be another's: the count of
    round trips is the same.
    """
    async with open_websocket_url(url) as ws:

        async def round_trip() -> None:
            await ws.send_message(payload)
            await ws.get_message()

        yield round_trip
