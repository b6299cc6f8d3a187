"""A stateful model of Actors: three nodes, membership changes racing with everything else.

Theory of operation
-------------------
:class:`ActorModel` is a hypothesis ``RuleBasedStateMachine`` driving THREE listening
nodes that share one store -- ``memory://``, a SQLite file, Redis or Redis Cluster (a
fresh key prefix per example) -- and talk over real loopback links, in the style and
with the test kit of ``test_relocation_model.py``. Three Actor IDs -- ``a0`` and ``a1``
(``am-kept``,
``PreserveStateWith``: the list of messages handled travels with a move) and ``a2``
(``am-fresh``, ``RecreateOnRelocation``) -- and two rooms, the User Spots ``r0`` and
``r1``. Its rules START operations (docs/actors.md):

* create an Actor on a node's Entry Spot (``node.actors.create``), in a room with
  ``.in_spot(room)`` from the room's owner or from another node, or through the room's
  own handler (``ctx.actors.create(...).in_spot(ctx.ref)``);
* join a room (``node.actors.join``: one store step when the room is on the Actor's
  node, a move there when another node owns it), asked on the node that hosts the Actor
  or on another one; leave (``node.actors.leave``, back to its node's Entry Spot);
* close an Actor (``node.actors.close`` from any node, or its own ``ctx.close()`` by a
  message), get-or-create and close a room (``node.spots.close``, which must end
  ``False`` while the room has members);
* requests and one-way sends to Actors (``request_actor`` / ``send_actor``) from three
  ordered senders, one per node, and unordered ones;
* drain a node (then undrain it, so the model can go on), relocate an Actor on an Entry
  Spot explicitly (``node.relocate(actor_id)``, to a named node or wherever placement
  picks, from its owner or from a node that does not own it) -- or a room, which moves
  with its members (SpotWide: one commit for the room and every member);
* gates that hold an Actor's turn (so a move waits at the seal with work queued behind
  it), and mock-time jumps that fire deadlines.

Scheduling is the relocation model's (the test kit's ``run_race_model``): ``trio.run``
on a ``MockClock`` with ``rate=0`` and no autojump, the machine in a worker thread
reaching into Trio with ``TrioMachine.trio``; between rules the system settles
(``zlink_trio.testing.settle``: no runnable task for a few real milliseconds and no
store call in flight, counted by the kit's ``InFlight``), and the invariants read that
settled snapshot.

Invariants -- the issue's list, checked when each thing happens and after every rule:

* one live incarnation per Actor: at most one node runs a handler of an Actor at any
  instant (a turn token per Actor), and at most one node has a *serving* incarnation;
* one membership per Actor: the store's record names exactly one container (and, while
  it moves, one next container), each of them an existing Entry or User Spot; once
  settled (the record Ready), exactly the node that owns the record lists the Actor,
  in that container's members (``rt.members``, what ``ctx.members()`` reads, and
  ``node.actors.members`` on that node, the store's view); the container is that node's
  Entry Spot or a room it owns; no other node lists it anywhere, and the store lists no
  Actor as a member of a container its record does not name;
* every ToActor message is handled at most once over all nodes; a reply means it was
  handled exactly once and is that handling's result; one ordered sender's admitted
  messages to an Actor run in the order it sent them -- a sender on a move's target node
  too (its message held at the source runs first: the target waits for the relay's
  end); at the end
  every admitted one-way send ran exactly once (unless its Actor was closed after it was
  sent); the ``PreserveStateWith`` state arrives intact with every move;
* no member is lost: an Actor incarnation the model saw Ready is gone from the store
  only after its ``on_close(CLOSED)``, which runs only when the model asked for a close
  (a move, a drain or a refused room close never loses one); at the end every Actor
  the model did not close still exists, serving where its record says;
* a room with members never closes: a close that meets a member ends ``False`` (not an
  error), the room's ``on_close`` finds no member on its node, and a room close that
  returned ``True`` left no Actor naming it; a room's move carries its members, so a
  member is never split from its room by it;
* close reasons fit (RELOCATED only while a move of that Actor runs, CLOSED only after
  a close, ACTIVATION_FAILED only for a failed create or a move's target shell);
* the factory runs at most once per move for one incarnation (plus its creation);
* every call ends within its deadline, with a reply or one of the typed errors the
  rules allow for it (DeadlineExceeded only at or after the deadline);
* every chart transition taken is one ``statecharts`` defines (the kit's ``Recorder``
  on ``TRACE``); no node crashes;
* at the end the model closes every Actor (each close ``True``) and then every room
  (each close ``True`` now), after which the store holds no Actor or User Spot record;
  once the nodes stopped no authority record, payload root or inbox is left.

:class:`JoinAtTheSealReplay` replays one program the model found: a join that moves the
Actor waits at the seal for a held turn until its deadline, and must abort, not strand.

Moves between nodes on SQLite and Redis need their stores' ``begin_relocation(container=)``;
until those land a run on them fails with "unexpected keyword argument 'container'".

``ZLINK_ACTOR_MODEL_EXAMPLES`` (an integer) sets the examples per backend for a longer
run, e.g. ``ZLINK_ACTOR_MODEL_EXAMPLES=500 pytest tests/runtime/test_actor_model.py -k
memory``.
"""

from __future__ import annotations

import json
import math
import os
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
from zlink_trio.core.errors import StaleFence, Unavailable, ZLinkError
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import MembersRemain
from zlink_trio.testing import (
    Gate,
    InFlight,
    RaceHarness,
    TrioMachine,
    run_race_model,
)

if TYPE_CHECKING:
    from pathlib import Path

NODES: Final = ("am-0", "am-1", "am-2")
ACTOR_IDS: Final = ("a0", "a1", "a2")
ROOM_IDS: Final = ("r0", "r1")
ACTOR_TYPES: Final = {"a0": "am-kept", "a1": "am-kept", "a2": "am-fresh"}
PRESERVED: Final = ("a0", "a1")
DEFAULT_TIMEOUT: Final = 4.0
DRAIN_TIMEOUT: Final = 3.0
TIMEOUTS: Final = st.sampled_from([None, 0.5, 2.0])
#: A control is asked of the node that hosts its Actor three times in four.
FROM_HOST: Final = st.sampled_from([True, True, True, False])
R = zl.CloseReason
#: What the end of a Message Follow route says when the Actor moved there and then
#: closed: nothing there (Unavailable), or a newer generation there (InvalidOperation).
DEAD_FOLLOW: Final = ("neither hosts it nor has a Message Follow route",
                      "but this node hosts generation")
COMMITTED, ABORTED, REFUSED = (zl.RelocationOutcome.COMMITTED, zl.RelocationOutcome.ABORTED,
                               zl.RelocationOutcome.REFUSED)
#: Operations that may move an Actor to another node.
MOVES: Final = ("join", "relocate", "drain")


