"""Mesh links between two real transports on 127.0.0.1: open, exchange, reuse, close."""

from __future__ import annotations

from functools import partial

import pytest
import trio
import trio.testing
from transport_helpers import (
    Recorder,
    authenticated_raw,
    config,
    identity,
    read_until_closed,
    reply,
    spot_message,
)

from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation, Unavailable
from zlink_trio.transport import (
    HIGH_WATER_BYTES,
    LOW_WATER_BYTES,
    TransportConfig,
    open_transport,
)
from zlink_trio.transport._link import silent_intervals
from zlink_trio.wire.frames import MIN_FRAME_BYTES, Ping, Pong, decode, encode

LIMIT = 5


async def test_two_transports_exchange_frames_both_ways():
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            b_id = tb._config.identity
            link = await ta.link_to(b_id.node_rid, "b", tb.endpoint)
            assert link.outbound
            assert not link.closed
            assert link.peer.node_id == "b"
            assert link.peer.node_rid == b_id.node_rid
            assert hb.checked[0].node_id == "a"
            link.send_nowait(spot_message(1))
            inbound, frame = await hb.frame_rx.receive()
            assert frame == spot_message(1)
            assert not inbound.outbound
            assert inbound.peer.node_id == "a"
            inbound.send_nowait(reply(1))
            got_link, got = await ha.frame_rx.receive()
            assert got_link is link
            assert got == reply(1)
            assert len(ta.links()) == 1
            assert len(tb.links()) == 1


async def test_frames_arrive_in_order():
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            for n in range(1, 201):
                link.send_nowait(spot_message(n))
            for n in range(1, 201):
                _, frame = await hb.frame_rx.receive()
                assert frame.operation_id == n


async def test_link_to_reuses_an_open_link_in_either_direction():
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            a_id, b_id = ta._config.identity, tb._config.identity
            first = await ta.link_to(b_id.node_rid, "b", tb.endpoint)
            assert await ta.link_to(b_id.node_rid, "b", tb.endpoint) is first
            # b reuses the inbound link a opened instead of dialling back.
            back = await tb.link_to(a_id.node_rid, "a", ta.endpoint)
            assert not back.outbound
            assert len(hb.checked) == 1
            assert len(ha.checked) == 1


async def test_concurrent_link_to_shares_one_dial():
    ha, hb = Recorder(), Recorder()
    results = []
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            rid = tb._config.identity.node_rid

            async def dial():
                results.append(await ta.link_to(rid, "b", tb.endpoint))

            async with trio.open_nursery() as nursery:
                for _ in range(10):
                    nursery.start_soon(dial)
            assert len(results) == 10
            assert all(link is results[0] for link in results)
            assert len(hb.checked) == 1
            assert len(tb.links()) == 1


async def test_send_on_closed_link_is_unavailable_and_link_closed_once():
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            await link.aclose()
            assert link.closed
            assert ha.closed == [link]
            with pytest.raises(Unavailable, match="'b'"):
                link.send_nowait(spot_message())
            # The peer sees its side close too.
            assert (await hb.closed_rx.receive()).peer.node_id == "a"
            assert ta.links() == []
            assert tb.links() == []
            await link.aclose()  # idempotent
        assert ha.closed == [link]
        assert len(hb.closed) == 1


async def test_oversize_frame_is_invalid_operation_and_link_stays_open():
    ha, hb = Recorder(), Recorder()
    small = identity("b", max_frame_bytes=MIN_FRAME_BYTES * 2)
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, \
                open_transport(config(ident=small), hb) as tb:
            link = await ta.link_to(small.node_rid, "b", tb.endpoint)
            assert link.peer.max_frame_bytes == MIN_FRAME_BYTES * 2
            with pytest.raises(InvalidOperation, match="frame limit"):
                link.send_nowait(spot_message(body=b"x" * (MIN_FRAME_BYTES * 2)))
            with pytest.raises(InvalidOperation, match="application frames"):
                link.send_nowait(Ping(token=1))
            assert not link.closed
            link.send_nowait(spot_message(2))
            _, frame = await hb.frame_rx.receive()
            assert frame.operation_id == 2


async def test_send_buffer_overflow_closes_the_link():
    hb = Recorder()
    with trio.fail_after(LIMIT):
        # A peer that takes one message and then stops reading: the socket's buffers
        # fill, then the link's queue, and the link closes instead of growing.
        async with open_transport(config("b", max_send_buffer_bytes=64 * 1024), hb) as tb, \
                authenticated_raw(tb.endpoint) as (_ws, _peer):
            link = tb.links()[0]
            with pytest.raises(Unavailable, match="max_send_buffer_bytes"):  # noqa: PT012
                for n in range(1, 100_000):
                    link.send_nowait(spot_message(n, body=b"x" * 16_000))
            assert link.closed
            assert await hb.closed_rx.receive() is link


