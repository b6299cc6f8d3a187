"""Contract tests for the spec 09 §8 items about more than one node, on real links.

The 06 §10 half is ``test_spec_06_cross_node.py``; the nodes and fixtures are in
``cross_node_helpers.py``, whose docstring says how
these tests run (listening nodes, the three backends, names, timing).

The items, and where each is tested:

- 09 "Even if several callers request creation of the same object at the same time, the
  factory runs only once, and the remaining callers target the object it created." --
  with callers on both nodes in ``test_spec_06_cross_node.py``
  (``test_concurrent_creation_runs_factory_once_and_others_target_created_object``, the
  same rule as 06 §4.2); one node: ``test_spec_09.py``.
- 09 "A message sent right after creation finishes is processed immediately, not
  delayed by the cache lifetime." -- here too, on three nodes whose registries differ:
  the first message of a third node right after creation, and one it sent while the
  Spot was Creating (it has no attempt of its own to wait on, so it polls the store),
  are served within a bound derived from the documented poll; the one-node half stays.
- 09 "When only the fact that the owner can't be used is confirmed (Unavailable) ..." --
  here: the owner is another node whose lease ran out on the caller's store clock.
- 09 "Even right after an object is recreated, an ordinary message isn't rejected for a
  generation mismatch." -- here: another node's cached route names the old generation
  (06 §5: the current Ready Spot of that owner runs it); the one-node half stays.
- 09 "A call sent to a stale owner ends in an error without automatic retry." -- here:
  a cached route to a node that no longer owns the Spot (closed, or re-created on a
  third node) ends StaleRoute and is run nowhere (06 §6); the one-node stand-ins
  (Closing, an owner validity that passed) stay in ``test_spec_09.py``.
- 09 "Once the active-object count reaches the ceiling, new activation is rejected at
  that node." -- here: a request already sent to a full node (its sender cannot see the
  target's load) is refused by the target's local check, also while an activation there
  is still pending; the one-node half stays.

Not here: "User Spot Close doesn't secretly clean up active membership" (06) and the
"active membership" branch of command 48 -- Actor membership (spec 05) does not exist in
this version, so there is no membership to keep or to clean up. "Message Follow only
uses a committed route ..." (06) and "Entry Spot isn't in the relocation candidate list
..." (09) run on node processes in ``tests/mesh/test_mesh_relocation.py``.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from cross_node_helpers import (
    CLIENT,
    LIMIT,
    SPOTS,
    Shared,
    open_node,
    open_nodes,
    ran_on,
    settled,
    shared_store,
)
from spec_helpers import (
    PROBE,
    CloseMe,
    Counter,
    Gauge,
    Note,
    Ping,
    Pong,
    wait_until,
)

import zlink_trio as zl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
async def shared(url: str) -> AsyncIterator[Shared]:
    """The nodes' store on each backend (``cross_node_helpers.shared_store``)."""
    async with shared_store(url) as opened:
        yield opened


# --- 09: creation and the cache, seen from a third node ------------------------------------

#: How soon a third node is served once a Spot is Ready: ten times the documented cap of
#: its store poll of a Creating Spot (docs/decisions.md: 5 ms -> 250 ms backoff), far
#: below one route-cache lifetime (15 s).
SERVED_WITHIN = 10 * 0.25


