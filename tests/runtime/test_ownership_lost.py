"""A node that loses its lease stops its Spots without touching the store (06 §9).

"Owner is expired -> can't perform new message/timer admission or a location update."
When the node learns its lease is gone (the store refuses a renewal, no renewal is
answered before the lease deadline, or one is answered only after it) every local
incarnation stops admitting, queued work ends ``zl.Unavailable`` without running, running
turns finish (a reply that would come after the lease deadline is withheld: the caller
gets ``zl.Unavailable``, as from a process paused past its lease), timers are cancelled
and ``on_close(OWNERSHIP_LOST)`` runs once per Spot -- with no store write at all, also
at exit. Later calls on the node raise ``zl.Unavailable``
saying it lost its lease and that it rejoins the Mesh by itself (what the rejoin does is
tested in ``test_lease_rejoin.py``; here the store takes no new claim while it fails, so
the lost lifecycle is watched alone).

The store is a :class:`MemoryStore` whose renewal the test controls (``LeaseStore``), or a
plain one whose claim the test removes through the store API. Timing runs on MockClock
(``autojump_clock``); every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.core.errors import DeadlineExceeded
from zlink_trio.core.records import AuthorityState
from zlink_trio.store.memory import MemoryLocationStore
from zlink_trio.testing import MemoryStoreWith

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.store import MemoryStore

#: What the Spots did, in order.
LOG: list[tuple[Any, ...]] = []
#: ``gate`` (a handler waits for it) and ``activate`` (on_activate waits for it, if set).
EVENTS: dict[str, trio.Event] = {}

LOST = r"lost its lease.*rejoins the Mesh by itself"


@attrs.frozen
class Hold:
    tag: str


@attrs.frozen
class Ping:
    tag: str


@attrs.frozen
class Pong:
    tag: str


@attrs.frozen
class Arm:
    period: float


@attrs.frozen
class ArmTwo:
    """Two one-shot timers due together: ``slow_tick`` (waits for the gate), then ``tick``."""

    delay: float


class _Base:
    ctx: zl.SpotContext

    @zl.handler
    async def hold(self, msg: Hold) -> Pong:
        LOG.append(("hold-start", self.ctx.spot_id, msg.tag))
        await EVENTS["gate"].wait()
        LOG.append(("hold-end", self.ctx.spot_id, msg.tag))
        return Pong(msg.tag)

    @zl.handler
    async def ping(self, msg: Ping) -> Pong:
        LOG.append(("ping", self.ctx.spot_id, msg.tag))
        return Pong(msg.tag)

    @zl.handler
    async def arm(self, msg: Arm) -> None:
        self.ctx.start_timer(msg.period, self.tick, period=msg.period)

    @zl.handler
    async def arm_two(self, msg: ArmTwo) -> None:
        self.ctx.start_timer(msg.delay, self.slow_tick)
        self.ctx.start_timer(msg.delay, self.tick)

    async def tick(self) -> None:
        LOG.append(("tick", self.ctx.spot_id))

    async def slow_tick(self) -> None:
        LOG.append(("slow-tick-start", self.ctx.spot_id))
        await EVENTS["gate"].wait()
        LOG.append(("slow-tick-end", self.ctx.spot_id))

    async def on_close(self, reason: zl.CloseReason) -> None:
        LOG.append(("close", self.ctx.spot_id, reason))


@zl.instance_spot("worker", relocation=zl.RecreateOnRelocation())
class Worker(_Base):
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        LOG.append(("factory", ctx.spot_id))

    async def on_activate(self) -> None:
        if "activate" in EVENTS:
            await EVENTS["activate"].wait()


@zl.user_spot("room", relocation=zl.DisableRelocation())
class Room(_Base):
    def __init__(self, ctx: zl.SpotContext, request: object | None) -> None:
        self.ctx = ctx
        LOG.append(("factory", ctx.spot_id))


class LeaseLocation(MemoryLocationStore):
    """A memory Location Store whose renewal the test steers with ``mode``.

    ``ok``: renew; ``refuse``: the store refuses (Unavailable); ``hang``: never answers;
    ``late``: the round trip takes a whole lease on the store clock, then renews;
    ``flaky``: one transient error, then ``ok``; any mode: while trio's clock is before
    ``outage_until`` the store cannot be reached (StoreUnavailable). A new claim (the
    node rejoining after it lost its lease) is refused as unreachable unless the mode is
    ``ok`` and ``claims_open`` is true, so the lost lifecycle writes nothing it should not.
    """

    def __init__(self) -> None:
        super().__init__()
        self.mode = "ok"
        self.claims_open = True
        self.renewals = 0
        self.outage_until = 0.0
        #: Added to trio's clock by :meth:`LeaseStore.clock` (the store clock).
        self.offset = 0.0

    async def new_claim(self, descriptor: Any, *, now: float, lease: float) -> Any:
        if self.mode != "ok" or not self.claims_open:
            raise zl.StoreUnavailable("test: the store takes no new claim")
        return await super().new_claim(descriptor, now=now, lease=lease)

    async def renew(self, mesh: str, node_rid: Any, lifecycle_generation: int, *,
                    now: float, lease: float) -> Any:
        self.renewals += 1
        if trio.current_time() < self.outage_until:
            raise zl.StoreUnavailable("test: the store cannot be reached")
        if self.mode == "refuse":
            raise zl.Unavailable("test: the store refuses this renewal")
        if self.mode == "hang":
            await trio.sleep_forever()
        if self.mode == "flaky":
            self.mode = "ok"
            raise DeadlineExceeded("test: the store timed out once")
        if self.mode == "late":
            self.offset += lease
        return await super().renew(mesh, node_rid, lifecycle_generation, now=now, lease=lease)


class LeaseStore(MemoryStoreWith[LeaseLocation]):
    """A MemoryStore with a steerable renewal."""

    def __init__(self) -> None:
        super().__init__(LeaseLocation())

    def clock(self) -> float:
        """The store clock: trio's clock plus the offset a ``late`` renewal adds."""
        return trio.current_time() + self.location.offset