def _moves(op: Op, actor_id: str) -> bool:
    """Whether ``op`` may move ``actor_id``: a join or relocate of it, a drain (``op.target``
    is ``""``), or a relocate of a room, which carries its members."""
    return op.kind in MOVES and (op.target in (actor_id, "")
                                 or (op.kind == "relocate" and op.target in ROOM_IDS))
#: Operations that close an Actor.
CLOSES: Final = ("aclose", "quit")


@attrs.frozen
class APut:
    op: int


@attrs.frozen
class ADone:
    op: int
    node: str
    #: How many messages this incarnation's state had handled, this one included.
    count: int


@attrs.frozen
class AQuit:
    op: int


@attrs.frozen
class Enroll:
    """Ask a room to create the member ``actor_id`` in itself (op ``op``'s)."""

    op: int
    actor_id: str
    timeout: float


@attrs.frozen
class Enrolled:
    op: int
    #: The new member's generation; 0 when the create failed (``error`` names it).
    generation: int
    error: str


@attrs.frozen
class RSpec:
    op: int


class StateAdapter:
    """``PreserveStateWith``: the list of handled operations travels as JSON bytes."""

    def capture(self, actor: Any) -> bytes:
        return json.dumps(actor.handled).encode()

    def restore(self, actor: Any, data: bytes) -> None:
        actor.handled = json.loads(data)


def _node_of(ctx: zl.SpotContext) -> str:
    return _world().node_names[str(ctx.ref.node_rid)]


