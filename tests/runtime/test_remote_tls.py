"""Calls between two nodes of one process over TLS links (``open_node(ssl_context=...)``).

Both nodes share one in-process ``MemoryStore``, serve ``wss://`` with a certificate
from a throw-away ``trustme`` CA (for ``127.0.0.1``, the host they publish) and dial
with a client context that trusts it. Real clock, every test bounded by
``trio.fail_after``; nothing sleeps to wait for something.
"""

from __future__ import annotations

import ssl
from contextlib import AsyncExitStack

import pytest
import trio
import trustme
from runtime_spots import Add, Counter, Room, RoomSpec, Total, Welcome, journal

import zlink_trio as zl
from zlink_trio.store import MemoryStore

SPOTS = [Counter, Room]
SECRET = b"tls-test-cluster-secret-32-bytes!"
LIMIT = 20


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server_ctx(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
    return ctx


def client_context(ca: trustme.CA | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    if ca is not None:
        ca.configure_trust(ctx)
    return ctx


async def test_request_from_b_reaches_a_spot_owned_by_a_over_wss(ca, server_ctx):
    events = journal()
    store = MemoryStore()
    client_ctx = client_context(ca)
    with trio.fail_after(LIMIT):
        async with AsyncExitStack() as stack:
            a, b = [await stack.enter_async_context(zl.open_node(
                name, store=store, spots=SPOTS, placement_weight=weight, secret=SECRET,
                ssl_context=server_ctx, client_ssl_context=client_ctx))
                for name, weight in (("node-a", 1), ("node-b", 0))]
            assert a.statistics().endpoint.startswith("wss://127.0.0.1:")
            assert b.statistics().endpoint.startswith("wss://127.0.0.1:")
            # Cold activation placed on a (b takes no new Spots), then direct calls.
            assert await b.client.request("c-1", Add(2), reply=Total).instance_spot(
                "counter").timeout(10) == Total(2)
            ref = await b.spots.find("c-1")
            assert ref is not None
            assert ref.node_rid == a.node_rid
            for n in range(3):
                assert await b.client.request("c-1", Add(1), reply=Total) == Total(3 + n)
            assert b.statistics().active_spots == 0
            # A remote create (command 47) and close (command 48) over the same link.
            created = await b.spots.get_or_create("r-1", "room").request(RoomSpec("tls"))
            assert created.state is zl.CreateState.CREATED
            assert created.reply == Welcome("welcome to tls")
            assert created.ref.node_rid == a.node_rid
            assert await b.spots.close(created.ref) is True
    assert [e for e in events if e[0] == "factory" and e[1] == "c-1"] == [
        ("factory", "c-1", ref.generation)]


async def test_node_that_does_not_trust_the_peer_certificate_cannot_reach_its_spots(
        ca, server_ctx):
    journal()
    store = MemoryStore()
    with trio.fail_after(LIMIT):
        async with zl.open_node("node-a", store=store, spots=SPOTS, secret=SECRET,
                                ssl_context=server_ctx,
                                client_ssl_context=client_context(ca)) as a, \
                zl.open_node("node-b", store=store, spots=SPOTS, placement_weight=0,
                             secret=SECRET, ssl_context=server_ctx,
                             client_ssl_context=client_context(None)) as b:
            await a.client.request("c-1", Add(1), reply=Total).instance_spot("counter")
            with pytest.raises(zl.Unavailable, match="TLS handshake failed"):
                await b.client.request("c-1", Add(1), reply=Total).timeout(10)
            # a's Spot is untouched and a still serves it.
            assert await a.client.request("c-1", Add(1), reply=Total) == Total(2)
