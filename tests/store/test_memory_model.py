"""A stateful model of the memory Location Store's pure transactions.

Hypothesis drives the sync ``txn_*`` functions directly (no event loop; the
memory backend only adds a checkpoint in front of each). Every rule that is
refused must leave the state exactly as it was; after every rule the
invariants below must hold:

- at most one authority per Spot ID and per ObjectGeneration, and Entry
  claims are exactly the live-or-expired claims' linked Entry records;
- a claim accepts placements exactly when ClosePlacement did not mark its
  lifecycle since the last OpenPlacement (the mark survives Renew and ends with
  OpenPlacement or with the claim);
- ObjectGeneration never decreases for an ID and strictly increases across
  re-creation;
- the capacity counters equal the records: pending = Creating records plus
  moves targeting the owner, active = Ready/Closing/Relocating/Sealed/RelayReady
  records;
- the store and the ``SpotAuthority`` chart agree: every authority state change a
  transaction makes is the chart's transition for that transaction's event (an
  idempotent repeat changes nothing), so a store never takes a step the chart
  does not define -- an abort after relay-ready included.
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

from statecharts import SpotAuthority, compile
from zlink_trio.core.errors import ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import MOVING_STATES, AuthorityState, RecoveryPointer, ReservationFence
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
index = st.integers(0, 3)
CHART = compile(SpotAuthority)
#: The chart event each authority transaction is; ``None``: it never changes a state.
EVENTS = {
    loc.txn_reserve: "reserve", loc.txn_commit_ready: "commit_ready",
    loc.txn_abort_creating: "abort_creating", loc.txn_begin_close: "begin_close",
    loc.txn_release: "release", loc.txn_remove_recovery_pointer: None,
    steps.txn_begin_relocation: "begin_relocation", steps.txn_seal_relocation: "seal",
    steps.txn_accept_relay_ready: "accept_relay_ready",
    steps.txn_commit_relocation: "commit_relocation",
    steps.txn_abort_relocation: "abort_relocation",
}


def chart_state(record) -> str:
    return "missing" if record is None else record.state.value


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
        #: The ``(mesh, node_rid, lifecycle)`` that ClosePlacement marked.
        self.closed: set[tuple[object, ...]] = set()

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
        self.check_chart(fn, before)
        return result

    def check_chart(self, fn, before: loc.LocationState) -> None:
        """Each record the transaction changed took the chart's step for its event."""
        if fn not in EVENTS:
            return  # descriptor claims: only Entry records, which the chart does not model
        ids = set(before.records) | set(self.state.records)
        changed = [i for i in ids if before.records.get(i) != self.state.records.get(i)]
        assert len(changed) <= 1, changed
        for spot_id in changed:
            old, new = chart_state(before.records.get(spot_id)), chart_state(
                self.state.records.get(spot_id))
            name = EVENTS[fn]
            if name is None:
                assert old == new, (fn.__name__, old, new)
                continue
            assert CHART.allows(old, name), f"{fn.__name__}: the chart has no {name} from {old}"
            assert CHART.step(old, name) == new, (fn.__name__, old, new)

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

    @precondition(lambda self: self.claims)
    @rule(i=index)
    def close_placement(self, i):
        c = self.pick(self.claims, i)
        before = snapshot(self.state)
        current = before.claims.get(c.key)
        marked = self.run(claims.txn_close_placement, MESH, c.descriptor.node_rid,
                          c.lifecycle_generation)
        mine = current is not None and current.lifecycle_generation == c.lifecycle_generation
        assert marked is mine
        assert self.state.records == before.records
        if mine:
            self.closed.add((*c.key, c.lifecycle_generation))
            assert self.state.claims[c.key].store_version == current.store_version + (
                1 if current.accepts_placements else 0)
        else:
            assert self.state == before

    @precondition(lambda self: self.claims)
    @rule(i=index)
    def open_placement(self, i):
        c = self.pick(self.claims, i)
        before = snapshot(self.state)
        current = before.claims.get(c.key)
        opened = self.run(claims.txn_open_placement, MESH, c.descriptor.node_rid,
                          c.lifecycle_generation)
        mine = current is not None and current.lifecycle_generation == c.lifecycle_generation
        assert opened is mine
        assert self.state.records == before.records
        if mine:
            self.closed.discard((*c.key, c.lifecycle_generation))
            assert self.state.claims[c.key].store_version == current.store_version + (
                0 if current.accepts_placements else 1)
        else:
            assert self.state == before

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

    @precondition(lambda self: self.claims)
    @rule(i=index, spot=st.sampled_from(SPOTS), t=st.sampled_from(TYPES))
    def create_ready(self, i, spot, t):
        """Reserve then CommitReady at once, so Ready (and movable) records are common."""
        fence = self.run(loc.txn_reserve, spot, kind=t[1], stable_type=t[0], mesh=MESH,
                         owner=self.pick(self.claims, i).owner(), now=self.now)
        if fence is not None:
            self.fences.append(fence)
            self.run(loc.txn_commit_ready, fence, now=self.now)

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

    @precondition(lambda self: self.claims)
    @rule(spot=st.sampled_from(SPOTS), i=index,
          last=st.sampled_from(("begin", "seal", "relay_ready", "commit", "commit", "abort",
                                "abort_late")))
    def move(self, spot, i, last):
        """One move in a row toward another current claim; stop at ``last`` or a refusal."""
        r = self.record(spot)
        current = [c for c in self.claims if r is not None and c.descriptor.node_rid
                   != r.owner.node_rid and getattr(self.state.claims.get(c.key),
                                                    "lifecycle_generation", None)
                   == c.lifecycle_generation]
        if r is None or not current:
            return
        fence, target = r.fence(), self.pick(current, i).owner()
        if self.run(steps.txn_begin_relocation, fence, target=target, now=self.now) is None:
            return
        if last == "abort":
            self.run(steps.txn_abort_relocation, fence)
            return
        if last == "begin" or self.run(steps.txn_seal_relocation, fence, now=self.now) is None:
            return
        if last == "seal" or self.run(steps.txn_accept_relay_ready, fence, target=target,
                                      now=self.now) is None:
            return
        if last == "abort_late":
            assert self.run(steps.txn_abort_relocation, fence) is None  # refused, unchanged
        elif last == "commit":
            self.run(steps.txn_commit_relocation, fence, now=self.now)

    @rule(spot=st.sampled_from(SPOTS),
          step=st.sampled_from(("seal", "relay_ready", "commit", "abort")), i=index,
          named=st.booleans())
    def relocation_step(self, spot, step, i, named):
        r = self.record(spot)
        if r is None:
            return
        if step == "seal":
            self.run(steps.txn_seal_relocation, r.fence(), now=self.now)
        elif step == "relay_ready":
            target = r.relocation_target
            if not named or target is None:  # mostly the target the move names
                target = self.pick(self.claims, i).owner()
            self.run(steps.txn_accept_relay_ready, r.fence(), target=target, now=self.now)
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
    def a_claim_accepts_placements_until_closed(self):
        for key, c in self.state.claims.items():
            assert c.accepts_placements is ((*key, c.lifecycle_generation) not in self.closed)

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
            if r.state in MOVING_STATES:
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