async def test_message_right_after_creation_is_processed_without_cache_delay(
    shared: Shared,
) -> None:
    """A message sent right after creation finishes is processed immediately, not delayed by
    the cache lifetime. (Three nodes whose registries differ: node-a registers only gauge
    and asks for a counter, node-b serves counter and builds it, node-c is a client of no
    type. node-c's first message right after creation is served at once, and one it sent
    while the next Spot was Creating is served as soon as that Spot is Ready. One node:
    ``test_spec_09.py``.)"""
    gate = PROBE.activate_gates["c-2"] = trio.Event()
    with trio.fail_after(LIMIT):
        async with (
            open_node(shared, "node-a", 0, spots=(Gauge,)) as a,
            open_node(shared, "node-b", 1, spots=(Counter,)) as b,
            open_node(shared, "node-c", 0, spots=CLIENT) as c,
        ):
            first = await a.client.request("c-1", Ping(), reply=Pong).instance_spot(
                "counter").timeout(20)
            assert (first.kind, first.node_rid) == ("Counter", str(b.node_rid))
            start = trio.current_time()
            right_after = await c.client.request("c-1", Note("right after"),
                                                 reply=Pong).timeout(20)
            assert right_after == first
            assert trio.current_time() - start < SERVED_WITHIN

            # A caller that arrived while c-2 was Creating is served as soon as it is Ready.
            served: list[tuple[Pong, float]] = []

            async def activate() -> None:
                await a.client.request("c-2", Ping(), reply=Pong).instance_spot(
                    "counter").timeout(20)

            async def waiter() -> None:
                pong = await c.client.request("c-2", Note("waiting"), reply=Pong).timeout(20)
                served.append((pong, trio.current_time()))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(activate)
                await PROBE.started("c-2").wait()
                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked(0.05)
                assert served == []  # waiting on Creating, not NotFound
                released = trio.current_time()
                gate.set()
            pong, at = served[0]
            assert at - released < SERVED_WITHIN, (
                f"node-c was served {at - released:.2f} s after c-2 could become Ready")
            assert (pong.kind, pong.node_rid) == ("Counter", str(b.node_rid))
            assert PROBE.messages_of("c-2") == [Ping(), Note("waiting")]
            assert (ran_on(a), ran_on(c)) == ([], [])
            assert PROBE.factory_ids() == ["c-1", "c-2"]


# --- 09: the owner can't be used -----------------------------------------------------------


async def test_unavailable_owner_starts_no_new_creation_and_ends_request_with_it(
    shared: Shared,
) -> None:
    """When only the fact that the owner can't be used is confirmed (Unavailable), a new
    creation isn't started, and that result is delivered only as the terminal completion of
    the in-progress request."""
    view = shared.view
    skew = [0.0]  # node-b's store clock runs ahead of node-a's (wall time) by this much
    with trio.fail_after(LIMIT):
        async with (
            open_node(shared, "node-a", 1, lease=3,
                      injected=zl.InjectedOptions(clock=time.time)) as a,
            open_node(shared, "node-b", 0, spots=CLIENT, lease=60,
                      injected=zl.InjectedOptions(clock=lambda: time.time() + skew[0])) as b,
        ):
            first = await b.client.request("c-1", Ping(), reply=Pong).instance_spot(
                "counter").timeout(20)
            assert first.node_rid == str(a.node_rid)  # reached across the link
            # The first message's durable record is cleaned up after its reply (cold
            # activation step 12): let it finish, so the record compared below is final.
            await a._rt.catalog.hosts["c-1"].wait_first_record()
            # node-b's clock passes node-a's lease: c-1 keeps its authority, but to node-b
            # its owner can no longer be used (node-a itself goes on renewing on its clock).
            skew[0] = 4.0
            record_before = await view.location.find("c-1")
            location_before = await view.location.statistics()
            with pytest.raises(zl.Unavailable, match="not live"):
                await b.client.request("c-1", Note("intent"), reply=Pong).instance_spot(
                    "counter").timeout(20)
            with pytest.raises(zl.Unavailable, match="not live"):
                await b.client.request("c-1", Note("plain"), reply=Pong).timeout(20)
            assert await view.location.find("c-1") == record_before
            assert await view.location.statistics() == location_before
            assert (await view.relocation.statistics()).roots == 0
            assert PROBE.factory_ids() == ["c-1"]
            assert ran_on(a) == [Ping()]
            assert ran_on(b) == []
            skew[0] = 0.0  # the owner is usable again: the same call reaches it
            again = await b.client.request("c-1", Ping(), reply=Pong).timeout(20)
            assert again == first


# --- 09: stale owner filtering -------------------------------------------------------------


