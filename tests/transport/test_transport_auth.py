"""Peer authentication and admission on real sockets: who gets a link and who does not."""

from __future__ import annotations

import os
from functools import partial

import attrs
import pytest
import trio
from transport_helpers import (
    OTHER_SECRET,
    SECRET,
    Recorder,
    config,
    identity,
    port_of,
    raw_websocket,
    read_until_closed,
    spot_message,
)
from trio_websocket import ConnectionClosed, serve_websocket

from zlink_trio.core.errors import Unavailable
from zlink_trio.core.identity import NodeRid
from zlink_trio.transport import open_transport
from zlink_trio.wire.frames import (
    MIN_FRAME_BYTES,
    Challenge,
    Hello,
    Ping,
    Welcome,
    decode,
    encode,
)
from zlink_trio.wire.handshake import ClientHandshake, welcome_mac

LIMIT = 5


async def _closed(ws) -> None:
    """Wait until the server closes ``ws`` (the caller bounds the wait); nothing else comes."""
    assert await read_until_closed(ws) == []


async def _good_peer_links(tb, hb_checked_before: int | None = None) -> None:
    """A well-behaved node still gets a working link to ``tb``."""
    ha = Recorder()
    async with open_transport(config("good"), ha) as ta:
        link = await ta.link_to(tb._config.identity.node_rid, tb._config.identity.node_id,
                                tb.endpoint)
        assert not link.closed


@pytest.mark.parametrize("who", ["dialler", "server"])
async def test_wrong_secret_is_refused(who):
    ha, hb = Recorder(), Recorder()
    a_secret, b_secret = (OTHER_SECRET, SECRET) if who == "dialler" else (SECRET, OTHER_SECRET)
    with trio.fail_after(LIMIT):
        async with open_transport(config("a", secret=a_secret), ha) as ta, \
                open_transport(config("b", secret=b_secret), hb) as tb:
            with pytest.raises(Unavailable, match=rf"'b' at {tb.endpoint}.*closed the connection"):
                await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            assert ta.links() == []
            assert tb.links() == []
        assert hb.checked == []
        assert hb.frames == []
        assert hb.closed == []
        assert ha.checked == []
        assert ha.closed == []


async def test_server_check_peer_false_refuses():
    ha, hb = Recorder(), Recorder(admit=False)
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            with pytest.raises(Unavailable, match="closed the connection"):
                await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            assert [peer.node_id for peer in hb.checked] == ["a"]
            assert tb.links() == []
            assert ta.links() == []
            hb.admit = True
            assert not (await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)).closed
        assert len(hb.closed) == 1


async def test_client_check_peer_false_refuses():
    ha, hb = Recorder(admit=False), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            with pytest.raises(Unavailable, match="check_peer refused"):
                await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            assert [peer.node_id for peer in ha.checked] == ["b"]
            assert ta.links() == []
            assert ha.closed == []


@pytest.mark.parametrize("wrong", ["node_id", "node_rid"])
async def test_welcome_from_another_node_is_refused(wrong):
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            rid, node_id = tb._config.identity.node_rid, "b"
            if wrong == "node_id":
                node_id = "not-b"
            else:
                rid = NodeRid.generate()
            with pytest.raises(Unavailable, match="authentication failed"):
                await ta.link_to(rid, node_id, tb.endpoint)
            assert ta.links() == []
            assert ha.checked == []
            assert ha.closed == []


async def test_welcome_signed_with_another_secret_is_refused():
    """A server that skips the HELLO check and signs WELCOME with its own key."""
    fake = identity("b")

    async def impostor(request):
        ws = await request.accept()
        nonce = os.urandom(32)
        await ws.send_message(encode(Challenge(nonce=nonce)))
        hello = decode(await ws.get_message())
        assert isinstance(hello, Hello)
        unsigned = Welcome(
            node_id=fake.node_id, node_rid=fake.node_rid, lifecycle_generation=1,
            mesh=fake.mesh, max_frame_bytes=fake.max_frame_bytes, nonce=nonce, mac=bytes(32),
        )
        welcome = attrs.evolve(unsigned, mac=welcome_mac(OTHER_SECRET, unsigned, hello))
        await ws.send_message(encode(welcome))
        with pytest.raises(ConnectionClosed):
            await ws.get_message()

    ha = Recorder()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                partial(serve_websocket, impostor, "127.0.0.1", 0, ssl_context=None)
            )
            async with open_transport(config("a"), ha) as ta:
                with pytest.raises(Unavailable, match=r"authentication failed.*WELCOME"):
                    await ta.link_to(fake.node_rid, "b", f"ws://127.0.0.1:{server.port}")
                assert ta.links() == []
                assert ha.checked == []
            nursery.cancel_scope.cancel()


async def test_replayed_hello_is_refused():
    hb = Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("b"), hb) as tb:
            client = ClientHandshake(secret=SECRET, identity=identity("a"),
                                     random_bytes=os.urandom)
            client.start()
            async with raw_websocket(tb.endpoint) as ws:
                (hello,) = client.receive(await ws.get_message())
                await ws.send_message(hello)
                client.receive(await ws.get_message())  # genuine: authenticated
            assert (await hb.closed_rx.receive()).peer.node_id == "a"
            async with raw_websocket(tb.endpoint) as ws:
                assert isinstance(decode(await ws.get_message()), Challenge)
                await ws.send_message(hello)  # the recorded HELLO, on a new connection
                await _closed(ws)
            assert len(hb.checked) == 1
            assert len(hb.closed) == 1
            assert tb.links() == []


async def test_unauthenticated_connections_are_capped_and_time_out():
    hb = Recorder()
    cfg = config("b", max_unauthenticated=2, handshake_timeout=0.3)
    with trio.fail_after(LIMIT):
        async with open_transport(cfg, hb) as tb:
            async with raw_websocket(tb.endpoint) as w1, raw_websocket(tb.endpoint) as w2:
                # Both got their CHALLENGE and never answer: they hold both slots.
                assert isinstance(decode(await w1.get_message()), Challenge)
                assert isinstance(decode(await w2.get_message()), Challenge)
                third = await trio.open_tcp_stream("127.0.0.1", port_of(tb.endpoint))
                async with third:
                    with trio.fail_after(0.25):  # closed at once, long before the timeout
                        assert await third.receive_some(100) == b""
                # handshake_timeout closes the two silent ones and frees the slots.
                await _closed(w1)
                await _closed(w2)
            await _good_peer_links(tb)
        assert hb.checked[0].node_id == "good"


@pytest.mark.parametrize(
    "message",
    [
        b"\x00" * (MIN_FRAME_BYTES + 1),
        encode(Ping(token=1)) + b"\x00" * (MIN_FRAME_BYTES - 11),
        "a text message",
        b"garbage bytes",
        encode(Ping(token=1)),
        encode(spot_message()),
    ],
    ids=["over-1KiB", "over-1KiB-frame", "text", "garbage", "ping", "spot-message"],
)
async def test_bad_preauth_message_closes_that_connection_only(message):
    hb = Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("b"), hb) as tb:
            async with raw_websocket(tb.endpoint) as ws:
                assert isinstance(decode(await ws.get_message()), Challenge)
                await ws.send_message(message)
                await _closed(ws)
            await _good_peer_links(tb)
        assert [peer.node_id for peer in hb.checked] == ["good"]
        assert hb.frames == []
