"""One mesh node process for the multi-process tests, driven by JSON lines on stdin/stdout.

``python mesh_node_worker.py --node NODE_ID --store URL --log FILE [--lease S]
[--secret S] [--weight W] [--timeout S] [--spots TYPES]`` opens a node on
``127.0.0.1:0`` serving ``MeshCounter`` (Instance Spot ``meshcounter``) and ``MeshRoom``
(User Spot ``meshroom``), prints one ready line ``{"ready": true, "node_rid": ...,
"endpoint": ..., "pid": ...}`` and then answers one JSON line per command line, in
order. ``--spots`` names the stable types the node registers, comma-separated
(``meshcounter,meshroom,meshmover`` by default; ``none``: a ``client_only`` node), so
the processes of one Mesh can have registries that differ. The commands:

* ``{"op": "request", "spot": ID, "n": N, "intent": bool, "timeout": S}`` -- a
  ``request(Add(n))`` (with ``.instance_spot()`` when ``intent``);
* ``{"op": "burst", "ids": [...], "count": K, "timeout": S, "at_once": A, "spread":
  M}`` -- K concurrent requests ``Add(1)`` with Instance intent, request ``i`` to
  ``ids[i % len(ids)]``; with ``spread`` the first A start at once, then the starts
  pause at a checkpoint after every M (so later calls meet activations in flight, not
  only missing IDs); the answer names the most requests in flight at once
  (``peak_in_flight``);
* ``{"op": "find", "spot": ID}``; ``{"op": "get_or_create", "spot": ID}``;
  ``{"op": "close", "spot": ID}`` (finds the ref, then closes it);
* ``{"op": "quit"}`` (or end of stdin) -- close the node and exit 0.

The relocation tests (``test_mesh_relocation.py``) use ``MeshMover`` (Instance Spot
``meshmover``, ``PreserveStateWith``: the sequence numbers it has handled move with it)
and these commands (see :class:`Session`):

* ``{"op": "step", "spot": ID, "seq": N, "intent": bool, "timeout": S}`` -- a
  ``request(Step(N))``, answered ``{"ok": true, "seq": N, "count": handled so far,
  "node": handler's NodeId}``; ``{"op": "steps", "spot": ID, "seqs": [...]}`` -- those
  requests concurrently, ``{"ok": true, "results": [...]}`` in ``seqs`` order;
  ``{"op": "stream", "spot": ID, "first": N, "stop_after": K, "timeout": S}`` --
  sequential requests N, N+1, ... until ``stop_stream``, one fails, or K were sent,
  answered with every seq's outcome;
* ``{"op": "hold", "spot": ID}`` -- a request of ``Hold``, whose handler blocks on this
  process's gate while it is closed: ``gate_close``, ``wait_holding`` (the turn is
  running), ``gate_open``;
* ``{"op": "relocate", "spot": ID, "to": NODE_ID | null, "timeout": S}``,
  ``{"op": "drain", "timeout": S}``, ``{"op": "hosts"}`` (the Spot IDs this node
  hosts), ``{"op": "cached_route", "spot": ID}`` (the owner NodeRid this node's route
  cache names, or null), ``{"op": "knob", "name": ..., "value": ...}``
  (``fail_restore``);
* ``{"op": "wait_step", "chart": ..., "event": ..., "count": K}`` -- until this process
  stepped that chart event K times (the charts' TRACE);
  ``{"op": "wait_held", "spot": ID, "count": K}`` -- until the sealed Spot's relocation
  hold holds K messages; ``seal_gate_close`` / ``wait_seal_gated`` / ``seal_gate_open``
  -- the store's SealRelocation waits while the seal gate is closed, so the Spot stays
  Relocating, not yet sealed;
* ``{"op": "spawn", "tag": T, "cmd": {...}}`` -- run ``cmd`` in the background (answered
  at once); ``{"op": "join", "tag": T}`` -- its answer, once it has one.

Every ``Step`` handled appends ``handle SPOT_ID SEQ NODE_ID PID OPERATION`` to
``LOG.handled`` (one write, like the factory log): OPERATION is the operation ID the
turn that ran it carried (``Incarnation._run_handler``, wrapped while a session is
open). ``{"op": "operations"}`` answers the operation ID each ``Step`` this node sent
left with (``{"operations": {seq: id}}``: its first command 39; a call served on this
node draws none). ``--lane-items`` bounds the application lane's item
count, ``--default-timeout`` is ``open_node(default_timeout=...)``. With ``--wait-go 1``
the process prints ``{"loaded": true, "pid": ...}`` once its imports are done and opens
the node (store included) only when the next stdin line arrives: the tests start
several processes' store opens at the same moment that way.

A call answers ``{"ok": true, "value": total, "node": owner NodeId}`` or
``{"ok": false, "error": class name, "message": ...}``. Every factory run appends
``factory SPOT_ID GENERATION NODE_ID PID`` to ``--log`` with one ``O_APPEND`` write,
so the log survives SIGKILL and proves how often each incarnation was built.
``ZLINK_CRASH_AT`` (see ``zlink_trio/runtime/crash_points.py``) may kill the
process at a cold-activation step. ``--timeout`` bounds the whole process.
"""