def snapshot(store: MemoryStore) -> tuple[Any, ...]:
    """Everything both memory stores hold (records and claims are immutable values)."""
    loc, rel = store.location.state, store.relocation.state
    return (dict(loc.claims), dict(loc.records), dict(loc.lifecycles), loc.last_generation,
            dict(loc.pending), dict(loc.active), dict(rel.roots),
            {key: (dict(inbox.records or {}), inbox.last_seq, inbox.cursor)
             for key, inbox in rel.inboxes.items()})


def closes() -> list[tuple[Any, ...]]:
    return [entry for entry in LOG if entry[0] == "close"]


async def wait_until(predicate: Callable[[], bool], *, step: float = 0.01) -> None:
    """Poll ``predicate`` in mock time (bounded by the test's fail_after)."""
    for _ in range(1_000_000):
        if predicate():
            return
        await trio.sleep(step)
    pytest.fail("condition never became true")


def open_test_node(store: MemoryStore, **options: Any) -> Any:
    options.setdefault("lease", 3.0)
    options.setdefault("listen", None)  # MockClock: no real sockets
    return zl.open_node("node-a", store=store, spots=[Worker, Room], **options)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    LOG.clear()
    EVENTS.clear()


async def assert_every_call_is_unavailable(node: Any, ref: zl.SpotRef) -> None:
    with pytest.raises(zl.Unavailable, match=LOST):
        await node.client.request("w-1", Ping("later"), reply=Pong).timeout(5)
    with pytest.raises(zl.Unavailable, match=LOST):
        await node.client.send("w-1", Ping("later"))
    with pytest.raises(zl.Unavailable, match=LOST):
        await node.client.request("w-new", Ping("later"), reply=Pong).instance_spot()
    with pytest.raises(zl.Unavailable, match=LOST):
        await node.spots.get_or_create("r-new", "room")
    with pytest.raises(zl.Unavailable, match=LOST):
        await node.spots.create("room")
    with pytest.raises(zl.Unavailable, match=LOST):
        await node.spots.find("r-1")
    with pytest.raises(zl.Unavailable, match=LOST):
        await node.spots.close(ref)