async def test_a_sender_minding_flow_control_never_overflows_a_peer_that_stops_reading():
    hb = Recorder()
    frame = spot_message(1, body=b"x" * 16_000)
    with trio.fail_after(LIMIT):
        async with open_transport(config("b", max_send_buffer_bytes=4 * 1024 * 1024), hb) \
                as tb, authenticated_raw(tb.endpoint) as (_ws, _peer):
            link = tb.links()[0]
            sent = 0
            while link.writable:  # what a relay does: queue only while the link is writable
                link.send_nowait(frame)
                sent += 1
                await trio.lowlevel.checkpoint()  # the writer fills the socket's buffers
            assert not link.closed
            assert sent > HIGH_WATER_BYTES // 16_000  # the socket took some, the queue the rest
            assert HIGH_WATER_BYTES < link.queued_bytes <= HIGH_WATER_BYTES + 17_000
            async with trio.open_nursery() as nursery:
                woken = trio.Event()

                async def wait() -> None:
                    await link.wait_writable()  # the peer reads nothing: only the close wakes it
                    woken.set()

                nursery.start_soon(wait)
                await trio.testing.wait_all_tasks_blocked()
                assert not woken.is_set()
                link.close_soon()
                await woken.wait()
            assert link.writable  # a closed link has nothing to wait for (a send raises)


async def test_wait_writable_returns_once_the_writes_brought_the_queue_to_low_water():
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            count = 600  # 9.6 MB without yielding: more than the sockets take, so queued
            for n in range(1, count + 1):
                link.send_nowait(spot_message(n, body=b"z" * 16_000))
            assert not link.writable
            await link.wait_writable()
            assert link.queued_bytes <= LOW_WATER_BYTES
            for n in range(1, count + 1):
                _, frame = await hb.frame_rx.receive()
                assert frame.operation_id == n


async def test_frames_queued_behind_a_busy_socket_arrive_in_order():
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, open_transport(config("b"), hb) as tb:
            link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            # Far more than a socket takes at once, without yielding: part is written
            # by this task (a frame may be cut), the rest by the link's writer.
            count = 400
            for n in range(1, count + 1):
                link.send_nowait(spot_message(n, body=b"y" * 8_000))
            for n in range(1, count + 1):
                _, frame = await hb.frame_rx.receive()
                assert frame.operation_id == n
                assert frame.payload.body == b"y" * 8_000


def _task_count() -> int:
    def walk(task):
        return 1 + sum(walk(child) for n in task.child_nurseries for child in n.child_tasks)

    return walk(trio.lowlevel.current_root_task())


async def test_exit_closes_every_link_once_and_leaves_no_task():
    ha, hb = Recorder(), Recorder()
    raw_ready, raw_closed = trio.Event(), trio.Event()

    async def raw_client(endpoint):
        async with authenticated_raw(endpoint) as (ws, _peer):
            raw_ready.set()
            await read_until_closed(ws)
            raw_closed.set()

    with trio.fail_after(LIMIT):
        before = _task_count()
        async with open_transport(config("b"), hb) as tb, trio.open_nursery() as outer:
            async with open_transport(config("a"), ha) as ta:
                link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
                outer.start_soon(raw_client, ta.endpoint)
                await raw_ready.wait()
                assert len(ta.links()) == 2
                assert _task_count() > before
                inbound = next(lnk for lnk in ta.links() if not lnk.outbound)
            # ta exited with both links open: both closed, link_closed once each.
            assert link.closed
            assert inbound.closed
            assert ta.links() == []
            assert len(ha.closed) == 2
            assert set(map(id, ha.closed)) == {id(link), id(inbound)}
            assert (await hb.closed_rx.receive()).peer.node_id == "a"
            await raw_closed.wait()
        assert len(hb.closed) == 1
        assert len(ha.closed) == 2
        assert _task_count() == before


async def test_exit_closes_links_the_peer_sees_closed():
    hb = Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("b"), hb) as tb:
            async with authenticated_raw(tb.endpoint) as (_ws, _peer):
                async with open_transport(config("c"), Recorder()):
                    pass
                assert len(tb.links()) == 1
                link = tb.links()[0]
            assert await hb.closed_rx.receive() is link


async def test_binding_an_address_in_use_is_invalid_configuration():
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), Recorder()) as ta:
            port = int(ta.endpoint.rsplit(":", 1)[1])
            with pytest.raises(InvalidConfiguration, match=f"127.0.0.1:{port}"):
                async with open_transport(config("b", listen_port=port), Recorder()):
                    pass  # pragma: no cover


