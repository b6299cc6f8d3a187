"""Location Store conformance: one live process per NodeId, and what dead lifecycles leave.

NewClaim refuses a NodeId another NodeRid holds live (``NodeIdInUse``, nothing
written); ``dead_owned`` lists every record of a NodeId's expired lifecycles;
``remove_dead_claims`` deletes the empty ones; ``store.dead_lifecycle.release_dead_node``
ends each record with its state's fenced transaction. Once per backend, under
``trio.fail_after``. The dead lifecycle claims at ``now=0`` with a 1 s lease; the
checks run at ``NOW``.
"""

from __future__ import annotations

import pytest
import trio
from store_helpers import MESH, claim, ready, reserve, units
from test_location_conformance import snapshot

from zlink_trio.core.errors import AlreadyExists, InvalidOperation
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import NodeIdInUse
from zlink_trio.store.dead_lifecycle import RELEASES_IN_FLIGHT, release_dead_node
from zlink_trio.store.rules.relocation_store import receipt_of

TIMEOUT = 5
NOW = 5.0


async def test_new_claim_refuses_a_node_id_held_live_by_another_process(store):
    with trio.fail_after(TIMEOUT):
        first = await claim(store, "node-a", now=0.0, lease=10.0)
        before = await snapshot(store)
        for mesh in (MESH, "other"):  # a NodeId is one process store-wide
            with pytest.raises(NodeIdInUse) as refused:
                await claim(store, "node-a", now=1.0, mesh=mesh)
            assert isinstance(refused.value, AlreadyExists)
            assert refused.value.holder == first
            assert "node-a" in refused.value.message
            assert "stop that process or give this one another node_id" in refused.value.message
        assert await snapshot(store) == before
        await claim(store, "node-b", now=1.0)  # other NodeIds are not affected
        again = await claim(store, "node-a", now=10.0)  # the lease is over: a restart
        assert again.lifecycle_generation == first.lifecycle_generation + 1


async def test_new_claim_after_the_holder_renewed_is_still_refused(store):
    with trio.fail_after(TIMEOUT):
        first = await claim(store, "node-a", now=0.0, lease=10.0)
        renewed = await store.location.renew(MESH, first.descriptor.node_rid,
                                             first.lifecycle_generation, now=9.0, lease=10.0)
        with pytest.raises(NodeIdInUse) as refused:
            await claim(store, "node-a", now=12.0)
        assert refused.value.holder.lease_expires_at == renewed.lease_expires_at


async def _dead_node_with_every_state(store):
    """node-a (dead at NOW) owning a record in each state; node-b live, the move target."""
    dead = await claim(store, "node-a", now=0.0, lease=1.0, capacity=10)
    target = await claim(store, "node-b", now=0.0, lease=100.0, capacity=10)
    records = {"ready": await ready(store, dead, "s-ready"),
               "user": await ready(store, dead, "s-user", stable_type="room")}
    records["creating"] = await store.location.find(
        (await reserve(store, dead, "s-creating", stable_type="counter",
                       kind=SpotKind.INSTANCE)).spot_id)
    closing = await ready(store, dead, "s-closing")
    records["closing"] = await store.location.begin_close(
        "s-closing", object_generation=closing.object_generation, owner=dead.owner(), now=0.0)
    for name in ("relocating", "sealed", "relay"):
        moving = await ready(store, dead, f"s-{name}")
        record = await store.location.begin_relocation(moving.fence(), target=target.owner(),
                                                       now=0.0)
        if name != "relocating":
            record = await store.location.seal_relocation(moving.fence(), now=0.0)
        if name == "relay":
            record = await store.location.accept_relay_ready(moving.fence(),
                                                             target=target.owner(), now=0.0)
        records[name] = record
    return dead, target, records


async def test_dead_owned_lists_every_state_of_expired_lifecycles_only(store):
    with trio.fail_after(TIMEOUT):
        dead, _target, records = await _dead_node_with_every_state(store)
        assert await store.location.dead_owned("node-a", now=0.5) == []  # still live
        found = await store.location.dead_owned("node-a", now=NOW)
        assert {r.spot_id: r for r in found} == {r.spot_id: r for r in records.values()}
        assert [r.spot_id for r in found] == sorted(r.spot_id for r in found)
        assert dead.descriptor.entry_spot_id not in {r.spot_id for r in found}
        assert await store.location.dead_owned("node-b", now=NOW) == []  # live
        assert await store.location.dead_owned("node-c", now=NOW) == []
        page = await store.location.dead_owned("node-a", now=NOW, limit=3)
        rest = await store.location.dead_owned("node-a", now=NOW, after=page[-1].spot_id)
        assert [r.spot_id for r in page + rest] == [r.spot_id for r in found]
        for bad in (0, 1001):
            with pytest.raises(InvalidOperation):
                await store.location.dead_owned("node-a", now=NOW, limit=bad)