from __future__ import annotations

import argparse
import collections
import contextvars
import json
import os
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

import zlink_trio as zl
from zlink_trio.runtime import charts
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.runtime.mesh import remote_calls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

NODE = ""
LOG = ""


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int
    node: str


@attrs.frozen
class RoomSpec:
    topic: str


def side_effect(*words: object, log: str = "") -> None:
    line = (" ".join(str(w) for w in words) + "\n").encode()
    fd = os.open(log or LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write: lines of concurrent processes never interleave
    finally:
        os.close(fd)


def log_of(ctx: zl.SpotContext) -> str:
    """The factory log of the Spot's node (``LOG`` unless it runs in-process)."""
    session = SESSIONS.get(str(ctx.ref.node_rid))
    return session.log if session is not None else LOG


@zl.instance_spot("meshcounter", relocation=zl.DisableRelocation())
class MeshCounter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.total = 0
        side_effect("factory", ctx.spot_id, ctx.generation, NODE, os.getpid(), log=log_of(ctx))

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total, NODE)


@zl.user_spot("meshroom", relocation=zl.DisableRelocation())
class MeshRoom:
    def __init__(self, ctx: zl.SpotContext, request: RoomSpec | None) -> None:
        self.total = 0
        side_effect("factory", ctx.spot_id, ctx.generation, NODE, os.getpid(), log=log_of(ctx))

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total, NODE)


def failure(error: zl.ZLinkError) -> dict[str, Any]:
    return {"ok": False, "error": type(error).__name__, "message": error.message}


async def request(node: zl.Node, spot: str, n: int, intent: bool, seconds: float
                  ) -> dict[str, Any]:
    call = node.client.request(spot, Add(n), reply=Total)
    if intent:
        call = call.instance_spot("meshcounter")
    try:
        total = await call.timeout(seconds)
    except zl.ZLinkError as error:
        return failure(error)
    return {"ok": True, "value": total.value, "node": total.node}


def ref_json(ref: zl.SpotRef | None) -> dict[str, Any] | None:
    return None if ref is None else {"generation": ref.generation, "node_rid": str(ref.node_rid)}


async def handle(node: zl.Node, cmd: dict[str, Any]) -> dict[str, Any]:
    op = cmd["op"]
    timeout = float(cmd.get("timeout", 10.0))
    if op == "request":
        return await request(node, cmd["spot"], int(cmd.get("n", 1)),
                             bool(cmd.get("intent", False)), timeout)
    if op == "burst":
        ids, count = list(cmd["ids"]), int(cmd["count"])
        results: list[dict[str, Any]] = [{}] * count
        in_flight = [0, 0]  # now, peak

        async def one(i: int) -> None:
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            results[i] = await request(node, ids[i % len(ids)], 1, True, timeout)
            results[i]["spot"] = ids[i % len(ids)]
            in_flight[0] -= 1

        spread, at_once = int(cmd.get("spread", 0)), int(cmd.get("at_once", 0))
        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(one, i)
                if spread and i >= at_once and (i - at_once) % spread == spread - 1:
                    await trio.lowlevel.checkpoint()  # let the started calls run a step
        return {"ok": True, "results": results, "peak_in_flight": in_flight[1]}
    if op == "find":
        return {"ok": True, "ref": ref_json(await node.spots.find(cmd["spot"]))}
    if op == "get_or_create":
        try:
            result = await node.spots.get_or_create(cmd["spot"], "meshroom").request(
                RoomSpec(str(cmd.get("topic", "")))).timeout(timeout)
        except zl.ZLinkError as error:
            return failure(error)
        return {"ok": True, "state": result.state.value, "ref": ref_json(result.ref)}
    if op == "close":
        try:
            ref = await node.spots.find(cmd["spot"])
            closed = ref is not None and await node.spots.close(ref)
        except zl.ZLinkError as error:
            return failure(error)
        return {"ok": True, "closed": closed}
    raise SystemExit(f"mesh_node_worker: unknown op {op!r}; expected request, burst, find, "
                     "get_or_create, close or quit")