async def test_refused_renewal_stops_every_spot_once_without_store_writes(autojump_clock):
    store = LeaseStore()
    EVENTS["gate"] = trio.Event()
    outcomes: dict[str, Any] = {}

    async def call(name: str, msg: object) -> None:
        try:
            outcomes[name] = await node.client.request("w-1", msg, reply=Pong).timeout(20)
        except zl.ZLinkError as exc:
            outcomes[name] = exc

    with trio.fail_after(60):
        async with open_test_node(store) as node, trio.open_nursery() as nursery:
            await node.client.request("w-1", Ping("first"), reply=Pong).instance_spot()
            await node.client.request("w-1", Arm(0.5), reply=None)
            await node.client.request("w-2", Ping("first"), reply=Pong).instance_spot()
            room = await node.spots.get_or_create("r-1", "room")
            await trio.sleep(1.2)  # first-record cleanup done, a renewal or two, some ticks
            assert ("tick", "w-1") in LOG
            nursery.start_soon(call, "running", Hold("running"))
            await wait_until(lambda: ("hold-start", "w-1", "running") in LOG)
            nursery.start_soon(call, "queued", Ping("queued"))
            await trio.sleep(0.1)
            await node.client.send("w-1", Ping("queued-send"))
            before = snapshot(store)

            store.location.mode = "refuse"
            await wait_until(lambda: node.statistics().state != "serving")
            assert node.statistics().state == "lease_lost"
            # Queued work ends Unavailable without running; the running turn goes on.
            await wait_until(lambda: "queued" in outcomes)
            assert isinstance(outcomes["queued"], zl.Unavailable)
            assert "running" not in outcomes
            # Idle Spots are gone already, each with one OWNERSHIP_LOST; w-1 is not yet.
            assert sorted(closes()) == [("close", "r-1", zl.CloseReason.OWNERSHIP_LOST),
                                        ("close", "w-2", zl.CloseReason.OWNERSHIP_LOST)]
            ticks = LOG.count(("tick", "w-1"))
            await trio.sleep(3)
            assert LOG.count(("tick", "w-1")) == ticks  # timers cancelled

            await assert_every_call_is_unavailable(node, room.ref)

            EVENTS["gate"].set()
            await wait_until(lambda: node.statistics().state == "stopped")
            # The running turn ran to its end, past the lease deadline: its reply is
            # withheld (another lifecycle may own the Spot by now).
            assert ("hold-end", "w-1", "running") in LOG
            assert isinstance(outcomes["running"], zl.Unavailable)
            assert "lease ran out" in outcomes["running"].message
            assert sorted(closes()) == [("close", "r-1", zl.CloseReason.OWNERSHIP_LOST),
                                        ("close", "w-1", zl.CloseReason.OWNERSHIP_LOST),
                                        ("close", "w-2", zl.CloseReason.OWNERSHIP_LOST)]
            assert ("ping", "w-1", "queued") not in LOG
            assert ("ping", "w-1", "queued-send") not in LOG
            assert node.statistics().active_spots == 0
            assert snapshot(store) == before
        assert snapshot(store) == before  # the exit touched no store record either
        assert len(closes()) == 3


async def test_a_turn_that_ends_before_the_lease_deadline_still_replies(autojump_clock):
    """A refused renewal stops the node, but a turn that ends while the lease deadline
    has not passed was run by a valid owner: its reply is delivered."""
    store = LeaseStore()
    EVENTS["gate"] = trio.Event()
    with trio.fail_after(30):
        async with open_test_node(store) as node, trio.open_nursery() as nursery:
            outcome: list[object] = []

            async def call() -> None:
                outcome.append(await node.client.request(
                    "w-1", Hold("in-time"), reply=Pong).instance_spot().timeout(20))

            nursery.start_soon(call)
            await wait_until(lambda: ("hold-start", "w-1", "in-time") in LOG)
            store.location.mode = "refuse"
            await wait_until(lambda: node.statistics().state != "serving")
            assert trio.current_time() < node.statistics().lease_expires_at
            EVENTS["gate"].set()
            await wait_until(lambda: bool(outcome))
    assert outcome == [Pong("in-time")]


async def test_a_paused_owner_runs_no_queued_turn_and_withholds_a_late_reply(autojump_clock):
    """The GC-pause zombie, in one process: the lease deadline passes while a turn runs
    and more work waits in the queue (no renewal is answered). The running turn's reply
    is withheld (Unavailable) and the queued request is not run."""
    store = LeaseStore()
    EVENTS["gate"] = trio.Event()
    outcomes: dict[str, Any] = {}
    with trio.fail_after(30):
        async with open_test_node(store, injected=zl.InjectedOptions(clock=store.clock)) as node, \
                trio.open_nursery() as nursery:
            async def call(name: str, msg: object) -> None:
                try:
                    outcomes[name] = await node.client.request(
                        "w-1", msg, reply=Pong).instance_spot().timeout(20)
                except zl.ZLinkError as exc:
                    outcomes[name] = exc

            nursery.start_soon(call, "running", Hold("late"))
            await wait_until(lambda: ("hold-start", "w-1", "late") in LOG)
            nursery.start_soon(call, "queued", Ping("queued"))
            await trio.sleep(0.01)
            store.location.offset = 10.0  # the store clock jumps past the lease deadline
            EVENTS["gate"].set()
            await wait_until(lambda: len(outcomes) == 2)
    assert ("hold-end", "w-1", "late") in LOG
    assert ("ping", "w-1", "queued") not in LOG
    for name in ("running", "queued"):
        assert isinstance(outcomes[name], zl.Unavailable), outcomes
    assert "lease ran out" in outcomes["running"].message


