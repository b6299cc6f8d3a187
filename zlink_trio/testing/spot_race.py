"""``SpotRaceModel``: a race model over your own Spot types, checking the runtime and you.

Theory of operation
-------------------
Subclass :class:`SpotRaceModel`, name your Spot classes, which IDs to drive and the
messages to send, and run it (``MyModel.run()`` in a test).  Each hypothesis example
opens a fresh :func:`~zlink_trio.testing.open_test_cluster` (``nodes`` nodes on
``store``, real loopback links) inside the Trio run of :func:`~.race_model.
run_race_model`; its rules start concurrent operations from any node --
requests and sends with and without Instance intent (cold activation),
``get_or_create`` / ``create`` / ``close`` of User Spots, ``relocate`` to a named node
or wherever placement picks -- hold a Spot's turns at a gate (so work queues behind a
busy Spot), and jump the mock clock (deadlines, idle eviction).  Between rules the
cluster settles, then the invariants run on that snapshot:

* **factory once per incarnation** -- the Spot class of one (ID, generation) is built
  at most once, plus once per move of it (a relocation target builds a new instance);
* **one Ready authority** -- at most one node serves an ID, and a Ready record's owner
  serves exactly that generation (while no move of it runs);
* **first message first** -- the first turn of an Instance incarnation handles a
  message sent with Instance intent (the one that activated it, never one that raced);
* **exactly-once** -- no message runs more often than it was sent by calls that did not
  fail before admission; at the end every request that got a reply and every admitted
  send ran, unless its Spot closed after it was sent, or a route cached before a close
  took it to a node that dropped it with a warning (messages are told apart by value);
* **every call bounded** -- no call outlives its deadline, ``DeadlineExceeded`` never
  comes early, and nothing but a ``zlink_trio`` error ever comes out of a call;
* **durable state** -- a write through the ``ctx.state`` of an incarnation that ended
  is never acknowledged (the ``zombie_write`` rule tries it), and every load reads the
  last write acknowledged before it (nothing after a clear or a User Spot's close);
* **durable reminders** -- for Spot types with a ``zl.Reminder`` handler, the ``remind``
  rule sets reminders (and cancels some) through the context of a serving incarnation,
  and ``zombie_remind`` through one that ended: no write of an ended incarnation is
  acknowledged, two deliveries of one due never run at the same time, and at the end
  every reminder set and not cancelled (nor ended with its User Spot's close) reached
  its Spot at least once;
* **every transition in the charts** -- each chart step the runtime took is one
  ``statecharts/`` defines, and no node crashed;
* **yours** -- :meth:`SpotRaceModel.spot_invariants` (override it) gets the
  :class:`~.recorder.Recorder` after every rule: factory runs, turns with their owner,
  messages and results, closes; :meth:`SpotRaceModel.final_spot_invariants` at the end.
"""

from __future__ import annotations

import math
import random
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

import trio
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

import zlink_trio as zl
from zlink_trio.runtime.declaration.spot_types import spot_type_of
from zlink_trio.testing import race_checks as checks
from zlink_trio.testing.cluster import TestCluster, open_test_cluster
from zlink_trio.testing.race_checks import RaceOp, ReminderWrite
from zlink_trio.testing.race_model import TrioMachine, run_race_model

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hypothesis.strategies import SearchStrategy

    from zlink_trio.testing.recorder import Recorder

__all__ = ("RaceOp", "ReminderWrite", "SpotRaceModel", "ended_durables",
           "write_as_zombie")

DEFAULT_TIMEOUT: Final = 4.0
TIMEOUTS: Final = st.sampled_from([None, 0.5, 2.0])
def ended_durables(record: Recorder) -> list[Any]:
    """The ``ctx.state`` of every incarnation that ended (``DurableState.ended``); only
    those holding a value when any does (a save then, rather than a clear)."""
    durables: list[Any] = list({id(e.durable): e.durable for e in record.state_events
                                if getattr(e.durable, "ended", False)}.values())
    return [d for d in durables if d.load() is not None] or durables


