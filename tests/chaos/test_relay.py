"""The chaos relay's modes on a loopback echo server: pass, delay, cut, black-hole, heal.

Real sockets, so the real clock, every test under ``trio.fail_after``. "Nothing
arrives while black-holed" is checked over a bounded window.
"""

from __future__ import annotations

import functools
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio
from relay import Relay, open_relay

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

TIMEOUT = 10


async def echo(stream: trio.SocketStream, shout: bool = False) -> None:
    async with stream:
        try:
            while data := await stream.receive_some(65536):
                await stream.send_all(data.upper() if shout else data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


async def shout(stream: trio.SocketStream) -> None:
    await echo(stream, shout=True)


@asynccontextmanager
async def echo_behind_relay() -> AsyncIterator[tuple[int, Relay]]:
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, echo, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        port = listeners[0].socket.getsockname()[1]
        async with open_relay(port) as relay:
            yield relay.port, relay
        nursery.cancel_scope.cancel()


async def round_trip(stream: trio.SocketStream, data: bytes) -> bytes:
    await stream.send_all(data)
    got = b""
    while len(got) < len(data):
        chunk = await stream.receive_some(65536)
        assert chunk, "the relay closed the connection"
        got += chunk
    return got


async def test_bytes_pass_both_ways_and_a_delay_holds_each_chunk():
    with trio.fail_after(TIMEOUT):
        async with echo_behind_relay() as (port, relay):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                assert await round_trip(stream, b"hello") == b"hello"
                relay.delay(0.2)
                began = trio.current_time()
                assert await round_trip(stream, b"slow") == b"slow"
                assert trio.current_time() - began >= 0.4  # 0.2 s each way
                relay.heal()
                began = trio.current_time()
                assert await round_trip(stream, b"fast") == b"fast"
                assert trio.current_time() - began < 0.2


async def test_a_cut_closes_open_connections_and_refuses_new_ones_until_healed():
    with trio.fail_after(TIMEOUT):
        async with echo_behind_relay() as (port, relay):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                assert await round_trip(stream, b"x") == b"x"
                relay.cut()
                assert await stream.receive_some(10) == b""  # closed by the relay
            fresh = await trio.open_tcp_stream("127.0.0.1", port)
            async with fresh:
                assert await fresh.receive_some(10) == b""  # accepted, then closed
            relay.heal()
            healed = await trio.open_tcp_stream("127.0.0.1", port)
            async with healed:
                assert await round_trip(healed, b"back") == b"back"


async def test_a_black_hole_moves_no_byte_until_healed_and_keeps_the_connection():
    with trio.fail_after(TIMEOUT):
        async with echo_behind_relay() as (port, relay):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                assert await round_trip(stream, b"x") == b"x"
                relay.blackhole()
                await stream.send_all(b"held")
                with trio.move_on_after(0.3):
                    await stream.receive_some(10)
                    raise AssertionError("a byte crossed the black hole")
                relay.heal()
                got = b""
                while len(got) < 4:
                    got += await stream.receive_some(10)
                assert got == b"held"


async def test_a_new_upstream_serves_new_connections_and_open_ones_keep_theirs():
    with trio.fail_after(TIMEOUT):
        async with echo_behind_relay() as (port, relay), trio.open_nursery() as nursery:
            old = await trio.open_tcp_stream("127.0.0.1", port)
            async with old:
                assert await round_trip(old, b"old") == b"old"
                listeners = await nursery.start(
                    functools.partial(trio.serve_tcp, shout, 0, host="127.0.0.1"))
                relay.upstream = listeners[0].socket.getsockname()[1]
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                async with stream:
                    assert await round_trip(stream, b"moved") == b"MOVED"
                assert await round_trip(old, b"still") == b"still"  # keeps its upstream
            nursery.cancel_scope.cancel()