async def test_removed_claim_is_learned_at_the_next_renewal(autojump_clock):
    store = LeaseStore()
    with trio.fail_after(30):
        async with open_test_node(store) as node:
            room = await node.spots.get_or_create("r-1", "room")
            store.location.claims_open = False
            (claim,) = await store.location.descriptors(now=trio.current_time())
            assert await store.location.remove(node.mesh, node.node_rid,
                                               claim.lifecycle_generation)
            before = snapshot(store)
            await wait_until(lambda: node.statistics().state == "stopped")
            assert closes() == [("close", "r-1", zl.CloseReason.OWNERSHIP_LOST)]
            with pytest.raises(zl.Unavailable, match="removed or replaced"):
                await node.client.request("r-1", Ping("later"), reply=Pong)
            await assert_every_call_is_unavailable(node, room.ref)
        assert snapshot(store) == before
        record = store.location.state.records["r-1"]  # authority kept for the operator
        assert record.state is AuthorityState.READY
        assert record.owner.node_rid == node.node_rid


async def test_unanswered_renewal_loses_the_lease_at_its_deadline(autojump_clock):
    store = LeaseStore()
    with trio.fail_after(30):
        async with open_test_node(store, injected=zl.InjectedOptions(clock=store.clock)) as node:
            await node.spots.get_or_create("r-1", "room")
            expires = node.statistics().lease_expires_at
            store.location.mode = "hang"
            await wait_until(lambda: node.statistics().state != "serving", step=0.001)
            assert expires <= trio.current_time() < expires + 0.01
            await wait_until(lambda: node.statistics().state == "stopped")
            assert closes() == [("close", "r-1", zl.CloseReason.OWNERSHIP_LOST)]
            with pytest.raises(zl.Unavailable, match="no renewal was answered"):
                await node.spots.find("r-1")


async def test_renewal_answered_after_the_deadline_loses_the_lease(autojump_clock):
    store = LeaseStore()
    with trio.fail_after(30):
        async with open_test_node(store, injected=zl.InjectedOptions(clock=store.clock)) as node:
            await node.spots.get_or_create("r-1", "room")
            store.location.mode = "late"
            await wait_until(lambda: node.statistics().state == "stopped")
            assert closes() == [("close", "r-1", zl.CloseReason.OWNERSHIP_LOST)]
            with pytest.raises(zl.Unavailable, match="answered after it had expired"):
                await node.spots.find("r-1")


async def test_transient_renewal_error_is_retried_within_the_lease(autojump_clock):
    store = LeaseStore()
    with trio.fail_after(30):
        async with open_test_node(store) as node:
            await node.spots.get_or_create("r-1", "room")
            store.location.mode = "flaky"
            await trio.sleep(10)  # several renewal periods
            assert store.location.mode == "ok"
            assert store.location.renewals >= 5
            assert node.statistics().state == "serving"
            assert await node.client.request("r-1", Ping("still"), reply=Pong) == Pong("still")
        assert closes() == [("close", "r-1", zl.CloseReason.NODE_SHUTDOWN)]


async def test_a_store_outage_that_ends_before_the_lease_does_keeps_the_lease(autojump_clock):
    """The renewal retries keep a margin (at most a tenth of the lease apart): an outage
    from the first renewal to 0.2 s before the lease deadline is ridden through. (With a
    doubling back-off alone, the last retry fell on the deadline and the lease was lost:
    tests/chaos found it with a Redis link cut.)"""
    store = LeaseStore()
    with trio.fail_after(30):
        async with open_test_node(store, lease=1.5) as node:
            await node.spots.get_or_create("r-1", "room")
            deadline = node.statistics().lease_expires_at
            store.location.outage_until = deadline - 0.2
            await trio.sleep(5)  # the outage, then several renewal periods
            assert node.statistics().state == "serving"
            assert store.location.renewals >= 8
            assert await node.client.request("r-1", Ping("after"), reply=Pong) == Pong("after")
        assert closes() == [("close", "r-1", zl.CloseReason.NODE_SHUTDOWN)]


