"""Before authentication a connection may send one frame of at most 1 KiB, and few Pings.

On both sides of a handshake: the accepting side reads only the HELLO (a larger frame,
a fragmented one, anything behind it, or a Ping flood closes the connection before the
MAC is checked), and the dialling side reads only the CHALLENGE and the WELCOME, so a
fake server cannot make a dialler buffer or answer much either. What a real server
sends right behind its WELCOME is the link's first traffic and arrives intact.
"""

from __future__ import annotations

import contextlib
import os
from contextlib import asynccontextmanager

import pytest
import trio
from transport_helpers import SECRET, Recorder, config, identity, port_of, spot_message

from zlink_trio.core.errors import RemoteProtocolError, Unavailable
from zlink_trio.transport import open_transport
from zlink_trio.transport._ws import PRE_AUTH_CONTROL_FRAMES, WebSocketClosed
from zlink_trio.transport._ws_upgrade import client_upgrade, server_upgrade
from zlink_trio.wire.frames import (
    DEFAULT_MAX_FRAME_BYTES,
    MIN_FRAME_BYTES,
    Challenge,
    Ping,
    decode,
    encode,
)
from zlink_trio.wire.handshake import ClientHandshake, ServerHandshake

LIMIT = 5
#: No handshake times out during a test: a close within LIMIT is the rule at work.
NO_TIMEOUT = 60.0
KEY = b"\x01\x02\x03\x04"


def _frame(b0: int, payload: bytes, *, mask: bool = True, length: int | None = None) -> bytes:
    """One websocket frame, built by hand (masked: from a client)."""
    n = len(payload) if length is None else length
    size = bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big")
    head = bytes([b0, (0x80 if mask else 0) | size[0]]) + size[1:]
    if not mask:
        return head + payload
    return head + KEY + bytes(b ^ KEY[i % 4] for i, b in enumerate(payload))


def _binary(payload: bytes) -> bytes:
    return _frame(0x82, payload)


def _ping(payload: bytes = b"p", *, mask: bool = True) -> bytes:
    return _frame(0x89, payload, mask=mask)


async def _until_closed(stream: trio.abc.Stream) -> bytes:
    """Everything the peer sends until it closes ``stream`` (the caller bounds the wait)."""
    seen = b""
    try:
        while data := await stream.receive_some(4096):
            seen += data
    except trio.BrokenResourceError:
        pass  # closed with our bytes unread: a reset
    return seen


@asynccontextmanager
async def _server_under_test(hb: Recorder):
    async with open_transport(config("b", handshake_timeout=NO_TIMEOUT), hb) as tb:
        yield tb


@asynccontextmanager
async def _upgraded(url: str):
    """A raw client past the HTTP upgrade: (stream, its websocket, the CHALLENGE bytes)."""
    port = port_of(url)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        ws = await client_upgrade(stream, f"127.0.0.1:{port}", "/", MIN_FRAME_BYTES)
        challenge = await ws.get_message()
        assert isinstance(decode(challenge), Challenge)
        yield stream, ws, challenge
    finally:
        await trio.aclose_forcefully(stream)


def _hello(challenge: bytes) -> bytes:
    machine = ClientHandshake(secret=SECRET, identity=identity("raw"), random_bytes=os.urandom)
    machine.start()
    (hello,) = machine.receive(challenge)
    return hello


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records
               if r.name == "zlink_trio.transport")


# ----------------------------------------------------------------- the accepting side


async def test_a_frame_over_1kib_is_refused_from_its_header(caplog):
    hb = Recorder()
    with trio.fail_after(LIMIT):
        async with _server_under_test(hb) as tb, _upgraded(tb.endpoint) as (stream, _, _):
            # Only the header of a 2,000-byte frame: no payload is waited for.
            await stream.send_all(_frame(0x82, b"", length=MIN_FRAME_BYTES + 976)[:8])
            await _until_closed(stream)
    assert hb.checked == []
    assert _logged(caplog, f"above the limit of {MIN_FRAME_BYTES} bytes")


@pytest.mark.parametrize(("behind", "why"), [
    (_binary(encode(Ping(token=1))), "a second frame"),
    (_ping(), "a websocket Ping"),
    (_binary(b"x" * 40)[:9], "part of a frame"),
])
async def test_anything_behind_the_hello_closes_before_the_mac_is_checked(caplog, behind, why):
    hb = Recorder()
    with trio.fail_after(LIMIT):
        async with _server_under_test(hb) as tb, \
                _upgraded(tb.endpoint) as (stream, _, challenge):
            # A HELLO that would authenticate, and `behind` in the same write.
            await stream.send_all(_binary(_hello(challenge)) + behind)
            assert await _until_closed(stream) == b""  # no WELCOME
            assert tb.links() == []
    assert hb.checked == [], why
    assert _logged(caplog, "a second websocket frame before authentication")


async def test_a_fragmented_hello_closes(caplog):
    hb = Recorder()
    with trio.fail_after(LIMIT):
        async with _server_under_test(hb) as tb, \
                _upgraded(tb.endpoint) as (stream, _, challenge):
            hello = _hello(challenge)
            await stream.send_all(_frame(0x02, hello[:10]) + _frame(0x80, hello[10:]))
            assert await _until_closed(stream) == b""
    assert hb.checked == []
    assert _logged(caplog, "fragmented websocket message before authentication")