async def write_as_zombie(durable: Any) -> str | None:
    """Save (or clear) through the ``ctx.state`` of an ended incarnation, as a zombie
    would; what went wrong, or ``None``. A refusal is what must happen: an
    acknowledgement is caught by ``race_checks.check_durable_state``."""
    try:
        value = durable.load()
        await (durable.clear() if value is None else durable.save(value))
    except zl.ZLinkError:
        return None
    except Exception as exc:  # any other outcome is a finding
        return f"a zombie's state write raised {exc!r}"
    return None


def _fresh_store(url: str) -> tuple[str, Path | None]:
    """Every example gets a fresh store: ``memory://``, ``redis://`` and ``postgresql://``
    are made fresh by ``open_test_cluster``; a SQLite file becomes a fresh file beside it
    (deleted after)."""
    if not url.startswith("sqlite://"):
        return url, None
    path, _, query = url.removeprefix("sqlite://").partition("?")
    named = Path(path)
    fresh = named.with_name(f"{named.stem}-{uuid.uuid4().hex[:12]}{named.suffix or '.db'}")
    return f"sqlite://{fresh}" + (f"?{query}" if query else ""), fresh


class SpotRaceModel(TrioMachine):
    """Subclass with your Spots; see the module doc and ``docs/testing.md``."""

    #: Your Spot classes (every node serves all of them).
    spots: ClassVar[Sequence[type]] = ()
    #: Instance Spot IDs to drive -> their stable type.
    instance_ids: ClassVar[Mapping[str, str]] = {}
    #: User Spot IDs to ``get_or_create`` -> their stable type.
    user_ids: ClassVar[Mapping[str, str]] = {}
    #: The stable type ``create()`` makes (fresh IDs), or None for no ``create`` rule.
    create_type: ClassVar[str | None] = None
    #: The messages to send: one strategy for every Spot, or stable type -> strategy.
    messages: ClassVar[SearchStrategy[Any] | Mapping[str, SearchStrategy[Any]]] = st.nothing()
    #: The create requests (``on_create``'s argument), or None to send none.
    create_requests: ClassVar[SearchStrategy[Any] | None] = None
    nodes: ClassVar[int] = 3
    #: ``"memory://"``, ``"sqlite:///abs/dir/name.db"`` or ``"redis://host:port/db"``;
    #: every example runs on a fresh one (a SQLite file beside the named one, a Redis
    #: key prefix), deleted afterwards.
    store: ClassVar[str] = "memory://"
    #: How the nodes link: ``"memory"`` (in-process links, deterministic scheduling) or
    #: ``"tcp"`` (real loopback sockets, as separate processes).
    links: ClassVar[str] = "memory"
    #: Whether to drive planned relocations (needs two nodes or more).
    relocation: ClassVar[bool] = True
    idle_timeout: ClassVar[float] = 2.0
    #: More ``open_node`` options for every node.
    node_options: ClassVar[Mapping[str, Any]] = {}
    #: The hypothesis settings :meth:`run` uses by default.
    race_settings: ClassVar[settings] = settings(
        max_examples=30, stateful_step_count=25, deadline=None,
        suppress_health_check=list(HealthCheck))

    def __init__(self) -> None:
        super().__init__()
        self.cluster: TestCluster | None = None
        self.ops: dict[int, RaceOp] = {}
        self.reminder_writes: list[ReminderWrite] = []
        #: The contexts the reminder rules wrote through, in the order first used.
        self._contexts: list[zl.SpotContext] = []
        self.refs: list[zl.SpotRef] = []
        self.violations: list[str] = []
        self.crash: BaseException | None = None
        self._stop = trio.Event()
        self._stopped = trio.Event()
        self._ops_nursery: trio.Nursery | None = None
        self._before_jump = -math.inf

    # ------------------------------------------------------------- running it

    @classmethod
    def run(cls, *, settings: settings | None = None) -> None:
        """Run this model as a test (``settings`` default: :attr:`race_settings`)."""
        run_race_model(cls, settings=settings or cls.race_settings)

    def spot_invariants(self, record: Recorder) -> None:
        """Your invariants, after every rule on a settled snapshot; raise to fail."""

    def final_spot_invariants(self, record: Recorder) -> None:
        """Your invariants once every operation ended (the nodes still run)."""

    @property
    def record(self) -> Recorder:
        assert self.cluster is not None
        return self.cluster.recorder

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.violations.append(what)

    # ------------------------------------------------------------- lifetime (Trio side)

    async def _hold(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        options: dict[str, Any] = dict(instance_idle_timeout=self.idle_timeout,
                                       idle_sweep_interval=0.5, default_timeout=DEFAULT_TIMEOUT)
        options.update(self.node_options)
        store, fresh_file = _fresh_store(self.store)
        try:
            async with open_test_cluster(self.nodes, store=store, spots=self.spots,
                                         links=self.links, random=random.Random(0),
                                         **options) as cluster:
                self.cluster = cluster
                async with trio.open_nursery() as ops:
                    self._ops_nursery = ops
                    task_status.started()
                    await self._stop.wait()
                    ops.cancel_scope.cancel()
        except Exception as exc:  # reported by the invariants
            self.crash = exc
        finally:
            if fresh_file is not None:
                for path in (fresh_file, *fresh_file.parent.glob(fresh_file.name + "-*")):
                    path.unlink(missing_ok=True)
            self._stopped.set()

    async def _act(self, action: Any, *args: Any) -> None:
        assert self.cluster is not None
        action(*args)
        await self.cluster.settle()

    def _spawn(self, op: RaceOp) -> None:
        op.n = len(self.ops) + 1
        self.ops[op.n] = op
        assert self._ops_nursery is not None
        self._ops_nursery.start_soon(self._run, op)

    async def _run(self, op: RaceOp) -> None:
        op.started_at = trio.current_time()
        op.deadline = op.started_at + (op.timeout or DEFAULT_TIMEOUT)
        try:
            op.outcome = await self._call(op)
        except Exception as exc:  # every outcome is judged, none crashes the nursery
            op.outcome = exc
        op.done, op.ended_at = True, trio.current_time()
        self._judge(op)

    async def _call(self, op: RaceOp) -> object:
        assert self.cluster is not None
        node = self.cluster[op.node]
        call: Any
        if op.kind == "relocate":
            if op.intent:  # from the owner the store names now, when it has one
                with self.cluster.in_flight.io("the race model's own store read"):
                    found = await self.cluster.store.location.find(op.spot_id)
                owners = [n for n in self.cluster
                          if found is not None and found.owner is not None
                          and n.node_rid == found.owner.node_rid]
                if owners:
                    node, op.node = owners[0], owners[0].node_id
            return await node.relocate(op.spot_id, to=op.message,  # type: ignore[arg-type]
                                       timeout=op.timeout)
        if op.kind == "close":
            assert op.ref is not None
            return await node.spots.close(op.ref)
        if op.kind == "goc":
            call = node.spots.get_or_create(op.spot_id, self.user_ids[op.spot_id])
        elif op.kind == "create":
            assert self.create_type is not None
            call = node.spots.create(self.create_type)
        elif op.kind == "request":
            reply = spot_type_of(self._class_of(op.spot_id)).handlers.by_type[
                type(op.message)].reply_type
            call = node.client.request(op.spot_id, op.message, reply=reply)
        else:
            call = node.client.send(op.spot_id, op.message)
        if op.kind in ("goc", "create") and op.message is not None:
            call = call.request(op.message)
        if op.intent:
            call = call.instance_spot(self.instance_ids[op.spot_id])
        if op.timeout is not None:
            call = call.timeout(op.timeout)
        return await call

    def _ends_with_close(self, spot_id: str) -> bool:
        """Whether the close of ``spot_id`` ends its durable state (a User Spot)."""
        return spot_type_of(self._class_of(spot_id)).kind is zl.SpotKind.USER

    def _class_of(self, spot_id: str) -> type:
        stable = self.instance_ids.get(spot_id) or self.user_ids.get(spot_id) or self.create_type
        for cls in self.spots:
            if spot_type_of(cls).stable_type == stable:
                return cls
        raise AssertionError(f"no Spot class of stable type {stable!r} in spots")

    # ------------------------------------------------------------- judging outcomes

    def _judge(self, op: RaceOp) -> None:
        out, now = op.outcome, trio.current_time()
        where = f"op {op.n} {op.kind}({op.spot_id!r}, intent={op.intent}) from {op.node} -> {out!r}"
        self.expect(min(now, self._before_jump) <= op.deadline + 1e-9,
                    f"{where}: ended at t={now}, after its deadline {op.deadline}")
        if isinstance(out, zl.DeadlineExceeded):
            self.expect(now >= op.deadline - 1e-9, f"{where}: at t={now}, before its deadline")
        elif isinstance(out, Exception):
            self.expect(isinstance(out, zl.ZLinkError), f"{where}: not a zlink_trio error")
            self.expect(not (op.intent and op.kind != "relocate"
                             and isinstance(out, zl.NotFound)),
                        f"{where}: a call with Instance intent is never NotFound")
        elif op.kind in ("goc", "create"):
            self.expect(isinstance(out, zl.CreateResult), f"{where}: not a CreateResult")
            if isinstance(out, zl.CreateResult):
                if op.kind == "goc":
                    self.expect(out.ref.spot_id == op.spot_id, f"{where}: another ID")
                if out.state is not zl.CreateState.REJECTED:
                    self.refs.append(out.ref)

    # ------------------------------------------------------------- rules

    @initialize()
    def open_cluster(self) -> None:
        self.trio(self.harness.nursery.start, self._hold)
        assert self.crash is None, f"the cluster did not start: {self.crash!r}"

    def _message_for(self, data: st.DataObject, spot_id: str) -> object:
        strategy = self.messages
        if not isinstance(strategy, st.SearchStrategy):
            stable = self.instance_ids.get(spot_id) or self.user_ids.get(spot_id) or \
                self.create_type
            strategy = strategy[stable]  # type: ignore[index]
        return data.draw(strategy, label="message")

    def _ids(self) -> list[str]:
        return [*self.instance_ids, *self.user_ids, *{r.spot_id for r in self.refs}]

    @rule(data=st.data(), kind=st.sampled_from(["request", "send"]), intent=st.booleans(),
          node=st.integers(0, 15), timeout=TIMEOUTS)
    def call(self, data: st.DataObject, kind: str, intent: bool, node: int,
             timeout: float | None) -> None:
        ids = self._ids()
        if not ids:
            return
        spot_id = data.draw(st.sampled_from(ids), label="spot_id")
        op = RaceOp(0, kind, spot_id, self._node(node), intent and spot_id in self.instance_ids,
                    timeout, self._message_for(data, spot_id))
        self.trio(self._act, self._spawn, op)

    @precondition(lambda self: bool(self.user_ids))
    @rule(data=st.data(), node=st.integers(0, 15), timeout=TIMEOUTS)
    def get_or_create(self, data: st.DataObject, node: int, timeout: float | None) -> None:
        spot_id = data.draw(st.sampled_from(sorted(self.user_ids)), label="spot_id")
        request = None if self.create_requests is None else data.draw(self.create_requests)
        self.trio(self._act, self._spawn,
                  RaceOp(0, "goc", spot_id, self._node(node), False, timeout, request))

    @precondition(lambda self: self.create_type is not None)
    @rule(data=st.data(), node=st.integers(0, 15), timeout=TIMEOUTS)
    def create(self, data: st.DataObject, node: int, timeout: float | None) -> None:
        request = None if self.create_requests is None else data.draw(self.create_requests)
        self.trio(self._act, self._spawn,
                  RaceOp(0, "create", "", self._node(node), False, timeout, request))

    @precondition(lambda self: bool(self.refs))
    @rule(data=st.data(), node=st.integers(0, 15))
    def close(self, data: st.DataObject, node: int) -> None:
        ref = data.draw(st.sampled_from(self.refs), label="ref")
        self.trio(self._act, self._spawn,
                  RaceOp(0, "close", ref.spot_id, self._node(node), ref=ref))

    @precondition(lambda self: self.relocation and self.nodes > 1)
    @rule(data=st.data(), node=st.integers(0, 15), to=st.one_of(st.none(), st.integers(0, 15)),
          from_owner=st.booleans(), timeout=TIMEOUTS)
    def relocate(self, data: st.DataObject, node: int, to: int | None, from_owner: bool,
                 timeout: float | None) -> None:
        """``node.relocate`` from the owner (``from_owner``) or any node, to a named node
        or wherever placement picks."""
        ids = self._ids()
        if not ids:
            return
        spot_id = data.draw(st.sampled_from(ids), label="spot_id")
        target = None if to is None else self._node(to)
        self.trio(self._act, self._spawn,
                  RaceOp(0, "relocate", spot_id, self._node(node), from_owner, timeout, target))

    @rule(data=st.data(), action=st.sampled_from(["open", "close", "pass_one"]))
    def gate(self, data: st.DataObject, action: str) -> None:
        ids = [*self.instance_ids, *self.user_ids]
        if ids:
            spot_id = data.draw(st.sampled_from(ids), label="spot_id")
            self.trio(self._act, self.record.gate(spot_id).act, action)

    @rule(data=st.data())
    def zombie_write(self, data: st.DataObject) -> None:
        """A write through the ``ctx.state`` of an incarnation that has ended (its Spot
        moved, was evicted or closed): it must be refused, and change nothing. When no
        incarnation that saved has ended yet, the clock first jumps as far as
        :meth:`advance` does at most, so idle Instance Spots may be evicted."""
        if not self._ended_durables():
            self._before_jump = self.harness.clock.current_time()
            self.trio(self._act, self.harness.clock.jump, 2.5)
        durables = self._ended_durables()
        if durables:
            self.trio(self._zombie_write, data.draw(st.sampled_from(durables)))

    def _ended_durables(self) -> list[Any]:
        return ended_durables(self.record)

    async def _zombie_write(self, durable: Any) -> None:
        problem = await write_as_zombie(durable)
        if problem is not None:
            self.violations.append(problem)
        assert self.cluster is not None
        await self.cluster.settle()

    def _reminding_ids(self) -> list[str]:
        return [spot_id for spot_id in self._ids()
                if spot_type_of(self._class_of(spot_id)).reminders]

    def _has_reminders(self) -> bool:
        return any(spot_type_of(cls).reminders for cls in self.spots)

    @precondition(lambda self: self._has_reminders())
    @rule(pick=st.integers(0, 63), after=st.sampled_from([0.0, 0.4, 1.5]),
          cancel=st.booleans())
    def remind(self, pick: int, after: float, cancel: bool) -> None:
        """``ctx.remind`` (a fresh name, due ``after`` s from now) or, with ``cancel``,
        ``ctx.cancel_reminder`` of a name set before, through the context of an
        incarnation a node serves now -- as the Spot's own code would. (``pick`` chooses
        among what exists then: drawn whatever the state, so a replay draws the same.)"""
        assert self.cluster is not None
        serving = [(node.node_id, spot_id, ctx) for node in self.cluster
                   for spot_id in self._reminding_ids()
                   if (ctx := node.inspection.spot_context(spot_id)) is not None]
        if not serving:
            return
        node, spot_id, ctx = serving[pick % len(serving)]
        names = [w.name for w in self.reminder_writes
                 if w.spot_id == spot_id and w.action == "set"]
        name = (names[pick % len(names)] if cancel and names
                else f"k{len(self.reminder_writes) + 1}")
        self._write_reminder(ReminderWrite(
            len(self.reminder_writes) + 1, "cancel" if cancel and names else "set",
            spot_id, node, ctx.generation, name), ctx, after)

    @precondition(lambda self: bool(self._contexts))
    @rule(pick=st.integers(0, 63))
    def zombie_remind(self, pick: int) -> None:
        """``ctx.remind`` through the context of an incarnation that ended (it moved, was
        evicted or closed): it must be refused. When none has ended yet, the clock
        first jumps as :meth:`zombie_write` does."""
        if not self._ended_contexts():
            self._before_jump = self.harness.clock.current_time()
            self.trio(self._act, self.harness.clock.jump, 2.5)
        ended = self._ended_contexts()
        if ended:
            _, ctx = ended[pick % len(ended)]
            self._write_reminder(ReminderWrite(
                len(self.reminder_writes) + 1, "set", ctx.spot_id, "", ctx.generation,
                f"k{len(self.reminder_writes) + 1}", zombie=True), ctx, 0.0)

    def _ended_contexts(self) -> list[tuple[int, zl.SpotContext]]:
        return [(n, ctx) for n, ctx in enumerate(self._contexts) if ctx.ended]

    def _write_reminder(self, write: ReminderWrite, ctx: zl.SpotContext,
                        after: float) -> None:
        self.reminder_writes.append(write)
        if all(ctx is not known for known in self._contexts):
            self._contexts.append(ctx)
        assert self._ops_nursery is not None
        self.trio(self._act, self._ops_nursery.start_soon, self._remind, write, ctx, after)

    async def _remind(self, write: ReminderWrite, ctx: zl.SpotContext, after: float) -> None:
        write.started_at = trio.current_time()
        try:
            write.outcome = await (ctx.cancel_reminder(write.name) if write.action == "cancel"
                                   else ctx.remind(write.name, after=after))
        except zl.ZLinkError as exc:
            write.outcome = exc
        except Exception as exc:  # any other outcome is a finding
            write.outcome = exc
            self.violations.append(f"{write.action} of reminder {write.name!r} raised "
                                   f"{exc!r}")
        write.done, write.ended_at = True, trio.current_time()

    @rule(dt=st.sampled_from([0.3, 1.0, 2.5]))
    def advance(self, dt: float) -> None:
        self._before_jump = self.harness.clock.current_time()
        self.trio(self._act, self.harness.clock.jump, dt)

    def _node(self, i: int) -> str:
        assert self.cluster is not None
        return self.cluster.names[i % len(self.cluster.names)]

    # ------------------------------------------------------------- invariants

    @invariant()
    def runtime_invariants(self) -> None:
        if self.cluster is not None:
            self.trio(self._check)

    async def _check(self) -> None:
        assert self.crash is None, f"a node crashed: {self.crash!r}"
        cluster = self.cluster
        assert cluster is not None
        record = cluster.recorder
        record.check()
        assert not self.violations, "\n".join(self.violations)
        ops = list(self.ops.values())
        await checks.check_authority(cluster, self._ids(), ops)
        checks.check_factory_runs(ops, record)
        checks.check_first_turns(ops, record, set(self.instance_ids))
        checks.check_at_most_once(ops, record)
        checks.check_deadlines(ops, trio.current_time())
        checks.check_durable_state(record, self._ends_with_close)
        checks.check_reminders_apart(record, self.reminder_writes)
        self.spot_invariants(record)

    # ------------------------------------------------------------- the end

    async def _wind_down(self) -> None:
        assert self.cluster is not None
        for gate in self.record.gates.values():
            gate.act("open")
        for _ in range(40):
            await self.cluster.settle()
            if all(op.done for op in self.ops.values()):
                break
            self.harness.clock.jump(0.5)
        late = [op for op in self.ops.values() if not op.done]
        assert not late, f"operations never ended: {late}"
        ops = list(self.ops.values())
        for _ in range(80):  # past every due by more than a take's hold (two deadlines)
            if not checks.undelivered_reminders(self.reminder_writes, ops, self.record,
                                                self._ends_with_close):
                break
            self.harness.clock.jump(0.5)
            await self.cluster.settle()
        await self._check()
        checks.check_exactly_once(ops, self.record)
        checks.check_reminders_delivered(self.reminder_writes, ops, self.record,
                                         self._ends_with_close)
        self.final_spot_invariants(self.record)

    async def _shut_down(self) -> None:
        for gate in self.record.gates.values():
            gate.act("open")
        self._stop.set()
        for _ in range(60):
            assert self.cluster is not None
            await self.cluster.settle()
            if self._stopped.is_set():
                return
            self.harness.clock.jump(1.0)
        raise AssertionError("the cluster did not shut down within 60 s of (mock) time")

    def teardown(self) -> None:
        if self.cluster is None:
            return
        try:
            if not self.failed:
                self.trio(self._wind_down)
        finally:
            self.trio(self._shut_down)
        assert self.crash is None, f"a node crashed: {self.crash!r}"
