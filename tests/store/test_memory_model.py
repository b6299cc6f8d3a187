"""A stateful model of the memory Location Store's pure transactions.

Hypothesis drives the sync ``txn_*`` functions directly (no event loop; the
memory backend only adds a checkpoint in front of each). Every rule that is
refused must leave the state exactly as it was; after every rule the
invariants below must hold:

- at most one authority per Spot ID and per ObjectGeneration, and Entry
  claims are exactly the live-or-expired claims' linked Entry records;
- ObjectGeneration never decreases for an ID and strictly increases across
  re-creation;
- the capacity counters equal the records: pending = Creating records plus
  moves targeting the owner, active = Ready/Closing/Relocating/Sealed records.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from store_helpers import MESH, descriptor

from zlink_trio.core.errors import ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState, RecoveryPointer, ReservationFence
from zlink_trio.store.rules import claims
from zlink_trio.store.rules import location as loc
from zlink_trio.store.rules import relocation_steps as steps
from zlink_trio.store.values import MAX_PAGE_SIZE

if TYPE_CHECKING:
    from zlink_trio.core.descriptor import NodeClaim

NODES = ("n1", "n2")
SPOTS = ("a", "b", "c")
TYPES = (("room", SpotKind.USER), ("counter", SpotKind.INSTANCE))
POINTER = RecoveryPointer(root_ref="r", sha256="ee" * 32, size=1)
MOVING = (AuthorityState.RELOCATING, AuthorityState.SEALED)
index = st.integers(0, 3)


def snapshot(state: loc.LocationState) -> loc.LocationState:
    # Values are immutable, so copying the dicts is a full snapshot.
    return loc.LocationState(
        claims=dict(state.claims), records=dict(state.records),
        lifecycles=dict(state.lifecycles), last_generation=state.last_generation,
        pending=dict(state.pending), active=dict(state.active),
    )


class LocationModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = loc.LocationState()
        self.now = 0.0
        self.claims: list[NodeClaim] = []
        self.fences: list[ReservationFence] = []
        self.last_gen: dict[str, int] = {}
        self.absent: set[str] = set()

    def run(self, fn, *args, **kwargs):
        """Run one transaction; a refusal must leave the state untouched."""
        before = snapshot(self.state)
        try:
            result = fn(self.state, *args, **kwargs)
        except ZLinkError as error:
            assert self.state == before
            event(f"{fn.__name__} refused: {type(error).__name__}")
            return None
        event(f"{fn.__name__} ok")
        return result

    def pick(self, items, i):
        return items[i % len(items)]

    # -- node lifecycle ------------------------------------------------------------------------

    @initialize(capacity=st.integers(1, 3))
    def two_nodes(self, capacity):
        for node in NODES:
            self.claims.append(claims.txn_new_claim(self.state, descriptor(node, capacity=capacity),
                                                 now=0.0, lease=100.0))

    @rule(node=st.sampled_from(NODES), lease=st.floats(1, 60), capacity=st.integers(0, 3))
    def new_claim(self, node, lease, capacity):
        c = self.run(claims.txn_new_claim, descriptor(node, capacity=capacity), now=self.now,
                     lease=lease)
        if c is not None:
            assert all(c.lifecycle_generation > o.lifecycle_generation for o in self.claims
                       if o.descriptor.node_id == node)
            self.claims.append(c)

    @precondition(lambda self: self.claims)
    @rule(i=index, lease=st.floats(1, 30))
    def renew(self, i, lease):
        c = self.pick(self.claims, i)
        self.run(claims.txn_renew, MESH, c.descriptor.node_rid, c.lifecycle_generation,
                 now=self.now, lease=lease)

    @precondition(lambda self: self.claims)
    @rule(i=index)
    def remove(self, i):
        c = self.pick(self.claims, i)
        self.run(claims.txn_remove, MESH, c.descriptor.node_rid, c.lifecycle_generation)

    @rule(dt=st.floats(0, 5))
    def advance(self, dt):
        self.now += dt

    # -- creation ------------------------------------------------------------------------------

    @precondition(lambda self: self.claims)
    @rule(i=index, spot=st.sampled_from(SPOTS), t=st.sampled_from(TYPES), pointer=st.booleans())
    def reserve(self, i, spot, t, pointer):
        owner = self.pick(self.claims, i).owner()
        fence = self.run(loc.txn_reserve, spot, kind=t[1], stable_type=t[0], mesh=MESH,
                         owner=owner, now=self.now,
                         recovery_pointer=POINTER if pointer else None)
        if fence is not None:
            self.fences.append(fence)

    @precondition(lambda self: self.fences)
    @rule(i=index)
    def commit_ready(self, i):
        self.run(loc.txn_commit_ready, self.pick(self.fences, i), now=self.now)

    @precondition(lambda self: self.fences)
    @rule(i=index)
    def abort_creating(self, i):
        self.run(loc.txn_abort_creating, self.pick(self.fences, i))

    # -- close, pointer, relocation ------------------------------------------------------------

    def record(self, spot):
        return self.state.records.get(spot)

    @rule(spot=st.sampled_from(SPOTS), i=index, own=st.booleans())
    def begin_close(self, spot, i, own):
        r = self.record(spot)
        if r is None or not (own or self.claims):
            return
        owner = r.owner if own else self.pick(self.claims, i).owner()
        self.run(loc.txn_begin_close, spot, object_generation=r.object_generation, owner=owner,
                 now=self.now)

    @rule(spot=st.sampled_from(SPOTS))
    def release(self, spot):
        r = self.record(spot)
        if r is not None:
            self.run(loc.txn_release, r.fence())

    @rule(spot=st.sampled_from(SPOTS), stale=st.booleans())
    def remove_pointer(self, spot, stale):
        r = self.record(spot)
        if r is not None:
            self.run(loc.txn_remove_recovery_pointer, spot,
                     object_generation=r.object_generation,
                     expected_version=r.store_version + (1 if stale else 0))

    @precondition(lambda self: self.claims)
    @rule(spot=st.sampled_from(SPOTS), i=index)
    def begin_relocation(self, spot, i):
        r = self.record(spot)
        if r is not None:
            target = self.pick(self.claims, i).owner()
            self.run(steps.txn_begin_relocation, r.fence(), target=target, now=self.now)

    @rule(spot=st.sampled_from(SPOTS), step=st.sampled_from(("seal", "commit", "abort")))
    def relocation_step(self, spot, step):
        r = self.record(spot)
        if r is None:
            return
        if step == "seal":
            self.run(steps.txn_seal_relocation, r.fence(), now=self.now)
        elif step == "commit":
            self.run(steps.txn_commit_relocation, r.fence(), now=self.now)
        else:
            self.run(steps.txn_abort_relocation, r.fence())

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def one_authority_per_id_and_generation(self):
        records = self.state.records.values()
        gens = [r.object_generation for r in records]
        assert len(gens) == len(set(gens))
        assert all(g <= self.state.last_generation for g in gens)
        entries = {r.spot_id for r in records if r.kind is SpotKind.ENTRY}
        linked = {c.descriptor.entry_spot_id for c in self.state.claims.values()}
        assert entries == linked
        page = loc.txn_query(self.state, page_size=MAX_PAGE_SIZE)
        assert len(page.records) == len(self.state.records)

    @invariant()
    def generations_increase_per_id(self):
        for spot in SPOTS:
            r = self.record(spot)
            if r is None:
                if spot in self.last_gen:
                    self.absent.add(spot)
                continue
            if spot in self.absent:
                assert r.object_generation > self.last_gen[spot]
                self.absent.discard(spot)
            else:
                assert r.object_generation == self.last_gen.get(spot, r.object_generation)
            self.last_gen[spot] = r.object_generation

    @invariant()
    def capacity_counters_match_records(self):
        pending: Counter[loc.CapacityKey] = Counter()
        active: Counter[loc.CapacityKey] = Counter()
        for r in self.state.records.values():
            if r.kind is SpotKind.ENTRY:
                continue
            key = loc.capacity_key(r.mesh, r.owner)
            if r.state is AuthorityState.CREATING:
                pending[key] += 1
            else:
                active[key] += 1
            if r.state in MOVING:
                assert r.relocation_target is not None
                pending[loc.capacity_key(r.mesh, r.relocation_target)] += 1
        assert dict(pending) == self.state.pending
        assert dict(active) == self.state.active
        for claim in self.state.claims.values():
            key = loc.capacity_key(claim.descriptor.mesh, claim.owner())
            assert pending[key] + active[key] <= claim.descriptor.capacity


TestLocationModel = LocationModel.TestCase
TestLocationModel.settings = settings(max_examples=200, stateful_step_count=50, deadline=None)


def test_query_stops_before_crossing_the_byte_budget():
    state = loc.LocationState()
    c = claims.txn_new_claim(state, descriptor("n1", capacity=50), now=0.0, lease=10.0)
    for i in range(20):
        loc.txn_reserve(state, f"s-{i:02}", kind=SpotKind.USER, stable_type="room", mesh=MESH,
                        owner=c.owner(), now=0.0)
    one = next(iter(state.records.values())).encoded_size()
    budget = 2 + 3 * one + 3  # room for about three records
    seen: list[str] = []
    cursor = None
    while True:
        page = loc.txn_query(state, page_size=1000, cursor=cursor, max_bytes=budget)
        size = 2 + sum(r.encoded_size() for r in page.records) + len(page.records) - 1
        assert size <= budget or len(page.records) == 1
        assert 1 <= len(page.records) <= 4
        seen.extend(r.spot_id for r in page.records)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(state.records)
    # A budget smaller than one record still makes progress, one record per page.
    assert len(loc.txn_query(state, page_size=5, max_bytes=1).records) == 1