async def test_ordinary_message_not_rejected_for_generation_mismatch_after_recreate(
    shared: Shared,
) -> None:
    """Even right after an object is recreated, an ordinary message isn't rejected for a
    generation mismatch. (Another node's cached route names the old generation; close and
    re-create happened on the same owner, so its current Ready Spot runs it, 06 §5.)"""
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 1, 0, spots=(SPOTS, CLIENT)) as (a, b):
            old = (await a.spots.get_or_create("r-1", "room").timeout(20)).ref
            pong = await b.client.request("r-1", Ping(), reply=Pong).timeout(20)
            assert pong.generation == old.generation  # node-b caches the route now
            assert await a.spots.close(old) is True
            new = (await a.spots.get_or_create("r-1", "room").timeout(20)).ref
            assert new.generation > old.generation
            hits = b.statistics().route_cache.hits
            plain = await b.client.request("r-1", Note("right after"), reply=Pong).timeout(20)
            assert b.statistics().route_cache.hits > hits  # sent on the old route
            assert (plain.generation, plain.node_rid) == (new.generation, str(a.node_rid))
            await b.client.send("r-1", Note("sent right after"))

            async def sent_arrived() -> bool:
                return Note("sent right after") in ran_on(a)

            await wait_until(sent_arrived)
            assert [g for sid, g, _, msg in PROBE.handled if isinstance(msg, Note)] == [
                new.generation, new.generation]

            # An Instance Spot that closed itself and was activated again, likewise.
            first = await b.client.request("c-1", Ping(), reply=Pong).instance_spot(
                "counter").timeout(20)
            await a.client.send("c-1", CloseMe())

            async def gone() -> bool:
                return await a.spots.find("c-1") is None

            await wait_until(gone)
            second = await a.client.request("c-1", Ping(), reply=Pong).instance_spot(
                ).timeout(20)
            assert second.generation > first.generation
            plain = await b.client.request("c-1", Note("instance"), reply=Pong).timeout(20)
            assert plain.generation == second.generation


async def test_call_to_stale_owner_ends_in_error_without_retry(shared: Shared) -> None:
    """A call sent to a stale owner ends in an error without automatic retry. (Another
    node's cached route names a node that no longer owns the Spot: StaleRoute, run
    nowhere, not resent to the new owner, 06 §6.)"""
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 1, 0, spots=(SPOTS, CLIENT)) as (a, b):
            # The owner's incarnation closed itself; node-b still caches the route.
            first = await b.client.request("c-1", Ping(), reply=Pong).instance_spot(
                "counter").timeout(20)
            await b.client.send("c-1", CloseMe())

            async def gone() -> bool:
                # Released in the store and ended on node-a too: until its incarnation
                # ends there, a message is refused as "closing", not "no longer owns".
                return (await a.spots.find("c-1") is None
                        and a.inspection.hosted_spot("c-1") is None)

            await wait_until(gone)
            with pytest.raises(zl.StaleRoute, match="no longer owns"):
                await b.client.request("c-1", Note("stale"), reply=Pong).timeout(20)
            with pytest.raises(zl.NotFound):  # the next call resolves afresh
                await b.client.request("c-1", Note("next"), reply=Pong).timeout(20)
            second = await b.client.request("c-1", Note("intent"), reply=Pong).instance_spot(
                ).timeout(20)
            assert second.generation > first.generation
            assert Note("stale") not in [msg for _, _, _, msg in PROBE.handled]

            # Re-created on a third node: node-b's cached route still names node-a.
            old = (await b.spots.get_or_create("r-1", "room").timeout(20)).ref
            assert old.node_rid == a.node_rid
            await b.client.request("r-1", Ping(), reply=Pong).timeout(20)
            assert await a.spots.close(old) is True
            # node-c, opened now with a far larger weight, is where r-1 goes next (seeded
            # NodeRids make the weighted rendezvous choice fixed).
            async with open_node(shared, "node-c", 1000.0,
                                 injected=zl.InjectedOptions(random=random.Random(7))) as c:
                new = (await a.spots.get_or_create("r-1", "room").timeout(20)).ref
                assert new.node_rid == c.node_rid
                with pytest.raises(zl.StaleRoute, match="no longer owns"):
                    await b.client.request("r-1", Note("stale"), reply=Pong).timeout(20)
                assert ran_on(c) == []  # not resubmitted to the owner the store names
                pong = await b.client.request("r-1", Note("next"), reply=Pong).timeout(20)
                assert (pong.generation, pong.node_rid) == (new.generation, str(c.node_rid))
                assert ran_on(c) == [Note("next")]
            assert Note("stale") not in [msg for _, _, _, msg in PROBE.handled]