# --------------------------------------------------------------------------- relocation


@attrs.frozen
class Step:
    seq: int


@attrs.frozen
class Seen:
    seq: int
    count: int
    node: str


@attrs.frozen
class Hold:
    tag: str


#: The session of each node of this process, by NodeRid (a moved Spot finds its new node).
SESSIONS: dict[str, Session] = {}


def session_of(ctx: zl.SpotContext) -> Session:
    return SESSIONS[str(ctx.ref.node_rid)]


class MoverAdapter:
    """Moves the handled sequence numbers; ``restore`` fails while ``fail_restore`` is set
    on the target node (an explicit failure before relay-ready: the move aborts)."""

    def capture(self, spot: MeshMover) -> bytes:
        return json.dumps(spot.seen).encode()

    def restore(self, spot: MeshMover, data: bytes) -> None:
        if session_of(spot.ctx).knobs.get("fail_restore"):
            raise RuntimeError("restore refused by the test (knob fail_restore)")
        spot.seen = list(json.loads(data))


@zl.instance_spot("meshmover", relocation=zl.PreserveStateWith(MoverAdapter()))
class MeshMover:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.seen: list[int] = []
        session = session_of(ctx)
        side_effect("factory", ctx.spot_id, ctx.generation, session.name, os.getpid(),
                    log=session.log)

    @zl.handler
    async def step(self, msg: Step) -> Seen:
        session = session_of(self.ctx)
        self.seen.append(msg.seq)
        side_effect("handle", self.ctx.spot_id, msg.seq, session.name, os.getpid(),
                    TURN_OPERATION.get(), log=session.log + ".handled")
        return Seen(msg.seq, len(self.seen), session.name)

    @zl.handler
    async def hold(self, msg: Hold) -> Seen:
        session = session_of(self.ctx)
        gate = session.gate
        session.holding.set()
        if gate is not None:
            await gate.wait()
        return Seen(-1, len(self.seen), session.name)


class NotifyingHold(list):  # type: ignore[type-arg]
    """A relocation hold that wakes ``wait_held`` on every message it takes in."""

    def __init__(self, changed: Changed) -> None:
        super().__init__()
        self.changed = changed

    def append(self, item: Any) -> None:
        super().append(item)
        self.changed.fire()


@attrs.define(eq=False)
class Changed:
    """A condition variable without a lock: ``wait`` until the next ``fire``."""

    event: trio.Event = attrs.Factory(trio.Event)

    def fire(self) -> None:
        self.event.set()
        self.event = trio.Event()

    async def until(self, condition: Any) -> None:
        while not condition():
            await self.event.wait()


#: The operation ID of the turn running in this task (set by ``_operation_turn``).
TURN_OPERATION: contextvars.ContextVar[int] = contextvars.ContextVar("turn_operation",
                                                                     default=0)
#: ``(node name, seq) -> operation ID`` of every ``Step`` a node of this process sent.
SENT: dict[tuple[str, int], int] = {}
_RUN_HANDLER = Incarnation._run_handler
_OPERATION_NUMBER = remote_calls._operation_number


async def _operation_turn(self: Incarnation, item: Any, *args: Any) -> Any:
    TURN_OPERATION.set(item.operation_id)
    return await _RUN_HANDLER(self, item, *args)


