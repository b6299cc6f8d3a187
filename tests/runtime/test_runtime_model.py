"""A stateful model of one node: concurrent lifecycles on a few IDs, adversarially scheduled.

Theory of operation
-------------------
:class:`RuntimeModel` is a hypothesis state machine (the test kit's ``TrioMachine``,
run by ``zlink_trio.testing.run_race_model``) driving ONE node on a
``memory://`` store (our own :class:`MemoryStore`, so its records can be read) with
concurrent ``get_or_create`` / ``create`` / ``find`` / ``close``, requests and sends with
and without Instance intent (cold activation), self-close and idle eviction on one User
and two Instance IDs (plus the fresh IDs ``create()`` issues).  Scheduling is an
explicit, deterministic control (hypothesis#1300; no hypothesis-trio, hypothesis#1709):

* ``trio.run`` on a ``MockClock`` with ``rate=0`` and no autojump: time moves only when
  the ``advance`` rule jumps it.  The machine runs in a worker thread; every rule
  reaches into Trio with ``TrioMachine.trio`` (``trio.from_thread``).
* Rules only START operations, as tasks in a nursery inside the node's ``async with``;
  an operation runs until it blocks.  Every rule ends with ``wait_all_tasks_blocked``,
  so the system is quiescent (and the invariants read a consistent snapshot) between
  rules.  Trio's own batch shuffling is seeded by hypothesis (trio registers its
  scheduler's random with hypothesis), so a failure replays and shrinks.
* Interleavings come from gates: ``on_activate`` and the ``MAdd`` handler of every Spot
  wait for the gate of their ID (one shared gate for ``create()``'s fresh IDs), which
  the ``gate`` rule opens, closes, or lets exactly one waiter through (``pass_one``,
  FIFO: e.g. an activation passes while its first message then blocks, so a Spot can
  sit sealed with work queued); ``initialize`` picks which gates start closed.
  ``set_reject`` chooses whether ``on_create`` for an ID rejects from now on.  Every
  call gets a deadline hypothesis picks (or the node's ``default_timeout``).
* Each example gets a fresh store and node (``initialize``), shut down in ``teardown``.

Invariants, checked after every rule (and some when each operation completes):

* the factory runs at most once per (ID, generation), and generations strictly increase
  per ID over the whole run (factory order and every store snapshot);
* at most one authority per ID: no two constructed, not yet closed instances of one ID;
  such an instance always holds the store record of its generation; a Ready record has
  a serving local host of that generation, and every local host has its record;
* every terminal result is one the spec allows for that operation: CREATED / EXISTING /
  REJECTED only from the manager, naming an attempt of THIS operation (CREATED,
  REJECTED -- checked through the reply ``on_create`` built from the request) or a Ready
  incarnation of another one (EXISTING); REJECTED only when that attempt's
  ``on_create`` rejected; NotFound and StaleRoute only without Instance intent (and
  StaleRoute only when a close of that ID overlapped the call); InvalidOperation from
  ``close`` only for a stale or non-User ref; DeadlineExceeded only at or after the
  operation's deadline; no other exception type, ever;
* no operation outlives its deadline (every wait is bounded);
* a message is handled at most once; a reply means it was handled exactly once (and the
  reply is that handling's result); a call that failed before admission is never run;
  the first message an Instance incarnation handles came with Instance intent; a queued
  request never starts at or after its deadline (except that first record); nothing is
  admitted to an incarnation whose store record was already Closing when the call began;
* close reasons fit: CLOSED for an Instance Spot only after it handled a stop;
  IDLE_EVICTED only for Instance Spots, after the idle timeout without work;
  ACTIVATION_FAILED only for a rejected or unfinished activation; NODE_SHUTDOWN only at
  teardown; ``on_close`` runs once per instance, while the store still holds its
  generation (before the release); ``close()`` returns True only after
  ``on_close(CLOSED)`` ran and False only for an incarnation that is gone;
* every chart transition taken (the kit's ``Recorder``) is one ``statecharts.compile``
  defines, and no runtime task crashes the node;
* at teardown: every admitted plain send ran exactly once, and the store holds no
  authority record, root or inbox.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter as Tally
from typing import Any, Final

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    initialize,
    invariant,
    multiple,
    rule,
)

import zlink_trio as zl
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import MemoryStore
from zlink_trio.testing import Gate, RaceHarness, Recorder, TrioMachine, run_race_model

USER_IDS: Final = ("u0",)
INSTANCE_IDS: Final = ("i0", "i1")
ALL_IDS: Final = USER_IDS + INSTANCE_IDS
#: Gate / reject key of the fresh uuid4 IDs ``create()`` issues.
NEW: Final = "new"
GATE_KEYS: Final = (*ALL_IDS, NEW)
REJECT_KEYS: Final = (*USER_IDS, NEW)

IDLE_TIMEOUT: Final = 1.0
SWEEP_INTERVAL: Final = 0.25
DEFAULT_TIMEOUT: Final = 4.0
TIMEOUTS: Final = st.sampled_from([None, 0.3, 1.0, 3.0])
UUID4: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
CLOSED, IDLE, FAILED, SHUTDOWN = (zl.CloseReason.CLOSED, zl.CloseReason.IDLE_EVICTED,
                                  zl.CloseReason.ACTIVATION_FAILED, zl.CloseReason.NODE_SHUTDOWN)


@attrs.frozen
class MAdd:
    n: int


@attrs.frozen
class MTotal:
    value: int


@attrs.frozen
class MStop:
    n: int


@attrs.frozen
class MSpec:
    n: int


@attrs.frozen
class MWelcome:
    n: int
    accepted: bool


# ---------------------------------------------------------------------------- the Spots


class _Model:
    """Shared behaviour: report everything to the running example's :class:`World`."""

    ctx: zl.SpotContext
    key: str
    total: int

    def _born(self, ctx: zl.SpotContext, kind: str, op: int | None) -> None:
        self.ctx = ctx
        self.key = ctx.spot_id if ctx.spot_id in ALL_IDS else NEW
        self.total = 0
        _world().on_factory(ctx.spot_id, ctx.generation, kind, op)

    async def on_activate(self) -> None:
        world = _world()
        await world.gates[self.key].wait()
        world.incarnation(self.ctx).activated_at = trio.current_time()

    @zl.handler
    async def add(self, msg: MAdd) -> MTotal:
        world = _world()
        world.on_start(self.ctx, msg.n)
        await world.gates[self.key].wait()
        self.total += msg.n
        world.on_handle(self.ctx, msg.n, self.total)
        return MTotal(self.total)

    async def on_close(self, reason: zl.CloseReason) -> None:
        _world().on_close(self.ctx, reason)