async def test_a_ping_flood_closes_after_a_few_small_answers(caplog):
    hb = Recorder()
    payload = b"f" * 125  # the largest control payload
    with trio.fail_after(LIMIT):
        async with _server_under_test(hb) as tb, _upgraded(tb.endpoint) as (stream, _, _):
            # Reset part-way through, most likely: the server closed with pings unread.
            with contextlib.suppress(trio.BrokenResourceError):
                await stream.send_all(_ping(payload) * 1000)
            answered = await _until_closed(stream)
    # At most PRE_AUTH_CONTROL_FRAMES Pongs (2 header bytes each) came back, not 1,000.
    assert len(answered) <= PRE_AUTH_CONTROL_FRAMES * (2 + len(payload))
    assert hb.checked == []
    assert _logged(caplog, "Ping/Pong frames before authentication")


async def test_a_few_pings_are_answered_and_the_peer_still_authenticates():
    hb = Recorder()
    with trio.fail_after(LIMIT):
        async with _server_under_test(hb) as tb, \
                _upgraded(tb.endpoint) as (stream, ws, challenge):
            await stream.send_all(b"".join(_ping(b"p%d" % n)
                                           for n in range(PRE_AUTH_CONTROL_FRAMES)))
            pongs = b""
            while len(pongs) < 4 * PRE_AUTH_CONTROL_FRAMES:
                pongs += await stream.receive_some(4096)
            assert pongs == b"".join(_ping(b"p%d" % n, mask=False).replace(b"\x89", b"\x8a", 1)
                                     for n in range(PRE_AUTH_CONTROL_FRAMES))
            machine = ClientHandshake(secret=SECRET, identity=identity("raw"),
                                      random_bytes=os.urandom)
            machine.start()
            for data in machine.receive(challenge):
                await ws.send_message(data)
            machine.receive(await ws.get_message())  # the WELCOME checks out
    assert [peer.node_id for peer in hb.checked] == ["raw"]


# ----------------------------------------------------------------- the dialling side


@asynccontextmanager
async def _fake_server(script):
    """A server with the cluster secret that runs ``script(stream, ws, machine)``."""
    fake = identity("fake")

    async def handle(stream: trio.SocketStream) -> None:
        try:
            ws = await server_upgrade(stream, MIN_FRAME_BYTES)
            machine = ServerHandshake(secret=SECRET, identity=fake, random_bytes=os.urandom)
            await script(stream, ws, machine)
        except (WebSocketClosed, RemoteProtocolError, trio.BrokenResourceError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handle, listeners)
        yield fake, f"ws://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        nursery.cancel_scope.cancel()


def _sends_around_the_challenge(before: bytes, behind: bytes):
    async def script(stream, ws, machine) -> None:
        await ws.send_all(before + ws.frame(machine.start()) + behind)
        await _until_closed(stream)
    return script


@pytest.mark.parametrize(("before", "behind", "reason"), [
    (_frame(0x82, b"", mask=False, length=MIN_FRAME_BYTES + 1)[:4], b"", "above the limit"),
    (_ping(mask=False) * 50, b"", "Ping/Pong frames before authentication"),
    (b"", _frame(0x82, b"x", mask=False), "second websocket frame before the HELLO"),
    (b"", _ping(mask=False), "second websocket frame before the HELLO"),
], ids=["over-1KiB", "ping-flood", "second-frame", "ping-behind"])
async def test_a_dialler_refuses_a_fake_server_that_sends_too_much(before, behind, reason):
    ha = Recorder()
    with trio.fail_after(LIMIT):
        async with _fake_server(_sends_around_the_challenge(before, behind)) as (fake, url), \
                open_transport(config("a", handshake_timeout=NO_TIMEOUT), ha) as ta:
            with pytest.raises(Unavailable, match=reason):
                await ta.link_to(fake.node_rid, "fake", url)
            assert ta.links() == []
    assert ha.checked == []


async def test_what_follows_the_welcome_at_once_reaches_the_link():
    """A server may use the link the moment it sent WELCOME: a big frame right behind it."""
    big = spot_message(7, body=b'"' + b"x" * 100_000 + b'"')
    pong: list[bytes] = []
    answered = trio.Event()

    async def script(stream, ws, machine) -> None:
        await ws.send_message(machine.start())
        welcome = machine.receive(await ws.get_message())
        # The WELCOME, a 100 KB frame and a websocket Ping, in one write.
        await ws.send_all(b"".join(ws.frame(data) for data in welcome)
                          + ws.frame(encode(big, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES))
                          + _ping(b"hi", mask=False))
        pong.append(await stream.receive_some(4096))
        answered.set()
        await _until_closed(stream)

    ha = Recorder()
    with trio.fail_after(LIMIT):
        async with _fake_server(script) as (fake, url), open_transport(config("a"), ha) as ta:
            link = await ta.link_to(fake.node_rid, "fake", url)
            got_link, frame = await ha.frame_rx.receive()
            assert got_link is link
            assert frame == big
            await answered.wait()
    assert pong[0][0] == 0x8A  # the Ping behind the WELCOME was answered
