"""A stateful model of relocation: three nodes, moves racing with everything else.

Theory of operation
-------------------
:class:`RelocationModel` is a hypothesis ``RuleBasedStateMachine`` driving THREE nodes
that share one store -- ``memory://``, a SQLite file or Redis (a fresh key prefix per
example) -- and talk over real loopback links, as separate processes do. Its rules start
``node.relocate`` (to a named node or wherever placement picks, from the owner or from
a node that does not own the Spot, so chains of moves and Message Follow hops happen),
``node.drain``, requests and one-way sends (from three ordered senders, one per node,
and unordered ones), Instance Spots stopping themselves, ``get_or_create`` and
``close`` of a User Spot, timers armed from a handler, gates that hold a Spot's turn
(so a move waits at the seal with work queued behind it), and mock-time jumps that
fire timers, idle sweeps and deadlines. Three Spot IDs: ``k0`` (Instance,
``PreserveStateWith``), ``f0`` (Instance, ``RecreateOnRelocation``) and ``u0`` (User,
``PreserveStateWith``).

Scheduling, as in ``test_runtime_model.py`` (the test kit's ``run_race_model``):
``trio.run`` on a ``MockClock`` with ``rate=0`` and no autojump (time moves only when
``advance`` jumps it); the machine runs in a worker thread and reaches into Trio with
``TrioMachine.trio``; rules only START operations. Between rules the system settles
(``zlink_trio.testing.settle``): no task runnable for a few real milliseconds (so link
bytes and store replies have landed) and no store call in flight (counted by the kit's
``InFlight``). Trio's scheduling is seeded by hypothesis, so a failure replays (a link
round trip can still land in another order, so shrinking is best effort).

Invariants -- the issue's list, checked when each thing happens and after every rule:

* at most one node runs a handler of a Spot at any instant (a turn token per Spot),
  and at most one node has a *serving* incarnation of it;
* every message is handled at most once over all nodes; a reply means it was handled
  exactly once and is that handling's result; at the end every admitted one-way send
  ran exactly once (unless its Spot was closed by someone after it was sent); one
  sender's admitted messages to a Spot run in the order it sent them;
* a move keeps the Spot ID and ObjectGeneration (``RelocationResult.ref``) and the
  store's owner generation is one more per committed move of that generation; the
  ``PreserveStateWith`` state (the list of messages handled) arrives intact, so every
  reply counts every earlier handling of its generation;
* the factory runs at most once per move for one generation (plus its activation);
* every call ends within its deadline, with a reply or one of the typed errors the
  spec allows for it (DeadlineExceeded only at or after the deadline);
* timers fire only at a serving incarnation -- never at a source that moved away -- and
  at the end a Spot with a timer ticks where it now lives (re-armed by the framework);
* close reasons fit (RELOCATED only while a move of that Spot runs, CLOSED only after a
  stop or a close, IDLE_EVICTED only for Instance Spots, never ACTIVATION_FAILED);
* every chart transition taken is one ``statecharts`` defines; no node crashes;
* at the end no authority record, payload root or inbox is left in the store.

Chains: with three nodes a Message Follow chain has at most two hops (a Spot that comes
back to a node replaces that node's route); the hop limit itself (8, the ninth refused)
is ``test_relocation.py``'s ``test_a_chain_of_eight_moves_is_followed_and_a_ninth_hop_is_
unavailable`` (eleven nodes) and ``test_message_follow.py``'s.
"""

from __future__ import annotations

import json
import math
from collections import Counter as Tally
from typing import TYPE_CHECKING, Any, Final

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule
from race_world import RaceWorld, Setup, patch_backend

import zlink_trio as zl
from zlink_trio.core.errors import Unavailable
from zlink_trio.core.records import AuthorityState
from zlink_trio.testing import (
    Gate,
    InFlight,
    RaceHarness,
    TrioMachine,
    run_race_model,
)
from zlink_trio.testing.race_checks import (
    ReminderWrite,
    check_durable_state,
    check_reminders_apart,
    check_reminders_delivered,
    undelivered_reminders,
)
from zlink_trio.testing.spot_race import ended_durables, write_as_zombie

if TYPE_CHECKING:
    from pathlib import Path

NODES: Final = ("rm-0", "rm-1", "rm-2")
INSTANCE_IDS: Final = ("k0", "f0")
USER_ID: Final = "u0"
IDS: Final = (*INSTANCE_IDS, USER_ID)
PRESERVED: Final = ("k0", USER_ID)
IDLE_TIMEOUT: Final = 3.0
SWEEP_INTERVAL: Final = 0.5
DEFAULT_TIMEOUT: Final = 4.0
PERIOD: Final = 0.7
TIMEOUTS: Final = st.sampled_from([None, 0.5, 2.0])
R = zl.CloseReason
#: What the end of a Message Follow route says when the Spot moved there and then closed:
#: nothing there (Unavailable), or a newer generation there (InvalidOperation), 06 §6.
DEAD_FOLLOW: Final = ("neither hosts it nor has a Message Follow route",
                      "but this node hosts generation")
