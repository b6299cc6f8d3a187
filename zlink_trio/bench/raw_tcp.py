"""The raw Trio TCP echo: the floor of the remote figures, length-prefixed frames on a socket.

Theory of operation
-------------------
Beside the raw websocket echo (:mod:`zlink_trio.bench.raw_ws`) the remote
figures (:mod:`zlink_trio.bench.remote`) are measured against the cheapest
request/reply a Trio program can make between the same two processes: a
plain TCP connection carrying frames of a 4-byte big-endian length and the
payload, no websocket and no zlink code. The peer process serves
:func:`serve_echo`; the measuring process opens :func:`open_echo` and times
its round trips.

The server reads what the socket has, and sends back every complete frame in
it unchanged with one ``send_all`` (what a plain echo loop does; with many
requests in flight, one write answers several). The client serializes writers
with one :class:`trio.Lock` and readers with another (a Trio stream allows
one of each at a time), so many tasks can share one connection: each sends
its frame, then reads one frame. The frame a task reads may be another's:
the count of round trips is the same.

Only Trio is used, so this baseline runs wherever the benchmark does.
"""

from __future__ import annotations

import struct
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Final

import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

__all__ = ("open_echo", "serve_echo")

_HEADER: Final = struct.Struct(">I")
_CHUNK: Final = 65536


def _split(buffer: bytearray) -> int:
    """The length of the complete frames at the start of ``buffer``."""
    end = 0
    while len(buffer) - end >= _HEADER.size:
        (size,) = _HEADER.unpack_from(buffer, end)
        if len(buffer) - end - _HEADER.size < size:
            break
        end += _HEADER.size + size
    return end


async def _echo(stream: trio.SocketStream) -> None:
    buffer = bytearray()
    async with stream:
        try:
            while data := await stream.receive_some(_CHUNK):
                buffer += data
                end = _split(buffer)
                if end:
                    await stream.send_all(bytes(buffer[:end]))
                    del buffer[:end]
        except trio.BrokenResourceError:
            pass


async def serve_echo(nursery: trio.Nursery) -> int:
    """Serve the echo on 127.0.0.1 (a free port) in ``nursery``; return its port."""
    listeners: list[trio.SocketListener] = await nursery.start(
        partial(trio.serve_tcp, _echo, 0, host="127.0.0.1"))
    port: int = listeners[0].socket.getsockname()[1]
    return port


@asynccontextmanager
async def open_echo(port: int, payload: bytes) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Connect to the echo on 127.0.0.1 ``port``; yield one round trip of ``payload``.

    The round trip sends one frame and reads one frame back; any number of tasks may call
    it at once on the one connection.
    """
    frame = _HEADER.pack(len(payload)) + payload
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    send_lock, receive_lock = trio.Lock(), trio.Lock()
    buffer = bytearray()

    async def read_frame() -> None:
        while True:
            if len(buffer) >= _HEADER.size:
                end = _HEADER.size + _HEADER.unpack_from(buffer)[0]
                if len(buffer) >= end:
                    del buffer[:end]
                    return
            data = await stream.receive_some(_CHUNK)
            if not data:
                raise trio.BrokenResourceError(
                    "the raw TCP echo closed the connection; the benchmark peer process "
                    "exited (its error is on stderr above)")
            buffer.extend(data)

    async def round_trip() -> None:
        async with send_lock:
            await stream.send_all(frame)
        async with receive_lock:
            await read_frame()

    async with stream:
        yield round_trip