class _Member:
    """Every model Actor reports what it does to the running example's :class:`World`."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.handled: list[int] = []
        self.closed: R | None = None
        _world().on_factory(self)

    @property
    def node(self) -> str:
        return _node_of(self.ctx)

    @zl.handler
    async def put(self, msg: APut) -> ADone:
        world = _world()
        world.turn_begins(self, msg.op)
        try:
            await world.gates[self.ctx.spot_id].wait()
        finally:
            world.turn_ends(self)
        self.handled.append(msg.op)
        world.on_handle(self, msg.op)
        return ADone(msg.op, self.node, len(self.handled))

    @zl.handler
    async def quit(self, msg: AQuit) -> None:
        world = _world()
        world.turn_begins(self, msg.op)
        world.turn_ends(self)
        world.on_handle(self, msg.op)
        self.ctx.close()

    async def on_close(self, reason: zl.CloseReason) -> None:
        _world().on_close(self, reason)


@zl.actor("am-kept", relocation=zl.PreserveStateWith(StateAdapter()))
class Kept(_Member):
    pass


@zl.actor("am-fresh", relocation=zl.RecreateOnRelocation())
class Fresh(_Member):
    pass


@zl.user_spot("am-room", relocation=zl.RecreateOnRelocation())
class Room:
    def __init__(self, ctx: zl.SpotContext, request: RSpec | None) -> None:
        self.ctx = ctx

    @zl.handler
    async def enroll(self, msg: Enroll) -> Enrolled:
        world = _world()
        call = self.ctx.actors.create(ACTOR_TYPES[msg.actor_id], msg.actor_id)
        try:
            ref = await call.in_spot(self.ctx.ref).timeout(msg.timeout)
        except ZLinkError as exc:
            world.on_enrolled(msg.op, self.ctx, exc)
            return Enrolled(msg.op, 0, type(exc).__name__)
        world.on_enrolled(msg.op, self.ctx, ref)
        return Enrolled(msg.op, ref.generation, "")

    async def on_close(self, reason: zl.CloseReason) -> None:
        _world().on_room_close(self.ctx, reason)


# ---------------------------------------------------------------------------- the world


@attrs.define(eq=False)
class Op:
    """One operation the machine started, and how it ended."""

    n: int
    #: request | send | quit | create | enroll | join | leave | aclose | goc | rclose |
    #: relocate | drain
    kind: str
    target: str  # an ActorId or a room ID ("" for a drain)
    node: int
    timeout: float | None
    sender: int | None = None
    to: int | None = None
    room: str | None = None
    #: The store records when the operation started: its target's, and the room's.
    record: Any = None
    room_record: Any = None
    started_at: float = math.nan
    ended_at: float = math.nan
    deadline: float = math.inf
    done: bool = False
    outcome: object = None
    #: enroll: what the create inside the room's handler ended with.
    inner: object = None


WORLD: World | None = None


def _world() -> World:
    assert WORLD is not None, "a model Actor ran outside an example"
    return WORLD


def _dead_follow(outcome: object) -> bool:
    return isinstance(outcome, Unavailable | zl.InvalidOperation) and any(
        marker in outcome.message for marker in DEAD_FOLLOW)


class World(RaceWorld[Op]):
    """One example: a fresh store, three nodes, the operations and what the Actors did."""

    names = NODES
    tag = "actor-model"

    def __init__(self, harness: RaceHarness) -> None:
        super().__init__(harness)
        self.ops: dict[int, Op] = {}
        self.gates = {actor_id: Gate() for actor_id in ACTOR_IDS}
        #: Operation -> when its message was handled.
        self.handled_at: dict[int, float] = {}
        #: (actor, generation, reason, node, time) of every Actor on_close.
        self.closes: list[tuple[str, int, R, str, float]] = []
        #: ActorId -> the generation the model last saw Ready (created, or in the store).
        self.known: dict[str, int] = {}
        #: ActorId -> the last ActorRef the model saw (a control may name a closed one).
        self.refs: dict[str, zl.ActorRef] = {}
        #: (room, reason, time) of every room's on_close(CLOSED).
        self.room_closes: list[tuple[str, R, float]] = []
        #: Set while the model closes everything at the end.
        self.closing_all = False

    def node_options(self, index: int) -> dict[str, Any]:
        return {"spots": [Kept, Fresh, Room], "default_timeout": DEFAULT_TIMEOUT}

    # ------------------------------------------------------------- lifetime

    async def wind_down(self) -> None:
        """Open the gates, let every operation finish; every Actor the model did not
        close still exists; then close every Actor and every room, and nothing is left."""
        await self.finish_ops()
        await self.check()
        for actor_id, generation in self.known.items():
            if self._closed(actor_id, generation):
                continue
            record = await self.find(actor_id)
            assert record is not None, f"{actor_id}@{generation}, never closed, is gone"
            assert record.object_generation == generation, (
                f"{actor_id}@{generation}, never closed, is gone: the store has {record}")
            assert record.state is AuthorityState.READY, record
            owner = self._node_index(record.owner.node_rid)
            host = self.nodes[owner]._rt.catalog.hosts.get(actor_id)
            assert host is not None, f"{actor_id} is not hosted by {NODES[owner]}, its owner"
            assert host.state == "serving", (
                f"{actor_id} is not served by {NODES[owner]}, which owns it: {host.state}")
        self.closing_all = True
        with trio.fail_after(30):
            await self._close_everything()
        await self.settle()
        with self.setup.in_flight.io("the model's own store read"):
            page = await self.view.location.query(page_size=100)
        left = [r for r in page.records if r.kind is not zl.SpotKind.ENTRY]
        assert not left, f"left in the store after the model closed everything: {left}"

    async def _close_everything(self) -> None:
        for actor_id in ACTOR_IDS:
            record = await self.find(actor_id)
            if record is None:
                continue
            owner = self.nodes[self._node_index(record.owner.node_rid)]
            closed = await owner.actors.close(record.actor_ref())
            assert closed is True, f"closing {actor_id} ({record}) ended {closed}"
        for room_id in ROOM_IDS:
            record = await self.find(room_id)
            if record is None:
                continue
            closed = await self.nodes[0].spots.close(record.ref())
            assert closed is True, f"closing the empty room {room_id} ended {closed}"

    # ------------------------------------------------------------- operations

    async def spawn(self, kind: str, target: str, node: int, seconds: float | None, *,
                    ordered: bool = False, to: int | None = None, room: str | None = None,
                    from_host: bool = False) -> None:
        op = Op(len(self.ops) + 1, kind, target, node, seconds,
                sender=node if ordered else None, to=to, room=room)
        if target:
            op.record = await self.find(target)
        if room is not None:
            op.room_record = await self.find(room)
        if from_host:
            # "from the node that hosts it": the owner the store names
            owner = (op.room_record if kind == "create" else op.record)
            if owner is not None:
                op.node = self._node_index(owner.owner.node_rid, node)
        if op.record is not None and op.record.kind is zl.SpotKind.ACTOR:
            self.refs[target] = op.record.actor_ref()
        if kind in ("join", "leave", "aclose") and target not in self.refs:
            return  # never existed: nothing to name
        self.ops[op.n] = op
        if op.sender is not None:
            self.queues[op.sender].send_nowait(op)
        else:
            assert self.ops_nursery is not None
            self.ops_nursery.start_soon(self._run, op)

    def _node_index(self, rid: object, default: int | None = None) -> int:
        name = self.node_names.get(str(rid))
        if name is None:
            assert default is not None, f"no node has NodeRid {rid}"
            return default
        return NODES.index(name)

    def _actor_ref(self, op: Op) -> zl.ActorRef:
        if op.record is not None:
            return op.record.actor_ref()
        # gone: the last ref the model saw (a control then names a closed incarnation)
        return self.refs[op.target]

    async def _run(self, op: Op) -> None:
        if op.sender is not None:  # queued behind the sender's earlier calls: read afresh
            op.record = await self.find(op.target)
        op.started_at = trio.current_time()
        if op.kind in ("join", "leave", "aclose", "rclose"):
            op.timeout = None  # these take the node's default_timeout
        op.deadline = op.started_at + (op.timeout or DEFAULT_TIMEOUT)
        if op.kind in ("join", "relocate") and op.record is not None:
            self.moves_started[op.target, op.record.object_generation] += 1
        carried = await self._members(op.target) if op.target in ROOM_IDS else set()
        try:
            op.outcome = await self._call(op)
        except Exception as exc:  # every outcome is judged, none crashes the nursery
            op.outcome = exc
        op.done, op.ended_at = True, trio.current_time()
        if op.target in ROOM_IDS:  # a room's move carries its members, each a move too
            for key in carried | await self._members(op.target):
                self.moves_started[key] += 1
        self._judge(op)

    async def _members(self, room: str) -> set[tuple[str, int]]:
        """The ``(ActorId, generation)`` of each member the store lists in ``room``."""
        with self.setup.in_flight.io("the model's own store read"):
            return {(r.spot_id, r.object_generation)
                    for r in await self.view.location.members(room)}

    async def _call(self, op: Op) -> object:
        node = self.nodes[op.node]
        call: Any
        if op.kind == "relocate":
            to = None if op.to is None else NODES[op.to]
            return await node.relocate(op.target, to=to, timeout=op.timeout)
        if op.kind == "drain":
            result = await node.drain(timeout=op.timeout)
            await node.undrain()
            return result
        if op.kind == "goc":
            return await node.spots.get_or_create(op.target, "am-room").request(RSpec(op.n))
        if op.kind == "rclose":
            ref = op.record.ref() if op.record is not None else self._last_rooms.get(op.target)
            return None if ref is None else await node.spots.close(ref)
        if op.kind == "create":
            call = node.actors.create(ACTOR_TYPES[op.target], op.target)
            if op.room is not None:
                room = op.room_record.ref() if op.room_record is not None else op.room
                call = call.in_spot(room)
        elif op.kind == "join":
            assert op.room is not None
            room = op.room_record.ref() if op.room_record is not None else op.room
            return await node.actors.join(self._actor_ref(op), room)
        elif op.kind == "leave":
            return await node.actors.leave(self._actor_ref(op))
        elif op.kind == "aclose":
            return await node.actors.close(self._actor_ref(op))
        elif op.kind == "enroll":
            assert op.room is not None
            call = node.client.request(op.room, Enroll(op.n, op.target, op.timeout or 4.0),
                                       reply=Enrolled)
        elif op.kind == "request":
            call = node.client.request_actor(op.target, APut(op.n), reply=ADone)
        elif op.kind == "send":
            call = node.client.send_actor(op.target, APut(op.n))
        else:
            call = node.client.send_actor(op.target, AQuit(op.n))
        if op.timeout is not None:
            call = call.timeout(op.timeout)
        return await call

    @property
    def _last_rooms(self) -> dict[str, zl.SpotRef]:
        return {op.target: op.outcome.ref for op in self.ops.values()
                if op.kind == "goc" and isinstance(op.outcome, zl.CreateResult)
                and op.outcome.ref is not None}

    # ------------------------------------------------------------- judging outcomes

    def _judge(self, op: Op) -> None:
        out, now = op.outcome, trio.current_time()
        where = f"op {op.n} {op.kind}({op.target!r}"
        where += f", {op.room!r})" if op.room else ")"
        where += f" from {NODES[op.node]} -> {out!r}"
        expect = self.expect
        # A jump may carry the clock past a deadline: the call must then end before the
        # next jump (each rule settles), i.e. at the first instant past its deadline.
        expect(min(now, self.before_jump) <= op.deadline + 1e-9 or op.kind == "drain",
               f"{where}: ended at t={now}, after its deadline {op.deadline}")
        if isinstance(out, zl.DeadlineExceeded):
            expect(now >= op.deadline, f"{where} at t={now}, before its deadline")
            return
        judge = getattr(self, f"_judge_{op.kind}", self._judge_call)
        judge(op, out, where)

    def _judge_call(self, op: Op, out: object, where: str) -> None:
        """request, send, quit: ToActor calls."""
        if isinstance(out, zl.NotFound | zl.StaleRoute) or _dead_follow(out):
            # Nothing to reach: it did not exist when the call began, or it was closing
            # while the call ran (a Closing incarnation admits no new message), or a
            # route cached before a close still named its old node.
            self.expect(op.record is None or self._closing(op)
                        or (not isinstance(out, zl.NotFound) and self._ever_closed(op.target)),
                        f"{where}: the Actor existed and nobody closed it")
        elif op.kind == "request":
            self.expect(isinstance(out, ADone) and out.op == op.n and self.handled[op.n] == 1,
                        f"{where}: a reply must be the result of handling it exactly once "
                        f"(handled {self.handled[op.n]} times)")
        else:
            self.expect(out is None and self.handled[op.n] <= 1, f"{where}: unexpected")

    def _judge_create(self, op: Op, out: object, where: str) -> None:
        node = self.nodes[op.node]
        if isinstance(out, zl.ActorRef):
            container = node.entry_spot_id if op.room is None else op.room
            self.expect(out.actor_id == op.target and out.container == container
                        and out.node_rid == node.node_rid, f"{where}: not the Actor asked for")
            self._saw(out.actor_id, out.generation, where)
            return
        if isinstance(out, zl.AlreadyExists):
            self.expect(op.record is not None or self._raced(op), f"{where}: it did not exist")
            return
        if op.room is not None:
            room = op.room_record
            if isinstance(out, zl.InvalidOperation):  # no such room
                self.expect(room is None or self._room_closed_since(op.room, op.started_at),
                            f"{where}: the room existed")
                return
            if isinstance(out, StaleFence):  # another node owns the room
                self.expect(room is None or room.owner.node_rid != node.node_rid
                            or self._room_moving(op), f"{where}: this node owns the room")
                return
            if isinstance(out, Unavailable):  # the room is not Ready (creating, moving...)
                self.expect(room is None or room.state is not AuthorityState.READY
                            or self._room_busy(op), f"{where}: the room was Ready")
                return
        self.expect(False, f"{where}: unexpected")

    def _judge_enroll(self, op: Op, out: object, where: str) -> None:
        if isinstance(out, zl.NotFound | zl.StaleRoute) or _dead_follow(out):
            self.expect(op.room_record is None
                        or self._room_closed_since(op.room or "", op.started_at)
                        or (not isinstance(out, zl.NotFound) and self._room_ever_closed(
                            op.room or "")), f"{where}: the room existed")
            return
        if not isinstance(out, Enrolled):
            self.expect(False, f"{where}: unexpected")
            return
        inner = op.inner
        self.expect(out.op == op.n and inner is not None, f"{where}: no handling recorded")
        if isinstance(inner, zl.ActorRef):
            self.expect(out.generation == inner.generation and inner.container == op.room,
                        f"{where}: {inner} is not the member created")
        elif isinstance(inner, zl.AlreadyExists):
            self.expect(op.record is not None or self._raced(op), f"{where}: it did not exist")
        else:
            # the room closing or moving while the enroll's turn ran (admission sealed,
            # its accepted turns finish): it takes no member then
            self.expect(isinstance(inner, Unavailable | zl.DeadlineExceeded)
                        and self._room_busy(op), f"{where}: {inner!r} unexpected")

    def _judge_join(self, op: Op, out: object, where: str) -> None:
        node = self.nodes[op.node]
        if isinstance(out, zl.ActorRef):
            room = op.room_record
            self.expect(room is not None and out.actor_id == op.target
                        and out.container == op.room and op.record is not None
                        and out.generation == op.record.object_generation
                        and out.node_rid == room.owner.node_rid,
                        f"{where}: not a member of the room where it is ({room})")
            return
        self._judge_control(op, out, where, node)

    def _judge_leave(self, op: Op, out: object, where: str) -> None:
        node = self.nodes[op.node]
        if isinstance(out, zl.ActorRef):
            self.expect(op.record is not None and out.actor_id == op.target
                        and out.generation == op.record.object_generation
                        and out.container == node.entry_spot_id
                        and out.node_rid == node.node_rid,
                        f"{where}: not back on this node's Entry Spot")
            return
        self._judge_control(op, out, where, node)

    def _judge_control(self, op: Op, out: object, where: str, node: zl.Node) -> None:
        """join and leave refused: why it may be."""
        record = op.record
        hosted_here = record is not None and record.owner.node_rid == node.node_rid
        if isinstance(out, zl.NotFound):  # not Ready on this node
            self.expect(not hosted_here or record.state is not AuthorityState.READY
                        or self._closed_since(op.target, op.started_at),
                        f"{where}: the Actor was Ready here")
        elif isinstance(out, zl.InvalidOperation):
            # a ref of a closed incarnation, or a room that is gone / of another
            # generation, or the store saw the Actor not Ready (a move began)
            self.expect(record is None or op.room_record is None
                        or self._room_closed_since(op.room or "", op.started_at)
                        or self._busy(op) or self._closed_since(op.target, op.started_at),
                        f"{where}: the Actor and the room were there")
        elif isinstance(out, Unavailable):
            # another join, leave, close or move of it is under way; the room is not
            # Ready; a join elsewhere whose move aborted at its deadline (waiting at the
            # seal for a turn)
            self.expect(self._busy(op) or self._room_busy(op) or (
                op.kind == "join" and "could not join" in out.message
                and op.ended_at >= op.deadline), f"{where}: nothing else was under way")
        elif isinstance(out, StaleFence):
            # the room changed owner between the read and the store step
            self.expect(op.kind == "join" and self._room_moving(op), f"{where}: unexpected")
        else:
            self.expect(False, f"{where}: unexpected")

    def _judge_aclose(self, op: Op, out: object, where: str) -> None:
        if out is True:
            return  # on_close(CLOSED) is checked where it runs
        if out is False or isinstance(out, zl.InvalidOperation):
            # that incarnation is gone (False), or a newer one is there
            self.expect(op.record is None or self._closed_since(op.target, op.started_at)
                        or op.record.state is AuthorityState.CLOSING,
                        f"{where}: the Actor was there")
            return
        self.expect(isinstance(out, Unavailable) and self._busy(op), f"{where}: unexpected")

    def _judge_rclose(self, op: Op, out: object, where: str) -> None:
        # True: checked by the invariants (no Actor names a closed room); False: members
        # (06 §10: a Close that meets a member ends False), or the room was gone already;
        # None: no room was ever created
        if out in (True, False, None):
            return
        if isinstance(out, Unavailable):  # sealed for a move (a drain moves empty rooms)
            self.expect(self._room_moving(op) or op.record is None
                        or op.record.state is not AuthorityState.READY,
                        f"{where}: the room was not moving")
        elif isinstance(out, zl.InvalidOperation) and not isinstance(out, MembersRemain):
            # the ref names a generation that is gone: the room was created again
            self.expect(op.record is None or any(
                other.kind in ("goc", "rclose") and other.target == op.target
                for other in self._others(op)), f"{where}: the room was not created again")
        else:
            self.expect(False, f"{where}: unexpected")

    def _judge_goc(self, op: Op, out: object, where: str) -> None:
        self.expect(isinstance(out, zl.CreateResult) and out.state in (
            zl.CreateState.CREATED, zl.CreateState.EXISTING), f"{where}: unexpected")

    def _judge_relocate(self, op: Op, out: object, where: str) -> None:
        record = op.record
        if isinstance(out, zl.NotFound):
            self.expect(record is None or self._closed_since(op.target, op.started_at)
                        or self._room_closed_since(op.target, op.started_at),
                        f"{where}: it existed")
            return
        if isinstance(out, zl.InvalidOperation):  # not the owner
            self.expect(record is None or record.owner.node_rid != self.nodes[op.node].node_rid
                        or self._busy(op), f"{where}: asked of its owner")
            return
        if not isinstance(out, zl.RelocationResult):
            self.expect(False, f"{where}: unexpected")
            return
        if out.outcome is COMMITTED:
            assert record is not None
            self.expect(out.ref.spot_id == op.target
                        and out.ref.generation == record.object_generation,
                        f"{where}: a move keeps the ActorId and ObjectGeneration")
            self.expect(op.to is None or out.ref.node_rid == self.nodes[op.to].node_rid,
                        f"{where}: committed elsewhere than asked")
            self.expect(out.ref.node_rid != self.nodes[op.node].node_rid,
                        f"{where}: moved to itself")
            self.expect(op.target in ROOM_IDS
                        or record.container == self.nodes[op.node].entry_spot_id,
                        f"{where}: a member of {record.container} moved on its own")
        else:
            self.expect(out.outcome in (ABORTED, REFUSED) and bool(out.reason),
                        f"{where}: an aborted or refused move says why")

    def _judge_drain(self, op: Op, out: object, where: str) -> None:
        if not isinstance(out, zl.DrainResult):
            self.expect(False, f"{where}: not a DrainResult")
            return
        for result in out.moved:
            key = (result.ref.spot_id, result.ref.generation)
            self.moves_started[key] += 1
            self.expect(result.outcome is COMMITTED
                        and result.ref.node_rid != self.nodes[op.node].node_rid,
                        f"{where}: {result} listed as moved")
        for result in out.not_moved:
            self.expect(result.outcome in (ABORTED, REFUSED) and bool(result.reason),
                        f"{where}: {result} not moved without a reason")
            if result.outcome is ABORTED:
                self.moves_started[result.ref.spot_id, result.ref.generation] += 1

    # what else was going on

    def _others(self, op: Op) -> list[Op]:
        """The operations that overlapped ``op`` (began before it ended)."""
        return [other for other in self.ops.values() if other is not op
                and other.started_at <= op.ended_at
                and (not other.done or other.ended_at >= op.started_at)]

    def _busy(self, op: Op) -> bool:
        """Another control or move of the same Actor overlapped ``op`` -- a move of a room
        too, which carries its members (SpotWide) --, or a close of it was under way (a
        quit's ``ctx.close()`` included)."""
        controls = ("join", "leave", "aclose", "quit", "relocate", "drain", "create", "enroll")
        return self._closing(op) or any(
            other.kind in controls and (other.target == op.target or other.kind == "drain"
                                        or (other.kind == "relocate"
                                            and other.target in ROOM_IDS))
            for other in self._others(op))

    def _raced(self, op: Op) -> bool:
        """Another create of the same ActorId overlapped ``op``."""
        return any(other.kind in ("create", "enroll") and other.target == op.target
                   for other in self._others(op))

    def _room_busy(self, op: Op) -> bool:
        """The room was not Ready when ``op`` began, or a close / move of it overlapped."""
        room = op.room_record
        return room is None or room.state is not AuthorityState.READY or any(
            (other.kind in ("rclose", "goc", "relocate") and other.target == op.room)
            or other.kind == "drain" for other in self._others(op))

    def _room_moving(self, op: Op) -> bool:
        """A move of ``op``'s room overlapped it, or the room was not Ready."""
        room = op.room or op.target
        return any(other.kind == "drain" or (other.kind == "relocate" and other.target == room)
                   for other in self._others(op)) or (
            op.room_record is not None and op.room_record.state is not AuthorityState.READY)

    def _closed(self, actor_id: str, generation: int) -> bool:
        return any(a == actor_id and g == generation and reason is R.CLOSED
                   for a, g, reason, _, _ in self.closes)

    def _closed_since(self, actor_id: str, at: float) -> bool:
        return any(a == actor_id and reason is R.CLOSED and when >= at - 1e-9
                   for a, _, reason, _, when in self.closes)

    def _closing(self, op: Op) -> bool:
        """A close of ``op``'s Actor was under way while ``op`` ran, or it closed since
        ``op`` began."""
        return self._closed_since(op.target, op.started_at) or any(
            (began := self._close_began(other)) is not None and began <= op.ended_at
            and not any(a == op.target and reason is R.CLOSED and began <= when < op.started_at
                        for a, _, reason, _, when in self.closes)
            for other in self.ops.values() if other.target == op.target)

    def _close_began(self, op: Op) -> float | None:
        """When ``op`` began closing its Actor: an ``aclose`` still running or past its
        deadline (a close that began completes), or a ``quit`` whose handler ran."""
        if op.kind == "aclose" and (not op.done or isinstance(op.outcome, zl.DeadlineExceeded)):
            return op.started_at
        if op.kind == "quit":
            return self.handled_at.get(op.n)
        return None

    def _ever_closed(self, actor_id: str) -> bool:
        return any(a == actor_id and reason is R.CLOSED for a, _, reason, _, _ in self.closes)

    def _room_closed_since(self, room_id: str, at: float) -> bool:
        return any(r == room_id and when >= at - 1e-9 for r, _, when in self.room_closes)

    def _room_ever_closed(self, room_id: str) -> bool:
        return any(r == room_id for r, _, _ in self.room_closes)

    def _lost_to_a_stale_route(self, op: Op) -> bool:
        # A one-way send on a route cached before the Actor closed reaches a node that no
        # longer hosts it; that node logs and drops it (the sender returned at admission).
        dropped = any(f"no longer owns Spot {op.target!r}" in log
                      or (any(m in log for m in DEAD_FOLLOW) and repr(op.target) in log)
                      for log in self.logs)
        return self._ever_closed(op.target) and dropped

    def _saw(self, actor_id: str, generation: int, where: str) -> None:
        """The model saw ``actor_id``'s incarnation ``generation`` Ready."""
        known = self.known.get(actor_id)
        if known is not None and known != generation:
            self.expect(self._closed(actor_id, known) or generation < known,
                        f"{where}: {actor_id}@{known} was replaced by @{generation} "
                        "without a close")
        if known is None or generation > known:
            self.known[actor_id] = generation

    # ------------------------------------------------------------- what the Actors report

    def on_factory(self, actor: _Member) -> None:
        self.factories[actor.ctx.spot_id, actor.ctx.generation] += 1

    def on_enrolled(self, n: int, room: zl.SpotContext, result: object) -> None:
        op = self.ops[n]
        self.expect(op.inner is None, f"op {n} enroll handled twice")
        op.inner = result
        if isinstance(result, zl.ActorRef):
            self._saw(result.actor_id, result.generation, f"op {n} enroll")

    def turn_begins(self, actor: _Member, n: int) -> None:
        actor_id, token = actor.ctx.spot_id, (id(actor), n)
        other = self.running.get(actor_id)
        self.expect(other is None, f"{actor_id}: op {n} runs at {actor.node} while op "
                                   f"{other and other[1]} runs")
        self.expect(actor.closed is None, f"{actor_id}: op {n} runs at {actor.node} after "
                                          f"on_close({actor.closed})")
        self.running[actor_id] = token

    def turn_ends(self, actor: _Member) -> None:
        self.running.pop(actor.ctx.spot_id, None)

    def on_handle(self, actor: _Member, n: int) -> None:
        op, key = self.ops[n], (actor.ctx.spot_id, actor.ctx.generation)
        where = f"op {n} ({op.kind}) at {actor.node} of {key}"
        self.handled[n] += 1
        self.handled_at[n] = trio.current_time()
        self.expect(self.handled[n] == 1, f"{where}: handled twice")
        self.expect(op.target == key[0], f"{where}: sent to {op.target}")
        failed = op.done and isinstance(op.outcome, Exception) and not isinstance(
            op.outcome, zl.DeadlineExceeded)
        self.expect(not failed, f"{where}: ran although the call failed with {op.outcome!r}")
        self._saw(key[0], key[1], where)
        history = self.history.setdefault(key, [])
        if op.kind in ("request", "send") and key[0] in PRESERVED:
            self.expect(actor.handled[:-1] == [m for m in history
                                               if self.ops[m].kind in ("request", "send")],
                        f"{where}: the preserved state {actor.handled[:-1]} is not what "
                        f"this generation handled {history}")
        history.append(n)
        if op.sender is not None:
            overtaken = [m for m, earlier in self.ops.items()
                         if m < n and earlier.sender == op.sender
                         and earlier.target == op.target and earlier.done
                         and earlier.outcome is None and earlier.kind in ("send", "quit")
                         and not self.handled[m]
                         and not self._closed_since(earlier.target, earlier.started_at)
                         and not self._lost_to_a_stale_route(earlier)]
            self.expect(not overtaken, f"{where}: overtook the same sender's admitted "
                                       f"{overtaken}")

    def _serving(self, actor: _Member) -> bool:
        host = self.nodes[NODES.index(actor.node)]._rt.catalog.hosts.get(actor.ctx.spot_id)
        return host is not None and host.generation == actor.ctx.generation and \
            host.state == "serving"

    def _moving(self, actor_id: str) -> bool:
        return any(_moves(op, actor_id) and not op.done for op in self.ops.values())

    def on_close(self, actor: _Member, reason: R) -> None:
        actor_id, generation, now = actor.ctx.spot_id, actor.ctx.generation, trio.current_time()
        where = f"on_close({reason.name}) of {actor_id}@{generation} at {actor.node}"
        self.expect(actor.closed is None, f"{where}: after on_close({actor.closed})")
        if reason is R.RELOCATED:
            self.expect(self._moving(actor_id), f"{where}: no move of it was running")
        elif reason is R.CLOSED:
            asked = self.closing_all or any(op.target == actor_id and op.kind in CLOSES
                                            for op in self.ops.values())
            self.expect(asked, f"{where}: nobody closed it")
        elif reason is R.ACTIVATION_FAILED:
            creating = any(op.kind in ("create", "enroll") and op.target == actor_id
                           and not op.done for op in self.ops.values())
            self.expect(creating or self._moving(actor_id),
                        f"{where}: neither a create nor a move of it was running")
        else:
            self.expect(reason is R.NODE_SHUTDOWN and self.stop.is_set(),
                        f"{where}: unexpected")
        actor.closed = reason
        self.closes.append((actor_id, generation, reason, actor.node, now))

    def on_room_close(self, ctx: zl.SpotContext, reason: R) -> None:
        room_id = ctx.spot_id
        where = f"on_close({reason.name}) of room {room_id} at {_node_of(ctx)}"
        self.expect(not ctx.members(), f"{where} with members {ctx.members()}")
        if reason is R.CLOSED:
            asked = self.closing_all or any(op.target == room_id and op.kind == "rclose"
                                            for op in self.ops.values())
            self.expect(asked, f"{where}: nobody closed it")
        elif reason is R.RELOCATED:
            self.expect(any(op.kind in ("drain", "relocate") and not op.done
                            and op.target in ("", room_id) for op in self.ops.values()),
                        f"{where}: no move of it was running")
        else:
            self.expect(reason is R.NODE_SHUTDOWN and self.stop.is_set(),
                        f"{where}: unexpected")
        if reason is R.CLOSED:
            self.room_closes.append((room_id, reason, trio.current_time()))

    # ------------------------------------------------------------- invariants

    async def check(self) -> None:
        """The invariants on a settled snapshot (runs in the Trio thread)."""
        assert self.crash is None, f"a node crashed: {self.crash!r}"
        assert not self.violations, "\n".join(self.violations)
        self.recorder.check()
        listed: dict[str, list[tuple[str, str]]] = {}
        for i, node in enumerate(self.nodes):
            for container, members in node._rt.members.items():
                for actor_id, ref in members.items():
                    assert ref.container == container, (container, ref)
                    listed.setdefault(actor_id, []).append((NODES[i], container))
        for actor_id in ACTOR_IDS:
            await self._check_actor(actor_id, listed.get(actor_id, []))
        for container in (*(node.entry_spot_id for node in self.nodes), *ROOM_IDS):
            with self.setup.in_flight.io("the model's own store read"):
                members = await self.view.location.members(container)
            strays = [r for r in members if container not in (r.container, r.next_container)]
            assert not strays, f"the store lists {strays} as members of {container}"
        if not any(op.kind == "drain" and not op.done for op in self.ops.values()):
            for key, runs in self.factories.items():  # a drain's moves count when it ends
                assert runs <= 1 + self.moves_started[key], (
                    f"factory of {key} ran {runs} times for {self.moves_started[key]} moves")
        now = trio.current_time()
        late = [op for op in self.ops.values()
                if not op.done and now > op.deadline and op.kind != "drain"]
        assert not late, f"operations outlived their deadline at t={now}: {late}"

    async def _check_actor(self, actor_id: str, listed: list[tuple[str, str]]) -> None:
        serving = [NODES[i] for i, node in enumerate(self.nodes)
                   if (host := node._rt.catalog.hosts.get(actor_id)) is not None
                   and host.state == "serving"]
        assert len(serving) <= 1, f"{actor_id} is served by {serving}"
        record = await self.find(actor_id)
        known = self.known.get(actor_id)
        if record is None or record.object_generation != known:
            # no member lost: the incarnation the model saw Ready closed (when asked)
            assert known is None or self._closed(actor_id, known), (
                f"{actor_id}@{known} is gone without a close: the store has {record}; "
                f"its closes: {[c for c in self.closes if c[0] == actor_id]}")
        if record is None:
            assert not listed, f"{actor_id} has no record but is listed by {listed}"
            return
        assert record.kind is zl.SpotKind.ACTOR, record
        assert record.container is not None, record
        containers = [record.container]
        if record.next_container is not None:
            containers.append(record.next_container)
        for container_id in containers:
            container = await self.find(container_id)
            assert container is not None, (
                f"{actor_id}'s container {container_id} is gone ({record})")
            assert container.kind in (zl.SpotKind.ENTRY, zl.SpotKind.USER), (
                f"{actor_id}'s container {container_id} is {container} ({record})")
        if record.state is not AuthorityState.READY:
            # created, closing or moving: listed (once) at most by its owner in its
            # container and by its move's target in the next container
            allowed = {(NODES[self._node_index(record.owner.node_rid)], record.container)}
            if record.relocation_target is not None and record.next_container is not None:
                allowed.add((NODES[self._node_index(record.relocation_target.node_rid)],
                             record.next_container))
            assert set(listed) <= allowed, (
                f"{actor_id} is {record.state.value}, listed by {listed}: {record}")
            assert len(set(listed)) == len(listed), (actor_id, listed)
            return
        self._saw(actor_id, record.object_generation, "the store")
        owner = self._node_index(record.owner.node_rid)
        node = self.nodes[owner]
        assert listed == [(NODES[owner], record.container)], (
            f"{actor_id} is Ready in {record.container} on {NODES[owner]} but listed by "
            f"{listed}")
        membership = node._rt.memberships.get(actor_id)
        assert membership is not None, (actor_id, record)
        assert membership.ref.generation == record.object_generation, (membership, record)
        assert membership.state == "member", (membership, record)
        host = node._rt.catalog.hosts.get(actor_id)
        assert host is not None, f"{actor_id} is Ready on {NODES[owner]}, which hosts none"
        assert (host.generation, host.state) == (record.object_generation, "serving"), (
            f"{actor_id} is Ready on {NODES[owner]}, whose host is {host.generation} "
            f"{host.state}")
        container = await self.find(record.container)
        assert container.owner == record.owner, (
            f"{actor_id} on {NODES[owner]} is a member of {record.container}, owned by "
            f"{container.owner}")
        if container.kind is zl.SpotKind.ENTRY:
            assert record.container == node.entry_spot_id, (actor_id, record)
        with self.setup.in_flight.io("the model's members read"):
            members = await node.actors.members(record.container)
        assert record.actor_ref() in members, (
            f"{actor_id} is not among the members of {record.container}: {members}")

    def final_check(self) -> None:
        """After the nodes shut down: every admitted message ran once; nothing leaked."""
        assert self.crash is None, f"a node crashed: {self.crash!r}"
        assert not self.violations, "\n".join(self.violations)
        for op in self.ops.values():
            if op.kind in ("send", "quit") and op.outcome is None:
                assert self.handled[op.n] == 1 or self._closed_since(op.target, op.started_at) \
                    or self._lost_to_a_stale_route(op), f"admitted send never ran: {op}"
        assert not self.leftovers, f"authority left behind: {self.leftovers}"
        stats = self.leftover_roots
        assert stats is not None
        assert stats.roots == 0, stats
        assert stats.inboxes == 0, stats


# ---------------------------------------------------------------------------- the machine


class ActorModel(TrioMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None

    def _act(self, action: Any, *args: Any, **kwargs: Any) -> None:
        assert self.world is not None
        self.trio(self.world.act, lambda: action(*args, **kwargs))

    def _spawn(self, *args: Any, **kwargs: Any) -> None:
        assert self.world is not None
        self._act(self.world.spawn, *args, **kwargs)

    @initialize(starters=st.lists(st.integers(0, 2), min_size=5, max_size=5),
                closed=st.sets(st.sampled_from(ACTOR_IDS)))
    def open_nodes(self, starters: list[int], closed: set[str]) -> None:
        """Three nodes; rooms ``r0`` and ``r1``; ``a0`` and ``a2`` on Entry Spots, ``a1``
        created by ``r0``'s handler (each asked of the node hypothesis picks); the gates
        of the Actors in ``closed`` start closed."""
        global WORLD
        self.world = WORLD = World(self.harness)
        self.world.recorder.install()
        self.trio(self.harness.nursery.start, self.world.hold)
        assert self.world.crash is None, self.world.crash
        self._spawn("goc", "r0", starters[0], None)
        self._spawn("goc", "r1", starters[1], None)
        self._spawn("create", "a0", starters[2], None)
        self._spawn("enroll", "a1", starters[3], None, room="r0")
        self._spawn("create", "a2", starters[4], None)
        for actor_id in closed:
            self.world.gates[actor_id].act("close")

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

    @rule(kind=st.sampled_from(["request", "send"]),
          actor_id=st.sampled_from(ACTOR_IDS), node=st.integers(0, 2), ordered=st.booleans(),
          timeout=TIMEOUTS)
    def call(self, kind: str, actor_id: str, node: int, ordered: bool,
             timeout: float | None) -> None:
        """A ToActor request or one-way send."""
        self._spawn(kind, actor_id, node, timeout, ordered=ordered)

    @rule(how=st.sampled_from(["entry", "in_spot", "in_spot_here", "handler",
                               "close", "quit"]),
          actor_id=st.sampled_from(ACTOR_IDS), node=st.integers(0, 2),
          room=st.sampled_from(ROOM_IDS), ordered=st.booleans(), timeout=TIMEOUTS)
    def lifecycle(self, how: str, actor_id: str, node: int, room: str, ordered: bool,
                  timeout: float | None) -> None:
        """Create an Actor (twice as often as a close): on ``node``'s Entry Spot,
        ``.in_spot(room)`` from ``node`` or from the room's owner (``in_spot_here``), or by
        the room's own handler (a request from ``node``). Close one:
        ``node.actors.close(ref)`` from any node, or a message whose handler calls
        ``ctx.close()`` (from an ordered sender or not)."""
        if how == "entry":
            self._spawn("create", actor_id, node, timeout)
        elif how == "handler":
            self._spawn("enroll", actor_id, node, timeout, room=room)
        elif how == "close":
            self._spawn("aclose", actor_id, node, None)
        elif how == "quit":
            self._spawn("quit", actor_id, node, None, ordered=ordered)
        else:
            self._spawn("create", actor_id, node, timeout, room=room,
                        from_host=how == "in_spot_here")

    @rule(kind=st.sampled_from(["join", "join", "join", "leave"]),
          actor_id=st.sampled_from(ACTOR_IDS), room=st.sampled_from(ROOM_IDS),
          node=st.integers(0, 2), from_host=FROM_HOST)
    def membership(self, kind: str, actor_id: str, room: str, node: int,
                   from_host: bool) -> None:
        """Join a room (three times as often as a leave), asked of the node that hosts
        the Actor (mostly) or of another one."""
        self._spawn(kind, actor_id, node, None, room=room if kind == "join" else None,
                    from_host=from_host)

    @rule(kind=st.sampled_from(["goc", "goc", "rclose"]), room=st.sampled_from(ROOM_IDS),
          node=st.integers(0, 2))
    def room(self, kind: str, room: str, node: int) -> None:
        """``get_or_create`` (twice as often) or ``close`` of a room."""
        self._spawn(kind, room, node, None)

    @rule(what=st.sampled_from((*ACTOR_IDS, *ACTOR_IDS, *ROOM_IDS)), node=st.integers(0, 2),
          to=st.one_of(st.none(), st.integers(0, 2)), from_host=FROM_HOST,
          timeout=TIMEOUTS)
    def relocate(self, what: str, node: int, to: int | None, from_host: bool,
                 timeout: float | None) -> None:
        """``node.relocate`` of an Actor (twice as often: it moves only from an Entry
        Spot) or of a room (with its members), to ``to`` or wherever
        placement picks, asked of its owner (mostly) or of another node."""
        self._spawn("relocate", what, node, timeout, to=to, from_host=from_host)

    @rule(node=st.integers(0, 2))
    def drain(self, node: int) -> None:
        """Drain ``node`` (then undrain it); one node always takes new Spots."""
        assert self.world is not None
        draining = {op.node for op in self.world.ops.values()
                    if op.kind == "drain" and not op.done}
        if node in draining or len(draining) >= len(NODES) - 1:
            return
        self._spawn("drain", "", node, DRAIN_TIMEOUT)

    @rule(actor_id=st.sampled_from(ACTOR_IDS),
          action=st.sampled_from(["open", "close", "pass_one"]))
    def gate(self, actor_id: str, action: str) -> None:
        self._act(self.world.gates[actor_id].act, action)  # type: ignore[union-attr]

    @rule(dt=st.sampled_from([0.3, 0.8, 2.5]))
    def advance(self, dt: float) -> None:
        assert self.world is not None
        self.world.before_jump = self.harness.clock.current_time()
        self._act(self.harness.clock.jump, dt)

    @invariant()
    def spec_invariants(self) -> None:
        if self.world is not None:
            self.trio(self.world.check)


#: Examples per backend (``ZLINK_ACTOR_MODEL_EXAMPLES`` overrides them for a longer run);
#: the CI profile is derandomized, locally each run explores anew.
EXAMPLES: Final = {"memory": 60, "sqlite": 25, "redis": 25, "redis-cluster": 25,
                   "postgresql": 20}
STEPS: Final = 30


def _examples(backend: str) -> int:
    override = os.environ.get("ZLINK_ACTOR_MODEL_EXAMPLES", "")
    return int(override) if override else EXAMPLES[backend]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis", "redis-cluster",
                                     "postgresql"])
