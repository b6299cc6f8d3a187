"""Fair handshake slots: one source idling on every slot cannot lock other peers out.

The rule (``zlink_trio.transport._handshake_slots``): while slots are free anyone gets
one; when all are taken, a newcomer takes the slot of the oldest pending handshake of
the source holding the most, if that source holds at least two more than the
newcomer's; else the newcomer is closed unread. On 127.0.0.0/8 a test can be another
source by binding 127.0.0.2 (Linux routes the whole block to loopback).
"""

from __future__ import annotations

import logging

import pytest
import trio
from transport_helpers import Recorder, config, port_of

from zlink_trio.transport import open_transport
from zlink_trio.transport._handshake_slots import HandshakeSlots
from zlink_trio.transport._ws_upgrade import client_upgrade
from zlink_trio.wire.frames import MIN_FRAME_BYTES, Challenge, decode

LIMIT = 5
#: Long enough that no handshake times out while a test runs (LIMIT bounds the test).
NO_TIMEOUT = 60.0


# ----------------------------------------------------------------- the rule, sans I/O


def test_free_slots_go_to_anyone_even_one_source():
    slots = HandshakeSlots(3)
    got = [slots.admit("10.0.0.1") for _ in range(3)]
    assert all(slot is not None and victim is None for slot, victim in got)
    assert slots.held_by("10.0.0.1") == 3


def test_when_full_a_newcomer_evicts_the_oldest_of_the_largest_source():
    slots = HandshakeSlots(4)
    hog = [slots.admit("10.0.0.1")[0] for _ in range(3)]
    other, _ = slots.admit("10.0.0.2")
    slot, victim = slots.admit("10.0.0.3")
    assert slot is not None
    assert victim is hog[0]
    assert victim.evicted
    assert not hog[1].evicted
    assert not other.evicted
    assert (slots.held_by("10.0.0.1"), slots.held_by("10.0.0.3"), len(slots)) == (2, 1, 4)


def test_when_full_a_source_holding_as_many_as_any_is_refused():
    slots = HandshakeSlots(4)
    for source in ("a", "a", "b", "b"):
        slots.admit(source)
    assert slots.admit("a") == (None, None)  # holds 2, nobody holds more
    assert slots.admit("b") == (None, None)
    slot, victim = slots.admit("c")  # holds 0: takes the oldest of a tie (a's first)
    assert slot is not None
    assert victim is not None
    assert victim.source == "a"


def test_an_eviction_never_just_swaps_two_sources():
    slots = HandshakeSlots(3)
    for source in ("a", "b", "c"):
        slots.admit(source)
    assert slots.admit("d") == (None, None)  # d would hold 1 and a 0: no fairer
    slots = HandshakeSlots(3)
    for source in ("a", "a", "b"):
        slots.admit(source)
    assert slots.admit("b") == (None, None)  # b would hold 2 and a 1: a swap
    assert slots.admit("c")[1] is not None  # c 1, a 1: fairer


def test_the_hog_cannot_win_its_slots_back_by_reconnecting():
    slots = HandshakeSlots(2)
    slots.admit("hog")
    slots.admit("hog")
    peer, victim = slots.admit("peer")
    assert peer is not None
    assert victim is not None
    assert slots.admit("hog") == (None, None)  # holds 1, the peer holds 1
    assert not peer.evicted


def test_a_handshake_past_the_mac_check_is_never_evicted():
    slots = HandshakeSlots(3)
    first, _ = slots.admit("a")
    second, _ = slots.admit("a")
    slots.admit("b")
    first.verify()
    slot, victim = slots.admit("c")
    assert slot is not None
    assert victim is second  # a's oldest pending handshake, not the verified first
    assert not first.evicted
    slots = HandshakeSlots(2)
    for _ in range(2):
        verified, _ = slots.admit("a")
        verified.verify()
    assert slots.admit("d") == (None, None)  # a holds the most, none of it pending


def test_release_is_idempotent_and_frees_the_source():
    slots = HandshakeSlots(1)
    slot, _ = slots.admit("a")
    slots.release(slot)
    slots.release(slot)
    assert (len(slots), slots.held_by("a")) == (0, 0)


# ----------------------------------------------------------------- on real sockets


async def _idle_handshake(port: int, local: str) -> trio.SocketStream:
    """A connection from ``local`` that got its CHALLENGE (so it holds a slot) and stops."""
    stream = await trio.open_tcp_stream("127.0.0.1", port, local_address=local)
    ws = await client_upgrade(stream, f"127.0.0.1:{port}", "/", MIN_FRAME_BYTES)
    assert isinstance(decode(await ws.get_message()), Challenge)
    return stream


async def _until_closed(stream: trio.SocketStream) -> None:
    """Read until the server closes ``stream`` (the caller bounds the wait)."""
    try:
        while await stream.receive_some(4096):
            pass
    except trio.BrokenResourceError:
        pass  # closed with unread bytes: a reset


async def test_sixteen_idle_connections_from_one_source_do_not_lock_a_peer_out(caplog):
    caplog.set_level(logging.INFO, logger="zlink_trio.transport")
    hb = Recorder()
    cfg = config("b", handshake_timeout=NO_TIMEOUT)
    assert cfg.max_unauthenticated == 16
    with trio.fail_after(LIMIT):
        async with open_transport(cfg, hb) as tb, open_transport(config("a"), Recorder()) as ta:
            port = port_of(tb.endpoint)
            idle = [await _idle_handshake(port, "127.0.0.2") for _ in range(16)]
            try:
                # Every slot is taken by 127.0.0.2; the real peer dials from 127.0.0.1.
                link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
                assert not link.closed
                assert [peer.node_id for peer in hb.checked] == ["a"]
                await _until_closed(idle[0])  # the oldest idle handshake made room
            finally:
                for stream in idle:
                    await trio.aclose_forcefully(stream)
    assert any("closing the oldest pending handshake from 127.0.0.2" in r.getMessage()
               for r in caplog.records)


async def test_the_source_holding_every_slot_is_refused_one_more(caplog):
    caplog.set_level(logging.INFO, logger="zlink_trio.transport")
    cfg = config("b", max_unauthenticated=2, handshake_timeout=NO_TIMEOUT)
    with trio.fail_after(LIMIT):
        async with open_transport(cfg, Recorder()) as tb:
            port = port_of(tb.endpoint)
            idle = [await _idle_handshake(port, "127.0.0.2") for _ in range(2)]
            try:
                async with await trio.open_tcp_stream(
                        "127.0.0.1", port, local_address="127.0.0.2") as third:
                    await _until_closed(third)  # closed unread, long before any timeout
            finally:
                for stream in idle:
                    await trio.aclose_forcefully(stream)
    messages = [r.getMessage() for r in caplog.records]
    assert any("refusing a connection from 127.0.0.2" in m for m in messages)
    assert not any("closing the oldest pending handshake" in m for m in messages)


@pytest.mark.parametrize("waiting", [1, 3])
async def test_peers_sharing_one_address_are_not_refused_for_it(waiting):
    """Every node of a loopback cluster is 127.0.0.1: no cap per source below the total."""
    hb = Recorder()
    cfg = config("b", max_unauthenticated=4, handshake_timeout=NO_TIMEOUT)
    with trio.fail_after(LIMIT):
        async with open_transport(cfg, hb) as tb, open_transport(config("a"), Recorder()) as ta:
            port = port_of(tb.endpoint)
            idle = [await _idle_handshake(port, "127.0.0.1") for _ in range(waiting)]
            try:
                link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
                assert not link.closed
            finally:
                for stream in idle:
                    await trio.aclose_forcefully(stream)