COMMITTED, ABORTED, REFUSED = (zl.RelocationOutcome.COMMITTED, zl.RelocationOutcome.ABORTED,
                               zl.RelocationOutcome.REFUSED)


@attrs.frozen
class RPut:
    op: int


@attrs.frozen
class RDone:
    op: int
    node: str
    #: How many messages this generation had handled, this one included.
    count: int


@attrs.frozen
class RArm:
    op: int


@attrs.frozen
class RStop:
    op: int


@attrs.frozen
class RSpec:
    op: int


class StateAdapter:
    """``PreserveStateWith``: the list of handled operations travels as JSON bytes."""

    def capture(self, spot: Any) -> bytes:
        return json.dumps(spot.handled).encode()

    def restore(self, spot: Any, data: bytes) -> None:
        spot.handled = json.loads(data)


class _Model:
    """Every model Spot reports what it does to the running example's :class:`World`."""

    ctx: zl.SpotContext
    handled: list[int]

    def _born(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.handled = []
        self.closed: R | None = None
        _world().on_factory(self)

    @property
    def node(self) -> str:
        return _world().node_names[ctx_rid(self.ctx)]

    @zl.handler
    async def put(self, msg: RPut) -> RDone:
        world = _world()
        world.turn_begins(self, msg.op)
        try:
            await world.gates[self.ctx.spot_id].wait()
        finally:
            world.turn_ends(self)
        self.handled.append(msg.op)
        world.on_handle(self, msg.op)
        return RDone(msg.op, self.node, len(self.handled))

    @zl.handler
    async def arm(self, msg: RArm) -> None:
        world = _world()
        world.turn_begins(self, msg.op)
        world.turn_ends(self)
        world.on_handle(self, msg.op)
        key = (self.ctx.spot_id, self.ctx.generation)
        if key not in world.armed:
            world.armed.add(key)
            self.ctx.start_timer(PERIOD, self.tick, period=PERIOD)

    async def tick(self) -> None:
        _world().on_tick(self)

    async def on_close(self, reason: zl.CloseReason) -> None:
        _world().on_close(self, reason)


def _dead_follow(outcome: object) -> bool:
    return isinstance(outcome, Unavailable | zl.InvalidOperation) and any(
        marker in outcome.message for marker in DEAD_FOLLOW)


def ctx_rid(ctx: zl.SpotContext) -> str:
    return str(ctx.ref.node_rid)


@zl.instance_spot("rm-kept", relocation=zl.PreserveStateWith(StateAdapter()))
class Kept(_Model):
    def __init__(self, ctx: zl.SpotContext) -> None:
        self._born(ctx)

    @zl.handler
    async def stop(self, msg: RStop) -> None:
        world = _world()
        world.turn_begins(self, msg.op)
        world.turn_ends(self)
        world.on_handle(self, msg.op)
        self.ctx.close()


@attrs.frozen
class Handled:
    """``Fresh``'s durable state: how many messages it has handled, over incarnations."""

    count: int = 0


@zl.instance_spot("rm-fresh", relocation=zl.RecreateOnRelocation(), state=Handled)
class Fresh(Kept):
    """Recreated by a move, it keeps a durable count (``ctx.state``): saved after every
    message, so each incarnation loads the last save acknowledged before it, and no
    incarnation that ended writes it any more (``race_checks.check_durable_state``)."""

    @zl.handler
    async def put(self, msg: RPut) -> RDone:
        done: RDone = await super().put(msg)
        stored = self.ctx.state.load() or Handled()
        await self.ctx.state.save(Handled(stored.count + 1))
        return done

    @zl.handler
    async def woken(self, msg: zl.Reminder) -> None:
        """A durable reminder the ``remind`` rule set (the Recorder lists the turn)."""


@zl.user_spot("rm-room", relocation=zl.PreserveStateWith(StateAdapter()))
class Room(_Model):
    def __init__(self, ctx: zl.SpotContext, request: RSpec | None) -> None:
        self._born(ctx)


TYPES: Final = {"k0": "rm-kept", "f0": "rm-fresh"}


# ---------------------------------------------------------------------------- the world


@attrs.define(eq=False)
class Op:
    """One operation the machine started, and how it ended."""

    n: int
    kind: str  # request | send | stop | arm | goc | close | relocate | drain
    spot_id: str
    node: int
    timeout: float | None
    sender: int | None = None
    to: int | None = None
    ref: zl.SpotRef | None = None
    #: The store record when the operation started (relocate: the generation it moves).
    record: Any = None
    started_at: float = math.nan
    ended_at: float = math.nan
    deadline: float = math.inf
    done: bool = False
    outcome: object = None


WORLD: World | None = None


def _world() -> World:
    assert WORLD is not None, "a model Spot ran outside an example"
    return WORLD


class World(RaceWorld[Op]):
    """One example: a fresh store, three nodes, the operations and what the Spots did."""

    names = NODES
    tag = "relocation-model"

    def __init__(self, harness: RaceHarness, closed_gates: set[str]) -> None:
        super().__init__(harness)
        self.ops: dict[int, Op] = {}
        self.gates = {spot_id: Gate(spot_id not in closed_gates) for spot_id in IDS}
        self.moves_committed: Tally[tuple[str, int]] = Tally()
        self.live: dict[str, list[_Model]] = {}
        self.closes: list[tuple[str, R, float]] = []
        self.armed: set[tuple[str, int]] = set()
        self.ticks: list[tuple[str, int, str, float]] = []
        #: The reminder writes of the ``remind`` rules, and the contexts they went through.
        self.reminder_writes: list[ReminderWrite] = []
        self.reminder_contexts: list[zl.SpotContext] = []

    def node_options(self, index: int) -> dict[str, Any]:
        return {"spots": [Kept, Fresh, Room], "instance_idle_timeout": IDLE_TIMEOUT,
                "idle_sweep_interval": SWEEP_INTERVAL, "default_timeout": DEFAULT_TIMEOUT}

    # ------------------------------------------------------------- lifetime

    async def wind_down(self) -> None:
        """Open the gates, let every operation finish, check that timers moved along."""
        await self.finish_ops()
        since = trio.current_time()
        for _ in range(3):
            self.harness.clock.jump(PERIOD)
            await self.settle()
        for _ in range(60):  # past every reminder's due by more than a take's hold
            if not undelivered_reminders(self.reminder_writes, [], self.recorder,
                                         lambda spot_id: False):
                break
            self.harness.clock.jump(0.5)
            await self.settle()
        check_reminders_delivered(self.reminder_writes, [], self.recorder,
                                  lambda spot_id: False)
        for spot_id, generation in self.armed:
            alive = [s for s in self.live.get(spot_id, []) if s.ctx.generation == generation]
            if not alive:
                continue
            where = {(node, generation) for s, generation, node, at in self.ticks
                     if s == spot_id and at >= since}
            spot = alive[0]
            self.expect((spot.node, spot.ctx.generation) in where,
                        f"{spot_id}'s timer did not fire where it lives ({spot.node}), "
                        f"ticks since the moves ended: {where}")

    # ------------------------------------------------------------- operations

    async def spawn(self, kind: str, spot_id: str, node: int, seconds: float | None, *,
                    ordered: bool = False, to: int | None = None) -> None:
        op = Op(len(self.ops) + 1, kind, spot_id, node, seconds,
                sender=node if ordered else None, to=to)
        with self.setup.in_flight.io("the model's own store read"):
            op.record = await self.view.location.find(spot_id)
        if kind == "relocate" and to is None and op.record is not None and \
                op.record.state is AuthorityState.READY:
            # "from the owner": the node the store names (ABORTED / REFUSED paths too)
            op.node = self._index(str(op.record.owner.node_rid), node)
        if kind == "close":
            op.ref = self._user_ref()
        self.ops[op.n] = op
        if op.sender is not None:
            self.queues[op.sender].send_nowait(op)
        else:
            assert self.ops_nursery is not None
            self.ops_nursery.start_soon(self._run, op)

    def _index(self, rid: str, default: int) -> int:
        name = self.node_names.get(rid)
        return NODES.index(name) if name is not None else default

    def _user_ref(self) -> zl.SpotRef | None:
        refs = [op.outcome.ref for op in self.ops.values()
                if op.kind == "goc" and isinstance(op.outcome, zl.CreateResult)]
        return refs[-1] if refs else None

    async def _run(self, op: Op) -> None:
        op.started_at = trio.current_time()
        if op.kind == "close":  # SpotManager.close takes no timeout: default_timeout
            op.timeout = None
        op.deadline = op.started_at + (op.timeout or DEFAULT_TIMEOUT)
        if op.kind == "relocate" and op.record is not None:
            self.moves_started[op.spot_id, op.record.object_generation] += 1
        try:
            op.outcome = await self._call(op)
        except Exception as exc:  # every outcome is judged, none crashes the nursery
            op.outcome = exc
        op.done, op.ended_at = True, trio.current_time()
        self._judge(op)

    async def _call(self, op: Op) -> object:
        node = self.nodes[op.node]
        call: Any
        if op.kind == "relocate":
            to = None if op.to is None else NODES[op.to]
            return await node.relocate(op.spot_id, to=to, timeout=op.timeout)
        if op.kind == "drain":
            return await node.drain(timeout=op.timeout)
        if op.kind == "close":
            return None if op.ref is None else await node.spots.close(op.ref)
        if op.kind == "goc":
            call = node.spots.get_or_create(USER_ID, "rm-room").request(RSpec(op.n))
        elif op.kind == "request":
            call = node.client.request(op.spot_id, RPut(op.n), reply=RDone)
        elif op.kind == "send":
            call = node.client.send(op.spot_id, RPut(op.n))
        elif op.kind == "arm":
            call = node.client.send(op.spot_id, RArm(op.n))
        else:
            call = node.client.send(op.spot_id, RStop(op.n))
        if op.spot_id in INSTANCE_IDS and op.kind != "goc":
            call = call.instance_spot(TYPES[op.spot_id])
        if op.timeout is not None:
            call = call.timeout(op.timeout)
        return await call

    # ------------------------------------------------------------- judging outcomes

    def _judge(self, op: Op) -> None:
        out, now = op.outcome, trio.current_time()
        where = f"op {op.n} {op.kind}({op.spot_id!r}) from {NODES[op.node]} -> {out!r}"
        expect = self.expect
        # A jump may carry the clock past a deadline: the call must then end before the
        # next jump (each rule settles), i.e. at the first instant past its deadline.
        expect(min(now, self.before_jump) <= op.deadline + 1e-9 or op.kind == "drain",
               f"{where}: ended at t={now}, after its deadline {op.deadline}")
        if isinstance(out, zl.DeadlineExceeded):
            expect(now >= op.deadline, f"{where} at t={now}, before its deadline")
        elif op.kind == "relocate":
            self._judge_relocate(op, out, where)
        elif op.kind == "drain":
            expect(isinstance(out, zl.DrainResult), f"{where}: not a DrainResult")
            if isinstance(out, zl.DrainResult):
                self._count_drained(op, out, where)
        elif op.kind == "goc":
            expect(isinstance(out, zl.CreateResult) and out.state in (
                zl.CreateState.CREATED, zl.CreateState.EXISTING), f"{where}: unexpected")
        elif op.kind == "close":
            ok = out in (True, False, None) or isinstance(out, Unavailable | zl.InvalidOperation)
            expect(ok, f"{where}: unexpected")
        elif isinstance(out, zl.NotFound | zl.StaleRoute):
            # StaleRoute: a route cached before a close or an idle eviction (never a move)
            # still named the old owner -- issue #13's "no stale-route traps" removes it.
            expect(op.spot_id == USER_ID or (isinstance(out, zl.StaleRoute)
                                             and self._was_closed(op.spot_id)),
                   f"{where}: a call with Instance intent never sees this")
        elif _dead_follow(out):
            self._judge_dead_follow(op, where)
        elif op.kind == "request":
            expect(isinstance(out, RDone) and out.op == op.n and self.handled[op.n] == 1,
                   f"{where}: a reply must be the result of handling it exactly once "
                   f"(handled {self.handled[op.n]} times)")
        else:
            expect(out is None and self.handled[op.n] <= 1, f"{where}: unexpected")

    def _count_drained(self, op: Op, out: zl.DrainResult, where: str) -> None:
        for result in out.moved:
            key = (result.ref.spot_id, result.ref.generation)
            self.moves_started[key] += 1
            self.moves_committed[key] += 1
            self.expect(result.outcome is COMMITTED
                        and result.ref.node_rid != self.nodes[op.node].node_rid,
                        f"{where}: {result} listed as moved")
        for result in out.not_moved:
            self.expect(result.outcome in (ABORTED, REFUSED) and bool(result.reason),
                        f"{where}: {result} not moved without a reason")
            if result.outcome is ABORTED:
                self.moves_started[result.ref.spot_id, result.ref.generation] += 1

    def _judge_dead_follow(self, op: Op, where: str) -> None:
        # 06 §6: a route whose target no longer hosts the Spot (it moved, then closed or
        # idled out there) ends with Unavailable, and only the NEXT call resolves afresh.
        self.expect(self._was_closed(op.spot_id) and any(
            committed for (spot_id, _), committed in self.moves_committed.items()
            if spot_id == op.spot_id), f"{where}: the Spot neither moved nor closed")
        again = [earlier.n for earlier in self.ops.values()
                 if earlier.node == op.node and earlier.spot_id == op.spot_id
                 and earlier.n != op.n and earlier.done
                 and _dead_follow(earlier.outcome) and earlier.ended_at < op.started_at]
        self.expect(not again, f"{where}: the call after {again} did not resolve afresh")

    def _was_closed(self, spot_id: str) -> bool:
        return any(closed == spot_id and reason in (R.CLOSED, R.IDLE_EVICTED)
                   for closed, reason, _ in self.closes)

    def _lost_to_a_stale_route(self, op: Op) -> bool:
        # A one-way send on a route cached before the Spot closed (not moved) reaches a
        # node that no longer owns it; that node logs and drops it (the sender returned
        # at admission). A stale-route trap of closes and idle eviction, not of moves:
        # issue #13 ("no stale-route traps").
        dropped = any(f"no longer owns Spot {op.spot_id!r}" in log
                      or (any(m in log for m in DEAD_FOLLOW) and repr(op.spot_id) in log)
                      for log in self.logs)
        return self._was_closed(op.spot_id) and dropped

    def _closed_since(self, op: Op) -> bool:
        return any(spot_id == op.spot_id and at >= op.started_at - 1e-9
                   and reason in (R.CLOSED, R.IDLE_EVICTED)
                   for spot_id, reason, at in self.closes)

    def _judge_relocate(self, op: Op, out: object, where: str) -> None:
        record, expect = op.record, self.expect
        if isinstance(out, zl.NotFound):
            expect(record is None or self._closed_since(op), f"{where}: the Spot existed")
            return
        if isinstance(out, zl.InvalidOperation | Unavailable):
            # not the owner (it moved, or the rule asked a non-owner); Unavailable only
            # past relay-ready, which needs a target that does not commit: not here
            expect(isinstance(out, zl.InvalidOperation), f"{where}: unexpected")
            return
        if not isinstance(out, zl.RelocationResult):
            expect(False, f"{where}: unexpected")
            return
        if out.outcome is COMMITTED:
            assert record is not None
            key = (op.spot_id, record.object_generation)
            self.moves_committed[key] += 1
            expect(out.ref.spot_id == op.spot_id
                   and out.ref.generation == record.object_generation,
                   f"{where}: a move keeps the Spot ID and ObjectGeneration")
            expect(op.to is None or out.ref.node_rid == self.nodes[op.to].node_rid,
                   f"{where}: committed elsewhere than asked")
            expect(out.ref.node_rid != self.nodes[op.node].node_rid,
                   f"{where}: moved to itself")
        else:
            expect(out.outcome in (ABORTED, REFUSED) and bool(out.reason),
                   f"{where}: an aborted or refused move says why")

    # ------------------------------------------------------------- what the Spots report

    def on_factory(self, spot: _Model) -> None:
        key = (spot.ctx.spot_id, spot.ctx.generation)
        self.factories[key] += 1
        self.live.setdefault(spot.ctx.spot_id, []).append(spot)

    def turn_begins(self, spot: _Model, n: int) -> None:
        spot_id, token = spot.ctx.spot_id, (id(spot), n)
        other = self.running.get(spot_id)
        self.expect(other is None, f"{spot_id}: op {n} runs at {spot.node} while op "
                                   f"{other and other[1]} runs")
        self.expect(spot.closed is None, f"{spot_id}: op {n} runs at {spot.node} after "
                                         f"on_close({spot.closed})")
        self.running[spot_id] = token

    def turn_ends(self, spot: _Model) -> None:
        self.running.pop(spot.ctx.spot_id, None)

    def on_handle(self, spot: _Model, n: int) -> None:
        op, key = self.ops[n], (spot.ctx.spot_id, spot.ctx.generation)
        where = f"op {n} ({op.kind}) at {spot.node} of {key}"
        self.handled[n] += 1
        self.expect(self.handled[n] == 1, f"{where}: handled twice")
        failed = op.done and isinstance(op.outcome, Exception) and not isinstance(
            op.outcome, zl.DeadlineExceeded)
        self.expect(not failed, f"{where}: ran although the call failed with {op.outcome!r}")
        history = self.history.setdefault(key, [])
        if op.kind in ("request", "send") and key[0] in PRESERVED:
            self.expect(spot.handled[:-1] == [m for m in history
                                              if self.ops[m].kind in ("request", "send")],
                        f"{where}: the preserved state {spot.handled[:-1]} is not what "
                        f"this generation handled {history}")
        history.append(n)
        if op.sender is not None:
            # An earlier send dropped at a stale owner (09 §4: a stale-route error, no
            # automatic retry; for a one-way send nobody waits for it) never runs, so a
            # later message of the same sender that resolved afresh does not overtake it:
            # the loss is what final_check judges, by the same rule.
            overtaken = [m for m, earlier in self.ops.items()
                         if m < n and earlier.sender == op.sender
                         and earlier.spot_id == op.spot_id and earlier.done
                         and earlier.outcome is None and earlier.kind in ("send", "arm", "stop")
                         and not self.handled[m] and not self._closed_since(earlier)
                         and not self._lost_to_a_stale_route(earlier)]
            self.expect(not overtaken, f"{where}: overtook the same sender's admitted "
                                       f"{overtaken}")

    def on_tick(self, spot: _Model) -> None:
        self.expect(spot.closed is None and self._serving(spot),
                    f"{spot.ctx.spot_id}: a tick at {spot.node}, which no longer serves it")
        self.ticks.append((spot.ctx.spot_id, spot.ctx.generation, spot.node,
                           trio.current_time()))

    def _serving(self, spot: _Model) -> bool:
        host = self.nodes[NODES.index(spot.node)]._rt.catalog.hosts.get(spot.ctx.spot_id)
        return host is not None and host.generation == spot.ctx.generation and \
            host.state == "serving"

    def on_close(self, spot: _Model, reason: R) -> None:
        spot_id, now = spot.ctx.spot_id, trio.current_time()
        where = f"on_close({reason.name}) of {spot_id}@{spot.ctx.generation} at {spot.node}"
        self.expect(spot.closed is None, f"{where}: after on_close({spot.closed})")
        moving = any(op.kind in ("relocate", "drain") and not op.done
                     for op in self.ops.values()
                     if op.spot_id == spot_id or op.kind == "drain")
        if reason is R.RELOCATED:
            self.expect(moving, f"{where}: no move of it was running")
        elif reason is R.CLOSED:
            asked = any(op.spot_id == spot_id and op.kind in ("stop", "close")
                        for op in self.ops.values())
            self.expect(asked, f"{where}: nobody closed it")
        elif reason is R.IDLE_EVICTED:
            self.expect(spot_id in INSTANCE_IDS, f"{where}: only Instance Spots idle out")
        else:
            self.expect(reason is R.NODE_SHUTDOWN and self.stop.is_set(),
                        f"{where}: unexpected")
        spot.closed = reason
        self.closes.append((spot_id, reason, now))
        alive = self.live.get(spot_id, [])
        if spot in alive:
            alive.remove(spot)

    # ------------------------------------------------------------- invariants

    async def check(self) -> None:
        """The invariants on a settled snapshot (runs in the Trio thread)."""
        assert self.crash is None, f"a node crashed: {self.crash!r}"
        assert not self.violations, "\n".join(self.violations)
        self.recorder.check()
        check_durable_state(self.recorder, lambda spot_id: spot_id == USER_ID)
        check_reminders_apart(self.recorder, self.reminder_writes)
        for spot_id in IDS:
            serving = [self.node_names[str(node.node_rid)] for node in self.nodes
                       if (host := node._rt.catalog.hosts.get(spot_id)) is not None
                       and host.state == "serving"]
            assert len(serving) <= 1, f"{spot_id} is served by {serving}"
            with self.setup.in_flight.io("the model's own store read"):
                record = await self.view.location.find(spot_id)
            if record is None:
                continue
            key = (spot_id, record.object_generation)
            moved = record.owner_generation - 1
            in_flight = sum(1 for op in self.ops.values() if op.kind in ("relocate", "drain")
                            and not op.done)
            committed = self.moves_committed[key]
            assert committed <= moved <= committed + in_flight, (
                f"{spot_id}: owner generation {record.owner_generation} after {committed} "
                f"committed moves of generation {record.object_generation} "
                f"({in_flight} moves running)")
        if not any(op.kind == "drain" and not op.done for op in self.ops.values()):
            for key, runs in self.factories.items():  # a drain's moves count when it ends
                assert runs <= 1 + self.moves_started[key], (
                    f"factory of {key} ran {runs} times for {self.moves_started[key]} moves")
        now = trio.current_time()
        late = [op for op in self.ops.values()
                if not op.done and now > op.deadline and op.kind != "drain"]
        assert not late, f"operations outlived their deadline at t={now}: {late}"

    def final_check(self) -> None:
        """After the nodes shut down: every admitted message ran once; nothing leaked."""
        assert self.crash is None, f"a node crashed: {self.crash!r}"
        assert not self.violations, "\n".join(self.violations)
        for op in self.ops.values():
            if op.kind in ("send", "arm", "stop") and op.outcome is None:
                assert self.handled[op.n] == 1 or self._closed_since(op) or \
                    self._lost_to_a_stale_route(op), f"admitted send never ran: {op}"
        assert not self.leftovers, f"authority left behind: {self.leftovers}"
        stats = self.leftover_roots
        assert stats is not None
        assert stats.roots == 0, stats
        assert stats.inboxes == 0, stats


# ---------------------------------------------------------------------------- the machine


class RelocationModel(TrioMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None

    def _act(self, action: Any, *args: Any, **kwargs: Any) -> None:
        assert self.world is not None
        self.trio(self.world.act, lambda: action(*args, **kwargs))

    @initialize(closed=st.sets(st.sampled_from(IDS)),
                starters=st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)))
    def open_nodes(self, closed: set[str], starters: tuple[int, int, int]) -> None:
        """Three nodes, and each Spot activated by a request from one of them."""
        global WORLD
        self.world = WORLD = World(self.harness, set())
        self.world.recorder.install()
        self.trio(self.harness.nursery.start, self.world.hold)
        assert self.world.crash is None, self.world.crash
        for spot_id, node in zip(INSTANCE_IDS, starters, strict=False):
            self._act(self.world.spawn, "request", spot_id, node, None)
        self._act(self.world.spawn, "goc", USER_ID, starters[2], None)
        for spot_id in closed:
            self.world.gates[spot_id].act("close")

    def teardown(self) -> None:
        world = self.world
        if world is None:
            return
        try:
            if not self.failed:
                self.trio(world.wind_down)
            self.trio(world.shut_down)
            if not self.failed:
                world.final_check()  # plain data: the nodes are closed
        finally:
            world.recorder.uninstall()

    @rule(kind=st.sampled_from(["request", "send", "request", "send", "stop", "arm"]),
          spot_id=st.sampled_from(IDS), node=st.integers(0, 2), ordered=st.booleans(),
          timeout=TIMEOUTS)
    def call(self, kind: str, spot_id: str, node: int, ordered: bool,
             timeout: float | None) -> None:
        if kind == "stop" and spot_id == USER_ID:
            kind = "send"
        self._act(self.world.spawn, kind, spot_id, node, timeout,  # type: ignore[union-attr]
                  ordered=ordered)

    @rule(spot_id=st.sampled_from(IDS), node=st.integers(0, 2),
          to=st.one_of(st.none(), st.integers(0, 2)), timeout=TIMEOUTS)
    def relocate(self, spot_id: str, node: int, to: int | None,
                 timeout: float | None) -> None:
        self._act(self.world.spawn, "relocate", spot_id, node, timeout,  # type: ignore[union-attr]
                  to=to)

    @rule(node=st.integers(0, 2))
    def drain(self, node: int) -> None:
        assert self.world is not None
        drained = {op.node for op in self.world.ops.values() if op.kind == "drain"}
        if node in drained or len(drained) >= len(NODES) - 1:
            return  # one node always takes new Spots (else every first call is NotFound)
        self._act(self.world.spawn, "drain", "", node, 3.0)

    @rule(kind=st.sampled_from(["goc", "goc", "close"]), node=st.integers(0, 2),
          timeout=TIMEOUTS)
    def user_spot(self, kind: str, node: int, timeout: float | None) -> None:
        """``get_or_create`` (twice as often) or ``close`` of the User Spot."""
        self._act(self.world.spawn, kind, USER_ID, node, timeout)  # type: ignore[union-attr]

    @rule(spot_id=st.sampled_from(IDS), action=st.sampled_from(["open", "close", "pass_one"]))
    def gate(self, spot_id: str, action: str) -> None:
        self._act(self.world.gates[spot_id].act, action)  # type: ignore[union-attr]

    @rule(data=st.data())
    def zombie_write(self, data: st.DataObject) -> None:
        """A save through the ``ctx.state`` of a ``Fresh`` incarnation that ended (moved,
        evicted, closed): the store must refuse it."""
        assert self.world is not None
        durables = ended_durables(self.world.recorder)
        if durables:
            durable = data.draw(st.sampled_from(durables))
            self._act(self._zombie_write, durable)

    async def _zombie_write(self, durable: Any) -> None:
        assert self.world is not None
        problem = await write_as_zombie(durable)
        if problem is not None:
            self.world.violations.append(problem)

    @rule(pick=st.integers(0, 63), after=st.sampled_from([0.0, 0.5, 2.0]),
          zombie=st.booleans())
    def remind(self, pick: int, after: float, zombie: bool) -> None:
        """``ctx.remind`` through the ``Fresh`` incarnation a node serves now, racing its
        moves, evictions and closes; or, with ``zombie``, through one that ended: the
        store must refuse that one. Every reminder acknowledged reaches the Spot."""
        world = self.world
        assert world is not None
        for node in world.nodes:
            ctx = node.inspection.spot_context("f0")
            if ctx is not None and all(ctx is not known for known in world.reminder_contexts):
                world.reminder_contexts.append(ctx)
        choices = [n for n, ctx in enumerate(world.reminder_contexts)
                   if ctx.ended == zombie and (zombie or any(
                       node.inspection.spot_context("f0") is ctx for node in world.nodes))]
        if not choices:
            return
        # (The pick is drawn whatever the state: a replay draws the same data.)
        ctx = world.reminder_contexts[choices[pick % len(choices)]]
        write = ReminderWrite(len(world.reminder_writes) + 1, "set", ctx.spot_id, "",
                              ctx.generation, f"k{len(world.reminder_writes) + 1}",
                              zombie=zombie)
        world.reminder_writes.append(write)
        self._act(self._remind, write, ctx, after)

    async def _remind(self, write: ReminderWrite, ctx: zl.SpotContext, after: float) -> None:
        write.started_at = trio.current_time()
        try:
            write.outcome = await ctx.remind(write.name, after=after)
        except zl.ZLinkError as exc:
            write.outcome = exc
        write.done, write.ended_at = True, trio.current_time()

    @rule(dt=st.sampled_from([0.3, 0.8, 2.5]))
    def advance(self, dt: float) -> None:
        assert self.world is not None
        self.world.before_jump = self.harness.clock.current_time()
        self._act(self.harness.clock.jump, dt)

    @invariant()
    def spec_invariants(self) -> None:
        if self.world is not None:
            self.trio(self.world.check)