@zl.instance_spot("mcounter", relocation=zl.RecreateOnRelocation())
class MCounter(_Model):
    def __init__(self, ctx: zl.SpotContext) -> None:
        self._born(ctx, "instance", None)

    @zl.handler
    async def stop(self, msg: MStop) -> None:
        _world().on_start(self.ctx, msg.n)
        _world().on_handle(self.ctx, msg.n, None, stop=True)
        self.ctx.close()


@zl.user_spot("mroom", relocation=zl.DisableRelocation())
class MRoom(_Model):
    def __init__(self, ctx: zl.SpotContext, request: MSpec | None) -> None:
        self._born(ctx, "user", None if request is None else request.n)

    async def on_create(self, request: MSpec | None) -> MWelcome | zl.Reject:
        assert request is not None
        world = _world()
        accept = not world.reject[self.key]
        world.incarnation(self.ctx).accepted = accept
        return MWelcome(request.n, True) if accept else zl.Reject(MWelcome(request.n, False))


# ---------------------------------------------------------------------------- the world


@attrs.define(eq=False)
class Incarnation:
    """What one (ID, generation) did, as its instance reported it."""

    spot_id: str
    generation: int
    kind: str
    op: int | None
    activated_at: float | None = None
    accepted: bool | None = None
    started: list[int] = attrs.Factory(list)
    handled: list[int] = attrs.Factory(list)
    last_work: float | None = None
    stopped: bool = False
    closed: zl.CloseReason | None = None
    closed_step: int = -1