async def test_close_in_progress_ends_unavailable_and_closes_with_ownership_lost(
    autojump_clock,
):
    store = LeaseStore()
    EVENTS["gate"] = trio.Event()
    outcome: list[object] = []

    async def close(ref: zl.SpotRef) -> None:
        try:
            outcome.append(await node.spots.close(ref))
        except zl.ZLinkError as exc:
            outcome.append(exc)

    with trio.fail_after(30):
        async with open_test_node(store) as node, trio.open_nursery() as nursery:
            room = await node.spots.get_or_create("r-1", "room")
            await node.client.send("r-1", Hold("running"))
            await wait_until(lambda: ("hold-start", "r-1", "running") in LOG)
            nursery.start_soon(close, room.ref)
            await wait_until(
                lambda: store.location.state.records["r-1"].state is AuthorityState.CLOSING)
            store.location.mode = "refuse"
            await wait_until(lambda: node.statistics().state != "serving")
            EVENTS["gate"].set()
            await wait_until(lambda: bool(outcome))
            assert isinstance(outcome[0], zl.Unavailable)
            assert closes() == [("close", "r-1", zl.CloseReason.OWNERSHIP_LOST)]
            await wait_until(lambda: node.statistics().state == "stopped")
        # Not released: the Closing record stays for the operator.
        assert store.location.state.records["r-1"].state is AuthorityState.CLOSING


async def test_cold_activation_in_flight_ends_unavailable_and_writes_nothing_more(
    autojump_clock,
):
    store = LeaseStore()
    EVENTS["activate"] = trio.Event()
    outcome: list[object] = []

    async def call() -> None:
        try:
            outcome.append(await node.client.request("w-1", Ping("first"), reply=Pong)
                           .instance_spot().timeout(20))
        except zl.ZLinkError as exc:
            outcome.append(exc)

    with trio.fail_after(30):
        async with open_test_node(store) as node, trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await wait_until(lambda: ("factory", "w-1") in LOG)
            before = snapshot(store)
            store.location.mode = "refuse"
            await wait_until(lambda: bool(outcome))
            assert isinstance(outcome[0], zl.Unavailable)
            assert "lost its lease" in str(outcome[0])
            assert closes() == [("close", "w-1", zl.CloseReason.ACTIVATION_FAILED)]
            await wait_until(lambda: node.statistics().state == "stopped")
            assert snapshot(store) == before
        assert snapshot(store) == before
        assert store.location.state.records["w-1"].state is AuthorityState.CREATING


async def test_no_timer_tick_runs_past_the_lease_deadline(autojump_clock):
    """Issue #13 item 5: once the owner's lease deadline has passed on the store clock --
    before any renewal could move it, or tell the node it is gone -- no tick runs, as no
    message is admitted."""
    store = LeaseStore()
    with trio.fail_after(30):
        async with open_test_node(store, injected=zl.InjectedOptions(clock=store.clock)) as node:
            await node.client.request("w-1", Ping("first"), reply=Pong).instance_spot()
            await node.client.request("w-1", Arm(0.25), reply=None)
            await trio.sleep(0.6)
            ticks = LOG.count(("tick", "w-1"))
            assert ticks >= 2
            # The store clock runs past the lease deadline (a stalled renewal, a paused
            # process); the next renewal is seconds away on the node's own clock.
            store.location.offset += 60
            await trio.sleep(1.0)
            assert LOG.count(("tick", "w-1")) == ticks


async def test_a_tick_queued_before_the_lease_deadline_does_not_run_after_it(autojump_clock):
    """Two ticks come due together and are queued while the lease is valid; the first one
    runs past the lease deadline (the store clock jumps while it waits). The second does
    not run after it: the lease is compared again at the start of every tick's turn."""
    store = LeaseStore()
    EVENTS["gate"] = trio.Event()
    with trio.fail_after(30):
        async with open_test_node(store, injected=zl.InjectedOptions(clock=store.clock)) as node:
            await node.client.request("w-1", Ping("first"), reply=Pong).instance_spot()
            await node.client.request("w-1", ArmTwo(0.25), reply=None)
            await wait_until(lambda: ("slow-tick-start", "w-1") in LOG)
            store.location.offset += 60  # the lease deadline passes during the first tick
            EVENTS["gate"].set()
            await wait_until(lambda: ("slow-tick-end", "w-1") in LOG)
            await trio.sleep(1.0)
            assert ("tick", "w-1") not in LOG
