"""Quiet outages: a peer or the store out of reach is one WARNING, a bounded count, one INFO.

Before, every call that failed while a peer could not be linked logged the transport's
WARNING again (39 calls, 39 lines), and every retry of a lease renewal logged its own.
Now each is one outage episode (``zlink_trio/lowlevel/outage.py``): a WARNING when it
begins, a count line at most every 30 s while it lasts, an INFO when it ends.

The peer test runs two nodes on real loopback links (so on the real clock, bounded by
``trio.fail_after``; no sleep waits for anything), node-b's endpoint behind the chaos
harness's TCP relay, which cuts and heals the link. The lease test runs on the autojump
clock with the test kit's store faults. The store backends' own episodes are tested in
``tests/store/test_redis_backend.py`` and ``tests/store/test_sqlite_backend.py``.
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from runtime_spots import Add, Counter, Total
from store_calls import chaos_relay

import zlink_trio as zl
from zlink_trio.store import MemoryStore
from zlink_trio.testing import open_test_cluster

#: Real seconds the peer test may take; virtual seconds for the lease test.
LIMIT = 30
CALLS = 30


def records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == level and r.name.startswith("zlink_trio")]


async def test_calls_to_a_peer_out_of_reach_log_one_warning_and_one_info_when_it_is_back(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="zlink_trio")
    store = MemoryStore()
    with trio.fail_after(LIMIT):
        async with chaos_relay().open_relay(0) as relay, \
                zl.open_node("node-a", store=store, spots=[Counter], placement_weight=0) as a, \
                zl.open_node("node-b", store=store, spots=[Counter],
                             endpoint=f"ws://127.0.0.1:{relay.port}") as b:
            transport = b._rt.peers.transport
            assert transport is not None
            relay.upstream = int(transport.endpoint.rsplit(":", 1)[1])
            assert await a.client.request("c-1", Add(1), reply=Total).instance_spot() \
                == Total(1)
            assert a.inspection.linked_nodes() == ["node-b"]

            relay.cut()  # the link breaks; every dial to node-b fails
            await a.inspection.close_links(to="node-b")  # until node-a saw it break
            assert a.inspection.linked_nodes() == []
            caplog.clear()
            for _ in range(CALLS):
                with pytest.raises(zl.Unavailable, match="cannot link to node 'node-b'"):
                    await a.client.request("c-1", Add(1), reply=Total)
            [warning] = records(caplog, logging.WARNING)  # one for the 30 calls
            assert warning.name == "zlink_trio.transport"
            assert warning.getMessage().startswith(
                "the link to node 'node-b' is unavailable: cannot link to node 'node-b' at "
                f"ws://127.0.0.1:{relay.port}")
            assert records(caplog, logging.ERROR) == []

            relay.heal()
            caplog.clear()
            assert await a.client.request("c-1", Add(1), reply=Total) == Total(2)
            back = [r for r in records(caplog, logging.INFO) if "works again" in r.getMessage()]
            assert [r.getMessage().split(" after ")[0] for r in back] == [
                "the link to node 'node-b' works again"]
            assert back[0].getMessage().endswith(f"({CALLS} failed calls in all)")
            assert records(caplog, logging.WARNING) == []


async def test_a_lease_renewal_retried_through_a_store_outage_logs_one_episode(
        caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock) -> None:
    caplog.set_level(logging.INFO, logger="zlink_trio.runtime.lease")
    with trio.fail_after(LIMIT):
        async with open_test_cluster(1, spots=[Counter], lease=10) as cluster:
            for _ in range(8):  # 8 attempts fail (5 ms doubling: about 1.3 s in all)
                cluster.faults.fail_next_store_call(
                    "node-0", method="renew",
                    error=zl.StoreUnavailable("the test's store outage"))
            await trio.sleep(10)  # the next renewals: the failing one and two more
            # The lease was kept through the outage: the node still serves.
            assert await cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
                "counter") == Total(1)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records
             if r.name == "zlink_trio.runtime.lease"]
    [(down_level, down), (back_level, back)] = lines
    assert down_level == logging.WARNING
    assert down.startswith("the lease renewal of node 'node-0' is unavailable: the store was "
                           "not reached (the test's store outage); retrying for ")
    assert back_level == logging.INFO
    assert back.startswith("the lease renewal of node 'node-0' works again after 1.")
    assert back.endswith("(8 failed attempts in all)")