def test_config_refuses_short_secret_and_bad_values():
    with pytest.raises(InvalidConfiguration, match="at least 32 bytes") as info:
        TransportConfig(identity=identity("a"), secret=b"short-secret-123")
    assert "short-secret" not in str(info.value)
    with pytest.raises(InvalidConfiguration, match="keepalive_interval"):
        config("a", keepalive_interval=0)
    with pytest.raises(InvalidConfiguration, match="max_unauthenticated"):
        config("a", max_unauthenticated=0)
    assert "sssss" not in repr(config("a"))


async def test_link_to_a_port_nobody_listens_on_is_unavailable_quickly():
    with trio.fail_after(LIMIT):
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = listener.socket.getsockname()[1]
        await listener.aclose()
        async with open_transport(config("a"), Recorder()) as ta:
            with pytest.raises(Unavailable, match=f"ws://127.0.0.1:{port}.*refused"):
                await ta.link_to(identity("b").node_rid, "b", f"ws://127.0.0.1:{port}")


async def test_link_to_a_silent_peer_is_unavailable_within_the_timeouts():
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            accepted = []

            async def hold(stream):
                async with stream:
                    accepted.append(stream)
                    await trio.sleep_forever()

            listeners = await nursery.start(partial(trio.serve_tcp, hold, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            async with open_transport(
                config("a", connect_timeout=0.2, handshake_timeout=0.2), Recorder()
            ) as ta:
                start = trio.current_time()
                with pytest.raises(Unavailable, match="timed out connecting"):
                    await ta.link_to(identity("b").node_rid, "b", f"ws://127.0.0.1:{port}")
                assert trio.current_time() - start < 1.5
            nursery.cancel_scope.cancel()


async def test_link_to_refuses_a_bad_endpoint():
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), Recorder()) as ta:
            with pytest.raises(InvalidOperation, match="ws://"):
                await ta.link_to(identity("b").node_rid, "b", "http://127.0.0.1:1")


async def test_keepalive_closes_a_link_whose_peer_stops_answering():
    hb = Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("b", keepalive_interval=0.05), hb) as tb, \
                authenticated_raw(tb.endpoint) as (ws, _peer):
                # The server pings a silent peer; this client never answers.
                assert isinstance(decode(await ws.get_message()), Ping)
                link = await hb.closed_rx.receive()
                assert link.peer.node_id == "raw"
                assert tb.links() == []
                await read_until_closed(ws)


async def test_keepalive_pong_keeps_the_link_and_pings_are_answered():
    hb = Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("b", keepalive_interval=0.05), hb) as tb, \
                authenticated_raw(tb.endpoint) as (ws, _peer):
                await ws.send_message(encode(Ping(token=77)))
                answers = 0
                pongs = []
                while answers < 8:  # eight keepalive rounds: well past 3 intervals
                    frame = decode(await ws.get_message())
                    if isinstance(frame, Ping):
                        answers += 1
                        await ws.send_message(encode(Pong(token=frame.token)))
                    else:
                        pongs.append(frame)
                assert pongs == [Pong(token=77)]
                assert len(tb.links()) == 1
                assert hb.closed == []


async def test_max_links_bounds_inbound_and_outbound_links():
    """Issue #13 item 6: a node at ``max_links`` refuses a new connection when it is
    accepted and a new dial with Unavailable; an open link is still reused."""
    ha, hb, hc = Recorder(), Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a"), ha) as ta, \
                open_transport(config("b", max_links=1), hb) as tb, \
                open_transport(config("c"), hc) as tc:
            a_id, b_id, c_id = (t._config.identity for t in (ta, tb, tc))
            first = await ta.link_to(b_id.node_rid, "b", tb.endpoint)  # b's one link
            with pytest.raises(Unavailable):  # b closes c's connection on accept
                await tc.link_to(b_id.node_rid, "b", tb.endpoint)
            with pytest.raises(Unavailable, match="max_links"):
                await tb.link_to(c_id.node_rid, "c", tc.endpoint)
            assert await tb.link_to(a_id.node_rid, "a", ta.endpoint) is not None
            assert not first.closed
            assert len(tb.links()) == 1


@pytest.mark.parametrize(("last", "now", "interval"), [
    (0.037, 0.037 + 0.05, 0.05),  # the floor of the silence comes out one interval short
    (0.074, 0.074 + 2 * 0.05, 0.05),
    (0.0, 0.0, 0.05),
    (1.0, 1.26, 0.05),
])
def test_the_keepalive_always_sleeps_until_after_now(last, now, interval):
    """A keepalive that woke on an interval boundary sleeps until the next one, never
    until a time already past (which, on a clock standing still, would spin forever)."""
    intervals, wake = silent_intervals(last, now, interval)
    assert wake > now
    assert last + intervals * interval <= now + 1e-12
    assert wake == last + (intervals + 1) * interval