def _first_operation_number(rt: Any, call: Any) -> int:
    op = _OPERATION_NUMBER(rt, call)
    if isinstance(call.msg, Step):
        SENT.setdefault((rt.node_id, call.msg.seq), op)
    return op


def record_operations(on: bool) -> None:
    """Record operation IDs (``TURN_OPERATION``, ``SENT``) while sessions are open."""
    Incarnation._run_handler = _operation_turn if on else _RUN_HANDLER  # type: ignore[method-assign]
    remote_calls._operation_number = _first_operation_number if on else _OPERATION_NUMBER


#: How often this process stepped each ``(chart, event)`` (the charts' TRACE).
STEPS: collections.Counter[tuple[str, str]] = collections.Counter()


@attrs.define(eq=False)
class Session:
    """One node of this process and what the relocation commands drive in it."""

    node: zl.Node
    name: str
    log: str
    nursery: trio.Nursery
    stepped: Changed
    answers: dict[str, dict[str, Any] | None] = attrs.Factory(dict)
    answered: Changed = attrs.Factory(Changed)
    #: While not ``None`` (and not set), ``Hold`` turns wait on it.
    gate: trio.Event | None = None
    holding: trio.Event = attrs.Factory(trio.Event)
    knobs: dict[str, Any] = attrs.Factory(dict)
    seal_gate: trio.Event | None = None
    seal_gated: trio.Event = attrs.Factory(trio.Event)
    held: Changed = attrs.Factory(Changed)
    stream_stop: trio.Event = attrs.Factory(trio.Event)

    async def step(self, spot: str, seq: int, intent: bool, seconds: float) -> dict[str, Any]:
        call = self.node.client.request(spot, Step(seq), reply=Seen)
        if intent:
            call = call.instance_spot("meshmover")
        try:
            seen = await call.timeout(seconds)
        except zl.ZLinkError as error:
            return {**failure(error), "seq": seq}
        except Exception as exc:  # a runtime bug: report it instead of dying
            return {"ok": False, "error": type(exc).__name__, "message": repr(exc), "seq": seq}
        return {"ok": True, "seq": seen.seq, "count": seen.count, "node": seen.node}

    def wrap_holds(self) -> None:
        """Give every host that is being sealed a hold that reports what it takes in."""
        for host in self.node._rt.catalog.hosts.values():
            move = host.move
            if move is not None and not isinstance(move.hold, NotifyingHold):
                assert not move.hold, "sealed a moment ago: nothing is held yet"
                move.hold = NotifyingHold(self.held)

    def held_count(self, spot: str) -> int:
        host = self.node._rt.catalog.hosts.get(spot)
        return 0 if host is None or host.move is None else len(host.move.hold)

    def gate_seal(self) -> None:
        """Hold the store's SealRelocation (an instance attribute shadows the method)."""
        location = self.node._rt.store.location
        original = type(location).seal_relocation.__get__(location)
        gate = self.seal_gate = trio.Event()
        self.seal_gated = trio.Event()

        async def seal_relocation(*args: Any, **kwargs: Any) -> Any:
            self.seal_gated.set()
            await gate.wait()
            return await original(*args, **kwargs)

        location.seal_relocation = seal_relocation

    def ungate_seal(self) -> None:
        location = self.node._rt.store.location
        if "seal_relocation" in vars(location):
            del location.seal_relocation
        if self.seal_gate is not None:
            self.seal_gate.set()

    async def run(self, cmd: dict[str, Any]) -> dict[str, Any]:
        op = cmd["op"]
        node = self.node
        timeout = float(cmd.get("timeout", 10.0))
        spot = cmd.get("spot", "")
        if op == "step":
            return await self.step(spot, int(cmd["seq"]), bool(cmd.get("intent")), timeout)
        if op == "steps":
            seqs = [int(x) for x in cmd["seqs"]]
            results: dict[int, dict[str, Any]] = {}

            async def one(seq: int) -> None:
                results[seq] = await self.step(spot, seq, False, timeout)

            async with trio.open_nursery() as nursery:
                for seq in seqs:
                    nursery.start_soon(one, seq)
            return {"ok": True, "results": [results[seq] for seq in seqs]}
        if op == "stream":
            self.stream_stop = stop = trio.Event()
            out = []
            seq = int(cmd["first"])
            for _ in range(int(cmd.get("stop_after", 1000))):
                if stop.is_set():
                    break
                out.append(await self.step(spot, seq, False, timeout))
                if not out[-1]["ok"]:
                    break
                seq += 1
            return {"ok": True, "results": out}
        if op == "stop_stream":
            self.stream_stop.set()
            return {"ok": True}
        if op == "hold":
            try:
                seen = await node.client.request(spot, Hold("gate"), reply=Seen).timeout(timeout)
            except zl.ZLinkError as error:
                return failure(error)
            return {"ok": True, "node": seen.node}
        if op == "gate_close":
            self.gate, self.holding = trio.Event(), trio.Event()
            return {"ok": True}
        if op == "wait_holding":
            await self.holding.wait()
            return {"ok": True}
        if op == "gate_open":
            if self.gate is not None:
                self.gate.set()
            self.gate = None
            return {"ok": True}
        if op == "relocate":
            try:
                result = await node.relocate(spot, to=cmd.get("to"), timeout=timeout)
            except zl.ZLinkError as error:
                return failure(error)
            return {"ok": True, "outcome": result.outcome.value, "reason": result.reason,
                    "node_rid": str(result.ref.node_rid), "generation": result.ref.generation}
        if op == "drain":
            drained = await node.drain(timeout=timeout)
            return {"ok": True,
                    "moved": [[r.ref.spot_id, str(r.ref.node_rid)] for r in drained.moved],
                    "not_moved": [[r.ref.spot_id, r.outcome.value, r.reason]
                                  for r in drained.not_moved]}
        if op == "hosts":
            return {"ok": True, "hosts": sorted(node._rt.catalog.hosts)}
        if op == "operations":
            return {"ok": True, "operations": {str(seq): number for (name, seq), number
                                               in SENT.items() if name == self.name}}
        if op == "cached_route":
            route = node._rt.route_cache.get(spot, node._rt.now())
            return {"ok": True, "node_rid": None if route is None else str(route.node_rid)}
        if op == "knob":
            self.knobs[cmd["name"]] = cmd["value"]
            return {"ok": True}
        if op == "wait_step":
            key, count = (cmd["chart"], cmd["event"]), int(cmd.get("count", 1))
            await self.stepped.until(lambda: STEPS[key] >= count)
            return {"ok": True, "count": STEPS[key]}
        if op == "wait_held":
            count = int(cmd["count"])
            await self.held.until(lambda: self.held_count(spot) >= count)
            return {"ok": True, "held": self.held_count(spot)}
        if op == "seal_gate_close":
            self.gate_seal()
            return {"ok": True}
        if op == "wait_seal_gated":
            await self.seal_gated.wait()
            return {"ok": True}
        if op == "seal_gate_open":
            self.ungate_seal()
            return {"ok": True}
        if op == "spawn":
            tag = cmd["tag"]
            assert tag not in self.answers, f"tag {tag!r} spawned twice"
            self.answers[tag] = None

            async def background() -> None:
                self.answers[tag] = await self.call(cmd["cmd"])
                self.answered.fire()

            self.nursery.start_soon(background)
            return {"ok": True}
        if op == "join":
            tag = cmd["tag"]
            await self.answered.until(lambda: self.answers.get(tag) is not None)
            answer = self.answers.pop(tag)
            assert answer is not None
            return answer
        return await handle(node, cmd)

    async def call(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """One command's answer, bounded by ``answer_within`` (default 30 s)."""
        with trio.fail_after(float(cmd.get("answer_within", 30.0))):
            return await self.run(cmd)


RELOCATION_SPOTS = [MeshCounter, MeshRoom, MeshMover]
#: ``--spots``: the stable types a process may register.
BY_TYPE: dict[str, type] = {"meshcounter": MeshCounter, "meshroom": MeshRoom,
                            "meshmover": MeshMover}
#: Wakes ``wait_step`` (one per process: the charts' TRACE is process-wide).
STEPPED = Changed()
#: The sessions of this process being opened or open (the TRACE observer is installed
#: while there is one).
OPEN_SESSIONS: list[str] = []


def observe_step(chart: str, _state: str, event: str, _target: str) -> None:
    STEPS[(chart, event)] += 1
    if (chart, event) == ("PlannedRelocation", "seal"):
        for session in SESSIONS.values():
            session.wrap_holds()
    STEPPED.fire()


@asynccontextmanager
async def open_session(name: str, store: str, log: str, *, lane_items: int = 0,
                       spots: list[type] | None = None,
                       **options: Any) -> AsyncIterator[Session]:
    """Open node ``name`` with the mesh test Spots (``spots``: these instead; ``[]``: a
    client-only node); its session while the block runs.

    Several sessions may share one process (the in-process ``memory://`` runs of the
    relocation tests): the step counts start at zero when the first one opens.
    """
    if lane_items:
        options["application_lane"] = zl.LaneBounds(lane_items, 64 * 1024 * 1024)
    if not OPEN_SESSIONS:
        STEPS.clear()
        SENT.clear()
        charts.TRACE.append(observe_step)
        record_operations(True)
    OPEN_SESSIONS.append(name)
    rid = ""
    try:
        if spots == []:
            options["client_only"] = True
            options.pop("placement_weight", None)
        async with zl.open_node(name, store=store, mesh="world",
                                spots=RELOCATION_SPOTS if spots is None else spots,
                                **options) as node, trio.open_nursery() as nursery:
            rid = str(node.node_rid)
            session = SESSIONS[rid] = Session(node=node, name=name, log=log, nursery=nursery,
                                              stepped=STEPPED)
            try:
                yield session
            finally:
                session.ungate_seal()
                if session.gate is not None:
                    session.gate.set()
                nursery.cancel_scope.cancel()
    finally:  # after the node closed: its Spots may run until then
        SESSIONS.pop(rid, None)
        OPEN_SESSIONS.remove(name)
        if not OPEN_SESSIONS:
            charts.TRACE.remove(observe_step)
            record_operations(False)

async def lines(stream: trio.lowlevel.FdStream) -> Any:
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            buffer += chunk
        line, _, buffer = buffer.partition(b"\n")
        yield line


async def main(args: argparse.Namespace) -> None:
    global NODE, LOG
    NODE, LOG = args.node, args.log
    options: dict[str, Any] = {"lease": args.lease, "placement_weight": args.weight}
    if args.secret:
        options["secret"] = args.secret.encode()  # >= 32 bytes, shared by the mesh
    if args.default_timeout:
        options["default_timeout"] = args.default_timeout
    with trio.fail_after(args.timeout):
        async with trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
            commands = lines(stdin)
            if args.wait_go:  # imports done: open the node when the test says go
                print(json.dumps({"loaded": True, "pid": os.getpid()}), flush=True)
                if await anext(commands, None) is None:
                    return
            spots = (None if args.spots is None else [] if args.spots == "none"
                     else [BY_TYPE[name] for name in args.spots.split(",")])
            async with open_session(args.node, args.store, args.log,
                                    lane_items=args.lane_items, spots=spots,
                                    **options) as session:
                node = session.node
                print(json.dumps({"ready": True, "node_rid": str(node.node_rid),
                                  "pid": os.getpid(), "endpoint": node._rt.options.endpoint,
                                  "entry_spot_id": node.entry_spot_id}), flush=True)
                async for line in commands:
                    cmd = json.loads(line)
                    if cmd["op"] == "quit":
                        break
                    print(json.dumps(await session.call(cmd)), flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--node", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--lease", type=float, default=10.0)
    parser.add_argument("--secret", default="")
    parser.add_argument("--weight", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--lane-items", type=int, default=0)
    parser.add_argument("--default-timeout", type=float, default=0.0)
    parser.add_argument("--wait-go", type=int, default=0)
    parser.add_argument("--spots", default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    # Run as the module ``mesh_node_worker`` (its directory is ``sys.path[0]``), not as
    # ``__main__``: message classes travel by module-qualified name, and the in-process
    # nodes of the tests import this file as ``mesh_node_worker``.
    import mesh_node_worker

    trio.run(mesh_node_worker.main, mesh_node_worker.parse_args())
