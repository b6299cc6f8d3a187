"""ClosePlacement / OpenPlacement conformance: a draining node's claim, as every backend
must keep it, and the dead claims listing.

``close_placement`` marks the claim of one lifecycle as taking no new Spots
(``NodeClaim.accepts_placements`` is ``False``), fenced by the lifecycle like
``remove``: a stale or foreign lifecycle marks nothing. The mark survives Renew and
ends with ``open_placement`` (an undrain, fenced the same way) or with the claim.
``dead_claims`` lists the claims whose lease is over, the mirror of ``descriptors``.
Each test runs once per backend (``store`` fixture in ``conftest.py``) under an absolute
``trio.fail_after``; time is the ``now`` argument.
"""

from __future__ import annotations

import trio
from store_helpers import LEASE, MESH, claim, descriptor
from test_location_conformance import snapshot

TIMEOUT = 5


async def test_close_placement_marks_the_claim_and_descriptors_read_it_back(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        b = await claim(store, "node-b")
        assert a.accepts_placements
        assert b.accepts_placements
        assert await store.location.close_placement(MESH, b.descriptor.node_rid, 1) is True
        listed = {c.descriptor.node_id: c for c in await store.location.descriptors(now=0.0)}
        assert listed["node-a"] == a  # the other claim is untouched
        closed = listed["node-b"]
        assert closed.accepts_placements is False
        assert closed.store_version == b.store_version + 1
        assert (closed.descriptor, closed.lifecycle_generation, closed.lease_expires_at) == (
            b.descriptor, b.lifecycle_generation, b.lease_expires_at)
        assert closed in await store.location.descriptors(MESH, now=0.0)


async def test_close_placement_is_idempotent(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        assert await store.location.close_placement(MESH, c.descriptor.node_rid, 1) is True
        before = await snapshot(store)
        assert await store.location.close_placement(MESH, c.descriptor.node_rid, 1) is True
        assert await snapshot(store) == before  # already marked: nothing written


async def test_close_placement_is_fenced_by_lifecycle(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        before = await snapshot(store)
        rid = c.descriptor.node_rid
        assert await store.location.close_placement(MESH, rid, 2) is False
        assert await store.location.close_placement("other", rid, 1) is False
        assert await store.location.close_placement(MESH, descriptor("x").node_rid, 1) is False
        assert await snapshot(store) == before
        assert (await store.location.descriptors(now=0.0))[0].accepts_placements is True


async def test_stale_close_placement_cannot_mark_a_replacement(store):
    with trio.fail_after(TIMEOUT):
        old = await claim(store, now=0.0)
        fresh = descriptor("node-a", node_rid=old.descriptor.node_rid)
        new = await store.location.new_claim(fresh, now=LEASE, lease=LEASE)
        before = await snapshot(store)
        assert await store.location.close_placement(MESH, old.descriptor.node_rid,
                                                    old.lifecycle_generation) is False
        assert await snapshot(store) == before
        assert await store.location.descriptors(now=LEASE) == [new]
        assert new.accepts_placements is True


async def test_the_mark_survives_renew(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, now=0.0)
        rid = c.descriptor.node_rid
        assert await store.location.close_placement(MESH, rid, 1) is True
        renewed = await store.location.renew(MESH, rid, 1, now=5.0, lease=LEASE)
        assert renewed.accepts_placements is False
        assert renewed.lease_expires_at == 15.0
        assert renewed.store_version == c.store_version + 2
        assert await store.location.descriptors(now=12.0) == [renewed]


async def test_the_mark_ends_with_the_claim(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, now=0.0)
        rid = c.descriptor.node_rid
        assert await store.location.close_placement(MESH, rid, 1) is True
        assert await store.location.remove(MESH, rid, 1) is True
        assert await store.location.descriptors(now=0.0) == []
        assert await store.location.close_placement(MESH, rid, 1) is False  # gone
        # The next lifecycle of the NodeId (a fresh claim, even at the same key)
        # accepts placements again.
        again = await store.location.new_claim(descriptor("node-a", node_rid=rid), now=0.0,
                                               lease=LEASE)
        assert again.accepts_placements is True
        assert (await store.location.descriptors(now=0.0)) == [again]


async def test_an_expired_marked_claim_replaced_by_new_claim_accepts_again(store):
    with trio.fail_after(TIMEOUT):
        old = await claim(store, now=0.0)
        rid = old.descriptor.node_rid
        assert await store.location.close_placement(MESH, rid, 1) is True
        new = await store.location.new_claim(descriptor("node-a", node_rid=rid), now=LEASE,
                                             lease=LEASE)
        assert new.accepts_placements is True
        assert await store.location.descriptors(now=LEASE) == [new]
        assert (await store.location.renew(MESH, rid, new.lifecycle_generation, now=LEASE,
                                           lease=LEASE)).accepts_placements is True


async def test_close_placement_marks_an_expired_claim_of_that_lifecycle(store):
    # Like Remove it takes no ``now``: the claim at the key is that lifecycle's, live or not.
    with trio.fail_after(TIMEOUT):
        c = await claim(store, now=0.0)
        rid = c.descriptor.node_rid
        assert await store.location.descriptors(now=LEASE) == []  # expired: not listed
        assert await store.location.close_placement(MESH, rid, 1) is True
        listed = await store.location.descriptors(now=0.0)  # seen from before the expiry
        assert [x.accepts_placements for x in listed] == [False]


async def test_open_placement_clears_the_mark_and_descriptors_read_it_back(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        rid = c.descriptor.node_rid
        assert await store.location.close_placement(MESH, rid, 1) is True
        assert await store.location.open_placement(MESH, rid, 1) is True
        (opened,) = await store.location.descriptors(now=0.0)
        assert opened.accepts_placements is True
        assert opened.store_version == c.store_version + 2
        assert (opened.descriptor, opened.lifecycle_generation, opened.lease_expires_at) == (
            c.descriptor, c.lifecycle_generation, c.lease_expires_at)
        renewed = await store.location.renew(MESH, rid, 1, now=1.0, lease=LEASE)
        assert renewed.accepts_placements is True  # Renew keeps the cleared mark cleared
        assert await store.location.close_placement(MESH, rid, 1) is True  # and again
        assert (await store.location.descriptors(now=1.0))[0].accepts_placements is False


async def test_open_placement_is_idempotent_and_fenced_by_lifecycle(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        rid = c.descriptor.node_rid
        before = await snapshot(store)
        assert await store.location.open_placement(MESH, rid, 1) is True  # never marked
        assert await snapshot(store) == before  # nothing written
        assert await store.location.close_placement(MESH, rid, 1) is True
        marked = await snapshot(store)
        assert await store.location.open_placement(MESH, rid, 2) is False
        assert await store.location.open_placement("other", rid, 1) is False
        assert await store.location.open_placement(MESH, descriptor("x").node_rid, 1) is False
        assert await snapshot(store) == marked
        assert (await store.location.descriptors(now=0.0))[0].accepts_placements is False


async def test_dead_claims_lists_the_claims_whose_lease_is_over(store):
    with trio.fail_after(TIMEOUT):
        dead = await claim(store, "node-a", now=0.0)
        live = await claim(store, "node-b", now=LEASE)
        assert await store.location.dead_claims(now=0.0) == []
        assert await store.location.dead_claims(now=LEASE) == [dead]  # at expiry: dead
        assert await store.location.descriptors(now=LEASE) == [live]
        assert await store.location.dead_claims(MESH, now=LEASE) == [dead]
        assert await store.location.dead_claims("other", now=LEASE) == []
        both = await store.location.dead_claims(now=3 * LEASE)
        assert both == sorted([dead, live], key=lambda c: c.descriptor.node_rid.value)
        assert await store.location.remove(MESH, dead.descriptor.node_rid, 1) is True
        assert await store.location.dead_claims(now=3 * LEASE) == [live]