def test_actor_membership_racing_with_moves_calls_and_closes_keeps_the_invariants(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model_settings = settings(max_examples=_examples(backend), stateful_step_count=STEPS,
                              deadline=None, suppress_health_check=list(HealthCheck))

    setup = Setup(backend, tmp_path, InFlight())

    async def prepare(harness: RaceHarness) -> None:
        await patch_backend(backend, setup.in_flight, tmp_path, monkeypatch)

    run_race_model(ActorModel, settings=model_settings, prepare=prepare,
                   data={"setup": setup})


class JoinAtTheSealReplay(TrioMachine):
    """One fixed program of :class:`ActorModel`'s rules, checked by its invariants: a
    join of a room on another node seals the Actor behind its running turn (held by its
    gate) and its deadline passes there; the move must abort before relay-ready and the
    Actor stay a Ready member of its Entry Spot -- not strand Sealed, which the model
    found when the join was cancelled from outside at that same deadline."""

    def __init__(self) -> None:
        super().__init__()
        self.model = ActorModel()
        self.replayed = False

    @rule()
    def replay(self) -> None:
        if self.replayed:
            return
        self.replayed = True
        model = self.model
        model.open_nodes([0, 0, 0, 0, 0], {"a0"})
        model.spec_invariants()
        world = model.world
        assert world is not None
        room = model.trio(world.find, "r0")
        actor = model.trio(world.find, "a0")
        assert room is not None
        assert actor is not None
        there = world._node_index(room.owner.node_rid)
        steps: list[tuple[Any, tuple[Any, ...]]] = []
        if world._node_index(actor.owner.node_rid) == there:  # the room elsewhere
            steps.append((model.relocate, ("a0", there, (there + 1) % 3, True, None)))
        steps += [
            (model.call, ("request", "a0", 0, False, None)),  # the turn running at the seal
            (model.membership, ("join", "a0", "r0", 0, True)),  # from its host
            (model.advance, (2.5,)),
            (model.advance, (2.5,)),  # the join's deadline (default_timeout 4 s)
            (model.gate, ("a0", "open")),
        ]
        for step, args in steps:
            step(*args)
            model.spec_invariants()
        join = next(op for op in world.ops.values() if op.kind == "join")
        assert isinstance(join.outcome, Unavailable), join
        assert "did not finish before its deadline" in join.outcome.message, join
        record = model.trio(world.find, "a0")
        assert record.state is AuthorityState.READY, record
        assert record.container == world.nodes[join.node].entry_spot_id, record

    def teardown(self) -> None:
        self.model.teardown()


def test_a_join_past_its_deadline_at_the_seal_aborts_in_the_model(tmp_path: Path) -> None:
    """:class:`JoinAtTheSealReplay` on ``memory://``."""
    setup = Setup("memory", tmp_path, InFlight())
    run_race_model(JoinAtTheSealReplay, settings=settings(
        max_examples=1, stateful_step_count=1, deadline=None, database=None,
        phases=[Phase.generate], suppress_health_check=list(HealthCheck)),
        data={"setup": setup})