#: Examples per backend; the CI profile is derandomized, locally each run explores anew.
EXAMPLES: Final = {"memory": 100, "sqlite": 40, "redis": 40, "postgresql": 30}


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis", "postgresql"])
def test_relocations_racing_with_calls_timers_close_and_idle_keep_the_invariants(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model_settings = settings(max_examples=EXAMPLES[backend], stateful_step_count=30,
                              deadline=None, suppress_health_check=list(HealthCheck))

    setup = Setup(backend, tmp_path, InFlight())

    async def prepare(harness: RaceHarness) -> None:
        await patch_backend(backend, setup.in_flight, tmp_path, monkeypatch)

    run_race_model(RelocationModel, settings=model_settings, prepare=prepare,
                   data={"setup": setup})


class AbortedMoveReplay(TrioMachine):
    """One fixed program of :class:`RelocationModel`'s rules, checked by its invariants:
    a move sealed behind a running turn takes two messages of one ordered sender into
    its hold, then aborts before relay-ready (its deadline passes while it waits for the
    turn); once the turn ends, the two must run in the order they were sent (06 §6.1:
    "the held ingress returns to the source queue in arrival order")."""

    def __init__(self) -> None:
        super().__init__()
        self.model = RelocationModel()
        self.replayed = False

    @rule()
    def replay(self) -> None:
        if self.replayed:
            return
        self.replayed = True
        model = self.model
        steps: list[tuple[Any, tuple[Any, ...]]] = [
            (model.open_nodes, (set(), (0, 0, 0))),
            (model.gate, ("k0", "close")),
            (model.call, ("request", "k0", 0, False, None)),  # the turn running at the seal
            (model.relocate, ("k0", 0, None, 0.5)),  # from its owner, wherever it is
            (model.call, ("send", "k0", 0, True, None)),  # held, in this order
            (model.call, ("send", "k0", 0, True, None)),
            (model.advance, (0.8,)),  # the move's deadline: it aborts before relay-ready
            (model.gate, ("k0", "open")),
        ]
        for step, args in steps:
            step(*args)
            model.spec_invariants()
        world = model.world
        assert world is not None
        relocation = next(op for op in world.ops.values() if op.kind == "relocate")
        assert isinstance(relocation.outcome, zl.RelocationResult)
        assert relocation.outcome.outcome is ABORTED, relocation.outcome
        sends = [op.n for op in world.ops.values() if op.kind == "send"]
        assert [world.handled[n] for n in sends] == [1, 1]  # both ran, once

    def teardown(self) -> None:
        self.model.teardown()


def test_held_messages_of_an_aborted_move_keep_their_order_in_the_model(
        tmp_path: Path) -> None:
    """:class:`AbortedMoveReplay` on ``memory://``: the race model's sender-order
    invariant sees the hold of an aborted move return to the queue in arrival order."""
    setup = Setup("memory", tmp_path, InFlight())
    run_race_model(AbortedMoveReplay, settings=settings(
        max_examples=1, stateful_step_count=1, deadline=None, database=None,
        phases=[Phase.generate], suppress_health_check=list(HealthCheck)),
        data={"setup": setup})