async def test_remove_dead_claims_deletes_only_empty_expired_claims(store):
    with trio.fail_after(TIMEOUT):
        empty = await claim(store, "node-a", now=0.0, lease=1.0)
        owning = await claim(store, "node-a", now=2.0, lease=1.0)
        await ready(store, owning, "s-1")
        live = await claim(store, "node-a", now=4.0, lease=100.0)
        other = await claim(store, "node-b", now=0.0, lease=1.0)
        assert await store.location.remove_dead_claims("node-a", now=0.5) == 0
        assert await store.location.remove_dead_claims("node-a", now=NOW) == 1
        assert await store.location.find(empty.descriptor.entry_spot_id) is None
        for kept in (owning, live, other):  # their Entry claims are still there
            assert await store.location.find(kept.descriptor.entry_spot_id) is not None
        assert await store.location.remove_dead_claims("node-a", now=NOW) == 0  # idempotent
        assert (await store.location.statistics()).claims == 3
        with pytest.raises(InvalidOperation):
            await store.location.remove_dead_claims("", now=NOW)


async def test_remove_dead_claims_leaves_the_live_claim_of_the_same_node_rid_in_another_mesh(
        store):
    # One process may claim several Meshes: its claim that expired in one goes, its live
    # claim in another (an older lifecycle generation) keeps serving.
    with trio.fail_after(TIMEOUT):
        live = await claim(store, "node-a", now=0.0, lease=100.0, capacity=10)
        expired = await claim(store, "node-a", mesh="other-mesh", now=0.0, lease=1.0,
                              node_rid=live.descriptor.node_rid)
        assert expired.lifecycle_generation > live.lifecycle_generation
        assert await store.location.remove_dead_claims("node-a", now=NOW) == 1
        fence = await reserve(store, live, "s-1", now=NOW)
        assert (await store.location.commit_ready(fence, now=NOW)).state \
            is AuthorityState.READY


async def test_release_dead_node_ends_each_state_with_its_fenced_transaction(store):
    with trio.fail_after(TIMEOUT):
        dead, target, records = await _dead_node_with_every_state(store)
        await store.relocation.inbox_append("s-ready", records["ready"].object_generation,
                                            b"left-over")
        done = await release_dead_node(store, "node-a", now=lambda: NOW)
        assert {r.spot_id for r in done.released} == {
            r.spot_id for name, r in records.items() if name != "relay"}
        ((left, why),) = done.left
        assert left.spot_id == "s-relay"
        assert "relay-ready" in why
        for name, record in records.items():
            found = await store.location.find(record.spot_id)
            assert (found is None) is (name != "relay"), name
        assert await store.relocation.inbox_read(
            "s-ready", records["ready"].object_generation, limit=10) == []
        # The moving records gave back the target's pending units; the relay one keeps its.
        assert await units(store, target) == (1, 0)
        # The dead claim still owns the RelayReady record, so it is kept as its proof.
        assert done.claims_removed == 0
        assert await store.location.find(dead.descriptor.entry_spot_id) is not None
        # The IDs are free again: a new incarnation has a larger ObjectGeneration.
        restarted = await claim(store, "node-a", now=NOW, capacity=10)
        again = await ready(store, restarted, "s-ready")
        assert again.object_generation > records["ready"].object_generation
        assert (await release_dead_node(store, "node-a", now=lambda: NOW)).released == ()


async def test_release_dead_node_removes_the_claims_it_emptied(store):
    with trio.fail_after(TIMEOUT):
        dead = await claim(store, "node-a", now=0.0, lease=1.0)
        await ready(store, dead, "s-1")
        done = await release_dead_node(store, "node-a", now=lambda: NOW)
        assert [r.spot_id for r in done.released] == ["s-1"]
        assert done.claims_removed == 1
        assert await store.location.find(dead.descriptor.entry_spot_id) is None
        stats = await store.location.statistics()
        assert (stats.claims, stats.ready) == (0, 0)