@attrs.define(eq=False)
class Op:
    """One operation the machine started, and how it ended."""

    n: int
    kind: str  # goc | create | find | close | request | send | stop
    spot_id: str
    intent: bool
    timeout: float | None
    step: int
    ref: zl.SpotRef | None = None
    #: The generation whose store record was Closing when the call started (it is sealed).
    sealed: int | None = None
    deadline: float = math.inf
    done: bool = False
    outcome: object = None


WORLD: World | None = None


def _at(ctx: zl.SpotContext) -> str:
    return f"{ctx.spot_id}@{ctx.generation}"


def _generation(record: Any) -> int | None:
    return None if record is None else record.object_generation


def _world() -> World:
    assert WORLD is not None, "a model Spot ran outside an example"
    return WORLD


class World:
    """One example: a fresh store and node, the operations and what the Spots reported."""

    def __init__(self, harness: RaceHarness, closed_gates: set[str]) -> None:
        self.harness = harness
        self.store = MemoryStore()
        self.node: zl.Node | None = None
        self.ops_nursery: trio.Nursery | None = None
        self.stop = trio.Event()
        self.stopped = trio.Event()
        self.crash: BaseException | None = None
        self.gates = {key: Gate(key not in closed_gates) for key in GATE_KEYS}
        self.reject = dict.fromkeys(REJECT_KEYS, False)
        self.step = 0
        self.ops: dict[int, Op] = {}
        self.incarnations: dict[tuple[str, int], Incarnation] = {}
        self.live: dict[str, set[int]] = {}
        self.last_generation: dict[str, int] = {}
        self.handled: Tally[int] = Tally()
        self.totals: dict[int, int] = {}
        self.violations: list[str] = []
        self.new_refs: list[zl.SpotRef] = []
        #: Chart transitions checked against the charts, the runtime's warnings.
        self.recorder = Recorder()
        self.logs = self.recorder.logs

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.violations.append(what)

    # ------------------------------------------------------------- node lifetime

    async def hold(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                   ) -> None:
        """Open the node and the operations' nursery; keep them until :attr:`stop`."""
        try:
            async with zl.open_node(
                    "model", store=self.store, spots=[MCounter, MRoom],
                    instance_idle_timeout=IDLE_TIMEOUT, idle_sweep_interval=SWEEP_INTERVAL,
                    default_timeout=DEFAULT_TIMEOUT,
                    injected=zl.InjectedOptions(random=random.Random(0))) as node:
                self.node = node
                async with trio.open_nursery() as ops:
                    self.ops_nursery = ops
                    task_status.started()
                    await self.stop.wait()
                    ops.cancel_scope.cancel()
        except Exception as exc:  # a crashed node is reported by the invariants
            self.crash = exc
        finally:
            self.stopped.set()

    async def shut_down(self) -> None:
        """Open every gate, cancel the operations still running, close the node."""
        for gate in self.gates.values():
            gate.act("open")
        self.stop.set()
        for _ in range(50):
            await trio.testing.wait_all_tasks_blocked()
            if self.stopped.is_set():
                return
            self.harness.clock.jump(1.0)
        raise AssertionError("the node did not shut down within 50 s of (mock) time")

    # ------------------------------------------------------------- operations

    async def act(self, action: Any, *args: Any) -> list[zl.SpotRef]:
        """One rule: do ``action``, wait until every task blocks, hand over new refs."""
        self.step += 1
        action(*args)
        await trio.testing.wait_all_tasks_blocked()
        refs, self.new_refs = self.new_refs, []
        return refs

    def spawn(self, kind: str, spot_id: str, intent: bool, timeout: float | None,
              ref: zl.SpotRef | None = None) -> None:
        op = Op(len(self.ops) + 1, kind, spot_id, intent, timeout, self.step, ref)
        record = self.store.location.state.records.get(spot_id)
        if record is not None and record.state is AuthorityState.CLOSING:
            op.sealed = record.object_generation
        self.ops[op.n] = op
        assert self.ops_nursery is not None
        self.ops_nursery.start_soon(self._run, op)

    def advance(self, dt: float) -> None:
        self.harness.clock.jump(dt)

    async def _run(self, op: Op) -> None:
        op.deadline = trio.current_time() + (op.timeout or DEFAULT_TIMEOUT)
        try:
            op.outcome = await self._call(op)
        except Exception as exc:  # every outcome is judged, none crashes the nursery
            op.outcome = exc
        op.done = True
        self._judge(op)

    async def _call(self, op: Op) -> object:
        assert self.node is not None
        spots, client = self.node.spots, self.node.client
        call: Any
        if op.kind == "find":
            return await spots.find(op.spot_id)
        if op.kind == "close":
            assert op.ref is not None
            return await spots.close(op.ref)
        if op.kind == "goc":
            call = spots.get_or_create(op.spot_id, "mroom").request(MSpec(op.n))
        elif op.kind == "create":
            call = spots.create("mroom").request(MSpec(op.n))
        elif op.kind == "request":
            call = client.request(op.spot_id, MAdd(op.n), reply=MTotal)
        elif op.kind == "send":
            call = client.send(op.spot_id, MAdd(op.n))
        else:
            call = client.send(op.spot_id, MStop(op.n))
        if op.intent:
            call = call.instance_spot()
        if op.timeout is not None:
            call = call.timeout(op.timeout)
        return await call

    # ------------------------------------------------------------- judging outcomes

    def _judge(self, op: Op) -> None:
        out, now = op.outcome, trio.current_time()
        where = f"op {op.n} {op.kind}({op.spot_id!r}, intent={op.intent}) -> {out!r}"
        expect = self.expect
        if isinstance(out, zl.DeadlineExceeded):
            expect(op.kind != "find" and now >= op.deadline,
                   f"{where} at t={now}, before its deadline {op.deadline}")
        elif op.kind in ("goc", "create"):
            expect(isinstance(out, zl.CreateResult), f"{where}: not a CreateResult")
            if isinstance(out, zl.CreateResult):
                self._judge_create(op, out, where)
        elif op.kind == "find":
            ok = out is None or (isinstance(out, zl.SpotRef) and self._ready(out))
            expect(ok, f"{where}: not None nor the ref of a Ready incarnation")
            if isinstance(out, zl.SpotRef) and out.spot_id in USER_IDS:
                self.new_refs.append(out)
        elif op.kind == "close":
            self._judge_close(op, out, where)
        elif isinstance(out, zl.NotFound | zl.StaleRoute):
            expect(not op.intent, f"{where}: a call with Instance intent never sees this")
        elif op.kind == "request":
            expect(isinstance(out, MTotal) and self.handled[op.n] == 1
                   and self.totals[op.n] == out.value,
                   f"{where}: a reply must be the result of handling it exactly once "
                   f"(handled {self.handled[op.n]} times)")
        else:
            expect(out is None and self.handled[op.n] <= 1, f"{where}: unexpected")

    def _ready(self, ref: zl.SpotRef) -> bool:
        inc = self.incarnations.get((ref.spot_id, ref.generation))
        return inc is not None and inc.activated_at is not None and inc.accepted is not False

    def _judge_create(self, op: Op, out: zl.CreateResult, where: str) -> None:
        ref, expect = out.ref, self.expect
        inc = self.incarnations.get((ref.spot_id, ref.generation))
        if op.kind == "create":
            expect(bool(UUID4.fullmatch(ref.spot_id)) and out.state is not zl.CreateState.EXISTING,
                   f"{where}: create() issues a fresh uuid4 and never finds one EXISTING")
        else:
            expect(ref.spot_id == op.spot_id, f"{where}: the ref names another ID")
        if out.state is zl.CreateState.EXISTING:
            expect(self._ready(ref) and inc is not None and inc.op != op.n and out.reply is None,
                   f"{where}: EXISTING must name another operation's Ready incarnation")
        else:
            accepted = out.state is zl.CreateState.CREATED
            expect(inc is not None and inc.op == op.n and inc.accepted is accepted
                   and out.reply == MWelcome(op.n, accepted),
                   f"{where}: must be this operation's own attempt and on_create's verdict "
                   f"(attempt {inc})")
        self.new_refs.append(ref)

    def _judge_close(self, op: Op, out: object, where: str) -> None:
        assert op.ref is not None
        inc = self.incarnations.get((op.ref.spot_id, op.ref.generation))
        if out is True:
            self.expect(inc is not None and inc.kind == "user" and inc.closed is CLOSED,
                        f"{where}: True before on_close(CLOSED) of that incarnation ran")
        elif out is False:
            self.expect(inc is None or inc.closed is not None,
                        f"{where}: False while that incarnation is still live")
        elif isinstance(out, zl.InvalidOperation):
            stale = self.last_generation.get(op.ref.spot_id, 0) > op.ref.generation
            self.expect((stale or op.ref.spot_id in INSTANCE_IDS)
                        and "internal" not in out.message,
                        f"{where}: only a stale or non-User ref is refused")
        else:
            self.expect(False, f"{where}: unexpected")

    # ------------------------------------------------------------- what the Spots report

    def incarnation(self, ctx: zl.SpotContext) -> Incarnation:
        return self.incarnations[ctx.spot_id, ctx.generation]

    def on_factory(self, spot_id: str, generation: int, kind: str, op: int | None) -> None:
        key = (spot_id, generation)
        self.expect(key not in self.incarnations, f"factory ran twice for {key}")
        last = self.last_generation.get(spot_id, 0)
        self.expect(generation > last, f"{spot_id}: generation {generation} after {last}")
        self.last_generation[spot_id] = max(last, generation)
        self.incarnations[key] = Incarnation(spot_id, generation, kind, op)
        self.live.setdefault(spot_id, set()).add(generation)

    def on_start(self, ctx: zl.SpotContext, n: int) -> None:
        inc, op = self.incarnation(ctx), self.ops[n]
        where = f"message of op {n} ({op.kind}, intent={op.intent}) in {_at(ctx)}"
        first = inc.kind == "instance" and not inc.started
        self.expect(op.kind != "request" or first or trio.current_time() < op.deadline,
                    f"{where}: a queued request ran after its deadline")
        self.expect(op.sealed != ctx.generation,
                    f"{where}: admitted although that incarnation was already closing")
        inc.started.append(n)

    def on_handle(self, ctx: zl.SpotContext, n: int, total: int | None, *,
                  stop: bool = False) -> None:
        inc, op = self.incarnation(ctx), self.ops[n]
        where = f"message of op {n} ({op.kind}, intent={op.intent}) in {_at(ctx)}"
        self.expect(inc.activated_at is not None and inc.closed is None,
                    f"{where}: handled by an incarnation that is not serving")
        if inc.kind == "instance" and not inc.handled:
            self.expect(op.intent, f"{where}: the first message of a cold activation "
                                   "must be the one that activated it")
        failed = op.done and isinstance(op.outcome, Exception) and not isinstance(
            op.outcome, zl.DeadlineExceeded)
        self.expect(not failed, f"{where}: ran although the call failed with {op.outcome!r}")
        self.handled[n] += 1
        self.expect(self.handled[n] == 1, f"{where}: handled twice")
        if total is not None:
            self.totals[n] = total
        inc.handled.append(n)
        inc.stopped = inc.stopped or stop
        inc.last_work = trio.current_time()

    def on_close(self, ctx: zl.SpotContext, reason: zl.CloseReason) -> None:
        inc, now = self.incarnation(ctx), trio.current_time()
        where = f"on_close({reason.name}) of {_at(ctx)} ({inc.kind})"
        self.expect(inc.closed is None, f"{where}: after on_close({inc.closed})")
        record = self.store.location.state.records.get(ctx.spot_id)
        self.expect(record is not None and record.object_generation == ctx.generation,
                    f"{where}: ran after the authority was released ({record})")
        if reason is CLOSED:
            self.expect(inc.kind == "user" or inc.stopped, f"{where}: nobody closed it")
        elif reason is IDLE:
            last = max(inc.activated_at or now, inc.last_work or -math.inf)
            self.expect(inc.kind == "instance" and now - last >= IDLE_TIMEOUT,
                        f"{where}: idle only {now - last} s")
        elif reason is FAILED:
            self.expect(inc.activated_at is None or inc.accepted is False,
                        f"{where}: the activation had succeeded")
        else:
            self.expect(self.stop.is_set(), f"{where}: the node is not shutting down")
        inc.closed, inc.closed_step = reason, self.step
        self.live[ctx.spot_id].discard(ctx.generation)

    # ------------------------------------------------------------- invariants

    def check(self) -> None:
        """The invariants on a quiescent snapshot (runs in the Trio thread)."""
        assert self.crash is None, f"the node crashed: {self.crash!r}"
        assert not self.violations, "\n".join(self.violations)
        self.recorder.check()
        assert self.node is not None
        records = {r.spot_id: r for r in self.store.location.state.records.values()
                   if r.kind is not zl.SpotKind.ENTRY}
        hosts = self.node._rt.catalog.hosts  # the node's local view; no public accessor
        for spot_id, record in records.items():
            generation = record.object_generation
            assert generation >= self.last_generation.get(spot_id, 0), (record, "went back")
            self.last_generation[spot_id] = generation
            host = hosts.get(spot_id)
            if record.state is AuthorityState.READY:
                assert host is not None, record
                assert host.generation == generation, (record, host.generation)
                assert host.state == "serving", (record, host.state)
            elif record.state is AuthorityState.CREATING:
                assert host is None, (record, host)
        for spot_id, host in hosts.items():
            record = records.get(spot_id)
            assert _generation(record) == host.generation, (
                f"local host {spot_id}@{host.generation} has store record {record}")
        for spot_id, generations in self.live.items():
            assert len(generations) <= 1, f"{spot_id}: live incarnations {generations}"
            for generation in generations:
                record = records.get(spot_id)
                assert _generation(record) == generation, (
                    f"{spot_id}@{generation} is live, the store has {record}")
        now = trio.current_time()
        late = [op for op in self.ops.values() if not op.done and now >= op.deadline]
        assert not late, f"operations outlived their deadline at t={now}: {late}"

    def final_check(self) -> None:
        """After the node shut down: every accepted message ran; nothing leaked."""
        assert self.crash is None, f"the node crashed: {self.crash!r}"
        assert not self.violations, "\n".join(self.violations)
        for inc in self.incarnations.values():
            assert inc.closed is not None, f"on_close never ran for {inc}"
        for op in self.ops.values():
            if not op.done:
                continue  # cancelled by the teardown
            if op.kind in ("send", "stop") and op.outcome is None and not op.intent:
                assert self.handled[op.n] == 1, f"admitted send never ran: {op}"
            if op.kind in ("send", "stop") and op.outcome is None and op.intent:
                lost = any(op.spot_id in log and "one-way send" in log for log in self.logs)
                assert self.handled[op.n] == 1 or lost, f"admitted send silently lost: {op}"
            if isinstance(op.outcome, zl.StaleRoute):
                assert any(inc.spot_id == op.spot_id and inc.closed in (CLOSED, IDLE)
                           and inc.closed_step >= op.step
                           for inc in self.incarnations.values()), (
                    f"StaleRoute without a close of that Spot: {op}")
        location = self.store.location.state
        assert not location.records, f"authority left behind: {location.records}"
        relocation = self.store.relocation.state
        assert not relocation.roots, relocation
        assert not relocation.inboxes, relocation


