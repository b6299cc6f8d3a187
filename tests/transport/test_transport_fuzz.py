"""Hostile bytes on an authenticated link: that link closes, the transport keeps serving.

Each example authenticates a raw trio-websocket client with ClientHandshake,
sends it hypothesis-generated garbage or a mutated valid frame, and checks
what a user can observe: a frame that decodes is delivered (or answered,
for a Ping); anything else closes that link only, while an existing link
keeps working and a new one can still authenticate.
"""

from __future__ import annotations

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from transport_helpers import (
    Recorder,
    authenticated_raw,
    config,
    read_until_closed,
    reply,
    spot_message,
)

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.core.identity import NodeRid
from zlink_trio.core.records import OwnerFence, SpotRef
from zlink_trio.transport import open_transport
from zlink_trio.wire.frames import (
    Challenge,
    Ping,
    Pong,
    Reply,
    SpotMessage,
    UserSpotClose,
    UserSpotCreate,
    decode,
    encode,
)

LIMIT = 5
_APPLICATION = (SpotMessage, UserSpotCreate, UserSpotClose, Reply)
_OWNER = OwnerFence(NodeRid(b"\x05" * 16), 2)

VALID = [
    encode(spot_message(7)),
    encode(reply(7)),
    encode(Ping(token=9)),
    encode(Pong(token=9)),
    encode(Challenge(nonce=b"\x01" * 32)),
    encode(
        UserSpotClose(
            correlation=3, operation_id=4, source=_OWNER,
            ref=SpotRef(spot_id="r-1", generation=5, mesh="world", node_rid=_OWNER.node_rid),
            target=_OWNER,
            expected_owner_generation=1, expected_store_version=1, deadline_ms=10**12,
        )
    ),
]


def _mutate(args: tuple[bytes, int, int, str]) -> bytes:
    data, position, value, how = args
    position %= len(data)
    if how == "set":
        return data[:position] + bytes([value]) + data[position + 1:]
    if how == "truncate":
        return data[:position]
    if how == "insert":
        return data[:position] + bytes([value]) + data[position:]
    return data + bytes([value])


hostile = st.one_of(
    st.binary(max_size=300),
    st.tuples(
        st.sampled_from(VALID),
        st.integers(0, 10_000),
        st.integers(0, 255),
        st.sampled_from(["set", "truncate", "insert", "append"]),
    ).map(_mutate),
)


async def _check_hostile(data: bytes) -> None:
    ha, hb = Recorder(), Recorder()
    async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
        existing = await tb.link_to(ta._config.identity.node_rid, "a", ta.endpoint)
        async with authenticated_raw(ta.endpoint) as (ws, peer):
            try:
                frame = decode(data, max_frame_bytes=peer.max_frame_bytes)
            except RemoteProtocolError:
                frame = None
            await ws.send_message(data)
            if frame is None or not isinstance(frame, (*_APPLICATION, Ping, Pong)):
                await read_until_closed(ws)
                closed = await ha.closed_rx.receive()
                assert closed.peer.node_id == "raw"
            else:
                await ws.send_message(encode(spot_message(99)))
                if isinstance(frame, _APPLICATION):
                    assert (await ha.frame_rx.receive())[1] == frame
                elif isinstance(frame, Ping):
                    assert decode(await ws.get_message()) == Pong(token=frame.token)
                assert (await ha.frame_rx.receive())[1] == spot_message(99)
        # The existing link still works, and a new peer still authenticates.
        existing.send_nowait(spot_message(5))
        assert (await ha.frame_rx.receive())[1] == spot_message(5)
        async with authenticated_raw(ta.endpoint) as (_ws, peer):
            assert peer.node_id == "a"


@settings(max_examples=40)
@given(data=hostile)
async def test_hostile_bytes_close_only_that_link(data):
    with trio.fail_after(LIMIT):
        await _check_hostile(data)


@pytest.mark.parametrize("data", VALID, ids=["message", "reply", "ping", "pong", "challenge",
                                             "close"])
async def test_each_valid_frame_kind_is_handled(data):
    with trio.fail_after(LIMIT):
        await _check_hostile(data)


async def test_handler_exception_closes_that_link_only():
    ha, hb = Recorder(), Recorder()
    ha.fail_on = spot_message(13)
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            bad = await tb.link_to(ta._config.identity.node_rid, "a", ta.endpoint)
            bad.send_nowait(spot_message(13))
            assert (await ha.closed_rx.receive()).peer.node_id == "b"
            assert (await hb.closed_rx.receive()) is bad
            again = await tb.link_to(ta._config.identity.node_rid, "a", ta.endpoint)
            assert again is not bad
            again.send_nowait(spot_message(14))
            assert (await ha.frame_rx.receive())[1] == spot_message(14)