async def test_release_dead_node_releases_more_records_than_it_keeps_in_flight(store):
    # Released RELEASES_IN_FLIGHT at a time: every record of a larger lifecycle is released
    # once, reported in listing order, and the emptied claim goes with its capacity units.
    count = RELEASES_IN_FLIGHT * 2 + 3
    with trio.fail_after(TIMEOUT * 4):
        dead = await claim(store, "node-a", now=0.0, lease=1.0, capacity=count)
        ids = sorted(f"s-{i:04d}" for i in range(count))
        for spot_id in ids:
            await ready(store, dead, spot_id)
        done = await release_dead_node(store, "node-a", now=lambda: NOW)
        assert [r.spot_id for r in done.released] == ids
        assert done.left == ()
        assert done.claims_removed == 1
        assert [await store.location.find(spot_id) for spot_id in ids[::10]] == [
            None] * len(ids[::10])
        stats = await store.location.statistics()
        assert (stats.claims, stats.ready) == (0, 0)


# -- a move whose target died past relay-ready (issue #26 item 4) ---------------------------


async def _captured_move(store, source, target, spot_id, *, relay):
    """``spot_id`` Ready at ``source``, moved toward ``target``: Sealed with its payload
    root named and stored (as the source does it), then RelayReady when ``relay``."""
    record = await ready(store, source, spot_id)
    loc = store.location
    await loc.begin_relocation(record.fence(), target=target.owner(), now=0.0)
    await loc.seal_relocation(record.fence(), now=0.0)
    receipt = receipt_of(f"payload of {spot_id}".encode())
    moving = await loc.record_relocation_payload(record.fence(), payload=receipt, now=0.0)
    assert await store.relocation.put_root(f"payload of {spot_id}".encode()) == receipt
    if relay:
        moving = await loc.accept_relay_ready(record.fence(), target=target.owner(), now=0.0)
    return moving, receipt


async def test_dead_owned_lists_a_move_past_relay_ready_toward_a_dead_target(store):
    with trio.fail_after(TIMEOUT):
        source = await claim(store, "node-s", now=0.0, lease=100.0)
        target = await claim(store, "node-t", now=0.0, lease=1.0)
        relay, _ = await _captured_move(store, source, target, "s-relay", relay=True)
        sealed, _ = await _captured_move(store, source, target, "s-sealed", relay=False)
        assert await store.location.dead_owned("node-t", now=0.5) == []  # still live
        # The source owns the record; the move's dead target lists it (not the Sealed
        # one: before relay-ready the live source aborts it itself).
        assert await store.location.dead_owned("node-t", now=NOW) == [relay]
        assert await store.location.dead_owned("node-s", now=NOW) == []  # live
        assert sealed.state is AuthorityState.SEALED


async def test_a_restarted_target_releases_a_move_its_dead_lifecycle_left_past_relay_ready(
        store):
    with trio.fail_after(TIMEOUT):
        source = await claim(store, "node-s", now=0.0, lease=100.0, capacity=10)
        target = await claim(store, "node-t", now=0.0, lease=1.0, capacity=10)
        relay, receipt = await _captured_move(store, source, target, "s-relay", relay=True)
        assert (await store.relocation.statistics()).roots == 1
        restarted = await claim(store, "node-t", now=NOW, capacity=10)
        done = await release_dead_node(store, "node-t", now=lambda: NOW)
        assert done.released == (relay,)
        assert done.left == ()
        # The incarnation ended: no record, its payload root deleted, both units back,
        # and the dead lifecycle's claim (empty now) removed with its Entry claim.
        assert await store.location.find("s-relay") is None
        assert (await store.relocation.statistics()).roots == 0
        assert await store.relocation.delete_root(receipt) is False
        assert await units(store, source) == (0, 0)
        assert await units(store, target) == (0, 0)
        assert done.claims_removed == 1
        assert await store.location.find(target.descriptor.entry_spot_id) is None
        # The ID takes a new incarnation (a larger ObjectGeneration), on either node.
        again = await ready(store, restarted, "s-relay")
        assert again.object_generation > relay.object_generation
        assert (await release_dead_node(store, "node-t", now=lambda: NOW)).released == ()


async def test_a_restarted_source_deletes_the_payload_root_of_a_move_it_captured(store):
    with trio.fail_after(TIMEOUT):
        dead = await claim(store, "node-a", now=0.0, lease=1.0, capacity=10)
        target = await claim(store, "node-b", now=0.0, lease=100.0, capacity=10)
        sealed, _ = await _captured_move(store, dead, target, "s-sealed", relay=False)
        assert sealed.relocation_payload is not None
        done = await release_dead_node(store, "node-a", now=lambda: NOW)
        assert [r.spot_id for r in done.released] == ["s-sealed"]
        assert await store.location.find("s-sealed") is None
        assert (await store.relocation.statistics()).roots == 0
        assert await units(store, target) == (0, 0)
