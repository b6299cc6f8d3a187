"""A lease renewal answered after the node's exit ended its lifecycle.

A store write that has begun finishes despite a cancel (SQLite: its group taken, or
dispatch=thread; Redis: its pipeline batch sent), so a renewal in flight when the drain
removes or abandons the claim returns afterwards: the exit must still end cleanly.
"""

from __future__ import annotations

import trio
from runtime_spots import KNOBS, Add, Block, Counter, Total, journal

import zlink_trio as zl
from zlink_trio.store import MemoryStore


def _store_answering_renewals_late() -> MemoryStore:
    """A store whose renewals land at once but are answered 1.5 s later (shielded)."""
    store = MemoryStore()
    location = store.location
    plain_renew = location.renew

    async def renew_answered_late(*args, **kwargs):  # type: ignore[no-untyped-def]
        claim = await plain_renew(*args, **kwargs)
        with trio.CancelScope(shield=True):  # the write landed; its answer is on its way
            await trio.sleep(1.5)
        return claim

    location.renew = renew_answered_late  # type: ignore[method-assign]
    return store


async def test_a_renewal_in_flight_when_the_drain_abandons_does_not_fail_the_exit(
        autojump_clock):
    journal()
    KNOBS["gate"] = trio.Event()  # never set: c-1's turn never ends
    store = _store_answering_renewals_late()
    with trio.fail_after(60):
        async with zl.open_node("node-a", store=store, spots=[Counter], lease=3.0,
                                default_timeout=2.0) as node:
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            await node.client.send("c-1", Block("forever"))
        # Reached only if the exit did not raise "internal lifecycle error".


async def test_a_renewal_in_flight_when_the_drain_removes_does_not_fail_the_exit(
        autojump_clock):
    journal()
    store = _store_answering_renewals_late()
    with trio.fail_after(60):
        async with zl.open_node("node-a", store=store, spots=[Counter], lease=3.0,
                                default_timeout=2.0) as node:
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            await trio.sleep(1.2)  # exit while the renewal from t=1.0 is in flight
        # The removal took effect: the late renewal did not bring the claim back.
        assert await store.location.descriptors(now=trio.current_time()) == []
