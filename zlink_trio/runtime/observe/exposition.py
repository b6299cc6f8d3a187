"""``metrics_port=``: the registry's text exposition on ``GET /metrics``, served by Trio.

:func:`bind_metrics` binds the port before the node claims anything (a port in use
is a configuration error and nothing is written); :func:`serve_metrics` serves it as
a task of the node's nursery, so it ends with the node.  No thread, no framework: each
connection reads one request head (at most :data:`MAX_HEAD_BYTES`, within
:data:`IO_TIMEOUT` seconds), answers it with ``prometheus_client.generate_latest`` (or
404 / 405 / 400; 500 when a collector of the registry raises -- logged, the node goes on)
and closes.  At most :data:`MAX_CONNECTIONS` are served at once; one
more is closed unread.
"""

from __future__ import annotations

import errno
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import trio
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.runtime.observe.logs import NODE

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from prometheus_client.registry import CollectorRegistry

__all__ = ("IO_TIMEOUT", "MAX_CONNECTIONS", "MAX_HEAD_BYTES", "bind_metrics", "serve_metrics")

#: Bytes a request head may take (request line and headers).
MAX_HEAD_BYTES: Final = 8192
#: Seconds to read a request head, and again to write the answer.
IO_TIMEOUT: Final = 5.0
#: Connections served at once.
MAX_CONNECTIONS: Final = 16


@asynccontextmanager
async def bind_metrics(host: str, port: int) -> AsyncIterator[list[trio.SocketListener]]:
    """Bind ``host:port`` (0: any free port) for the exposition; closed on exit.

    Raises :class:`InvalidConfiguration` when it cannot be bound.
    """
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        why = "it is in use" if exc.errno == errno.EADDRINUSE else str(exc)
        raise InvalidConfiguration(
            f"metrics_port={port} on {host!r} cannot be bound ({why}); pick another port, "
            "or 0 for any free one (node.metrics_url names it)"
        ) from exc
    try:
        yield listeners
    finally:
        for listener in listeners:
            await listener.aclose()


def url_of(listeners: list[trio.SocketListener]) -> str:
    """``http://host:port/metrics`` of the first listener."""
    host, port = listeners[0].socket.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/metrics"


async def serve_metrics(registry: CollectorRegistry,
                        listeners: list[trio.SocketListener]) -> None:
    """Serve ``registry`` on ``listeners`` until cancelled (a task of the node's nursery)."""
    server = _Server(registry)
    await trio.serve_listeners(server.handle, listeners)


class _Server:
    __slots__ = ("active", "registry")

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.active = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            if self.active >= MAX_CONNECTIONS:
                return
            self.active += 1
            try:
                await self._answer(stream)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass  # the scraper went away: nothing to answer
            finally:
                self.active -= 1

    async def _answer(self, stream: trio.SocketStream) -> None:
        head = b""
        with trio.move_on_after(IO_TIMEOUT):
            while b"\r\n\r\n" not in head and len(head) <= MAX_HEAD_BYTES:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                head += chunk
        status, body, content_type = self._response(head)
        lines = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}",
                 f"Content-Length: {len(body)}", "Connection: close"]
        if status.startswith("405"):
            lines.append("Allow: GET, HEAD")
        lines += ["", ""]
        with trio.move_on_after(IO_TIMEOUT):
            await stream.send_all("\r\n".join(lines).encode("ascii") + (
                b"" if head.startswith(b"HEAD ") else body))

    def _response(self, head: bytes) -> tuple[str, bytes, str]:
        text = "text/plain; charset=utf-8"
        if b"\r\n\r\n" not in head:
            return "400 Bad Request", b"incomplete or oversized request head\n", text
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return "400 Bad Request", b"not an HTTP/1.x request line\n", text
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", b"only GET /metrics\n", text
        if target not in (b"/metrics", b"/"):
            return "404 Not Found", b"the metrics are at /metrics\n", text
        try:
            return "200 OK", generate_latest(self.registry), CONTENT_TYPE_LATEST
        except Exception:  # a broken collector fails this scrape, never the node
            NODE.exception("the metrics scrape failed (a collector of the registry raised)")
            return "500 Internal Server Error", b"a collector raised; see the log\n", text