# ---------------------------------------------------------------------------- the machine


class RuntimeModel(TrioMachine):
    refs = Bundle("refs")

    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None

    def _act(self, action: Any, *args: Any) -> Any:
        assert self.world is not None
        return multiple(*self.trio(self.world.act, action, *args))

    @initialize(closed=st.sets(st.sampled_from(GATE_KEYS)))
    def open_node(self, closed: set[str]) -> None:
        global WORLD
        self.world = WORLD = World(self.harness, closed)
        self.world.recorder.install()
        self.trio(self.harness.nursery.start, self.world.hold)

    def teardown(self) -> None:
        world = self.world
        if world is None:
            return
        try:
            self.trio(world.shut_down)
            if not self.failed:
                self.trio_sync(world.final_check)
        finally:
            world.recorder.uninstall()

    @rule(target=refs, spot_id=st.sampled_from(USER_IDS), timeout=TIMEOUTS)
    def get_or_create(self, spot_id: str, timeout: float | None) -> Any:
        return self._act(self.world.spawn, "goc", spot_id, False, timeout)  # type: ignore[union-attr]

    @rule(target=refs, timeout=TIMEOUTS)
    def create(self, timeout: float | None) -> Any:
        return self._act(self.world.spawn, "create", "", False, timeout)  # type: ignore[union-attr]

    @rule(target=refs, spot_id=st.sampled_from(ALL_IDS))
    def find(self, spot_id: str) -> Any:
        return self._act(self.world.spawn, "find", spot_id, False, None)  # type: ignore[union-attr]

    @rule(target=refs, ref=refs)
    def close(self, ref: zl.SpotRef) -> Any:
        return self._act(self.world.spawn, "close", ref.spot_id, False, None, ref)  # type: ignore[union-attr]

    @rule(target=refs, kind=st.sampled_from(["request", "send"]),
          spot_id=st.sampled_from(ALL_IDS), timeout=TIMEOUTS)
    def call(self, kind: str, spot_id: str, timeout: float | None) -> Any:
        return self._act(self.world.spawn, kind, spot_id, False, timeout)  # type: ignore[union-attr]

    @rule(target=refs, kind=st.sampled_from(["request", "send", "stop"]),
          spot_id=st.sampled_from(INSTANCE_IDS), timeout=TIMEOUTS)
    def call_with_intent(self, kind: str, spot_id: str, timeout: float | None) -> Any:
        return self._act(self.world.spawn, kind, spot_id, True, timeout)  # type: ignore[union-attr]

    @rule(target=refs, spot_id=st.sampled_from(INSTANCE_IDS))
    def stop(self, spot_id: str) -> Any:
        return self._act(self.world.spawn, "stop", spot_id, False, None)  # type: ignore[union-attr]

    @rule(target=refs, key=st.sampled_from(GATE_KEYS),
          action=st.sampled_from(["open", "close", "pass_one"]))
    def gate(self, key: str, action: str) -> Any:
        return self._act(self.world.gates[key].act, action)  # type: ignore[union-attr]

    @rule(target=refs, key=st.sampled_from(REJECT_KEYS), reject=st.booleans())
    def set_reject(self, key: str, reject: bool) -> Any:
        return self._act(self.world.reject.__setitem__, key, reject)  # type: ignore[union-attr]

    @rule(target=refs, dt=st.sampled_from([0.2, 0.6, 1.5]))
    def advance(self, dt: float) -> Any:
        return self._act(self.world.advance, dt)  # type: ignore[union-attr]

    @invariant()
    def spec_invariants(self) -> None:
        if self.world is not None:
            self.trio_sync(self.world.check)


#: About 6 s on an idle machine. The CI profile is derandomized; locally each run explores anew.
MODEL_SETTINGS: Final = settings(max_examples=80, stateful_step_count=50, deadline=None,
                                 suppress_health_check=[HealthCheck.too_slow])


def test_one_node_keeps_the_spec_invariants_under_adversarial_schedules():
    run_race_model(RuntimeModel, settings=MODEL_SETTINGS)