# --- 09: the ceiling at local activation ---------------------------------------------------


async def test_new_activation_rejected_at_ceiling(shared: Shared) -> None:
    """Once the active-object count reaches the ceiling, new activation is rejected at that
    node. (A request already sent to a full node: its sender cannot see the target's load,
    so the target's local activation refuses it -- also while an activation there is still
    pending -- and nothing is written; a create placed there is refused by Reserve, and so
    is a Spot moving in.)"""
    view = shared.view
    gate = PROBE.activate_gates["c-2"] = trio.Event()
    with trio.fail_after(LIMIT):
        async with (
            open_node(shared, "node-a", 1, active_object_ceiling=2) as a,
            open_node(shared, "node-b", 0, spots=(Counter,)) as b,
        ):
            await b.client.request("c-1", Ping(), reply=Pong).instance_spot(
                "counter").timeout(20)
            await settled(view)

            async def second() -> None:
                await b.client.request("c-2", Ping(), reply=Pong).instance_spot(
                    "counter").timeout(20)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(second)
                await PROBE.started("c-2").wait()  # one active, one activating on node-a
                location_before = await view.location.statistics()
                with pytest.raises(zl.CapacityExceeded, match="ceiling of 2") as refused:
                    await b.client.request("c-3", Ping(), reply=Pong).instance_spot(
                        "counter").timeout(20)
                assert refused.value.lane is None
                assert await view.location.statistics() == location_before
                gate.set()
            await settled(view)
            location_before = await view.location.statistics()
            with pytest.raises(zl.CapacityExceeded, match="ceiling of 2"):  # two active
                await b.client.request("c-3", Ping(), reply=Pong).instance_spot(
                    "counter").timeout(20)
            with pytest.raises(zl.CapacityExceeded):  # a User Spot placed there: Reserve
                await b.spots.get_or_create("r-1", "room").timeout(20)
            assert await view.location.statistics() == location_before
            assert (await view.relocation.statistics()).roots == 0
            assert PROBE.factory_ids() == ["c-1", "c-2"]
            assert b.statistics().active_spots == 0  # not built by the sender either
            # Once one closes, the same request fits on node-a.
            await b.client.send("c-1", CloseMe())

            async def gone() -> bool:
                return await a.spots.find("c-1") is None

            await wait_until(gone)
            pong = await b.client.request("c-3", Ping(), reply=Pong).instance_spot(
                "counter").timeout(20)
            assert pong.node_rid == str(a.node_rid)
            assert PROBE.factory_ids() == ["c-1", "c-2", "c-3"]
            # An object incoming by a move is held to the ceiling too (09 §5): c-3 moves
            # away, c-4 fills node-a again, and c-3 cannot come back.
            away = await a.relocate("c-3", to="node-b", timeout=20)
            assert away.outcome is zl.RelocationOutcome.COMMITTED
            await b.client.request("c-4", Ping(), reply=Pong).instance_spot(
                "counter").timeout(20)
            back = await b.relocate("c-3", to="node-a", timeout=20)
            assert back.outcome is zl.RelocationOutcome.REFUSED
            assert "at capacity" in back.reason
            assert (await b.spots.find("c-3")).node_rid == b.node_rid
            assert (a.statistics().active_spots, b.statistics().active_spots) == (2, 1)

