"""One node process of the chaos harness: a server of counter Spots, or a caller.

``python node_worker.py --role server|caller --node NODE_ID --store URL --logs DIR
[--lease S] [--endpoint ws://127.0.0.1:PORT] [--spots N] [--callers K] [--deadline S]
[--pace S] [--lifetime S]``

Both roles open their node once: when it loses its lease (store paused, cut or flushed
past the lease, or a process stopped past it) the runtime rejoins the Mesh by itself
as a new lifecycle of the same NodeId (``on_lease_lost="rejoin"``); the worker only
opens it again when that fails for good (``NodeLost``) or the first start failed. Every
lifecycle prints one JSON line on stdout, ``{"event": "open", "node_rid": ..., "bound":
PORT, "pid": ..., "t": wall}``, and every lease loss ``{"event": "lease_lost", ...}``;
the driver reads them (a relay in front of a server follows its ``bound`` port). A
server stops on SIGTERM (``stop_on``): its Spots move to the other servers, then it
exits 0 (``{"event": "exit"}``). Commands on stdin, one JSON line each:
``{"op": "stop"}`` (callers finish their call and stop -- ``{"event": "calls_done"}`` once
every call is logged --, the node closes, exit 0) and
``{"op": "no_reopen"}`` (after the next lease loss the process exits instead) and
``{"op": "go"}`` (callers start calling: the driver sends it once every node is open)
and ``{"op": "slow", "spot": ID, "hold": S, "deadline": S}`` (one more call, ``NODE-slow-k``,
whose turn takes ``hold`` seconds longer: the driver freezes its owner during it).

* **server** (placement weight 1) serves ``ChaosCounter`` (Instance Spot
  ``chaoscounter``, ``PreserveStateWith``: its count moves with it). Every handled
  ``Add`` appends one JSON line to ``DIR/handlers-NODE-PID.jsonl`` -- ``spot, rid, node,
  node_rid, generation, start, end, lease_expires_at, value`` (the count after this
  one) -- with one ``O_APPEND`` write *before the handler returns its reply*, so an
  acknowledged request always has its handler line (the line survives SIGKILL: it is in
  the kernel once ``write`` returned).
* **caller** (placement weight 0: it owns nothing) runs K caller tasks; task ``i``
  sends ``Add(rid)`` with Instance intent to the Spots ``chaos-0 .. chaos-(N-1)`` in
  turn, each with a ``--deadline`` timeout, and appends one line per call to
  ``DIR/calls-NODE-PID.jsonl``: ``caller, rid, spot, start, end, deadline, outcome``
  (``"ok"``, the ``ZLinkError`` subclass name, or ``"untyped:<type>"``), ``owner``.
  Request IDs are ``NODE-i-seq``: unique per caller. ``--pace`` seconds pass between
  two calls of one task (the load's shape, not a wait for anything).

``--durable 1`` serves ``DurableCounter`` instead (the same stable type): its count is
durable state (``ctx.state``, docs/state.md), saved before the handler line; a save the
store refuses goes to ``DIR/refused-NODE-PID.jsonl`` and fails the call.
``--remind S`` (with ``--durable 1``) makes every fifth handled ``Add`` also set a
durable reminder ``r-RID`` due ``S`` seconds later (``ctx.remind``, docs/reminders.md);
``DIR/reminders-NODE-PID.jsonl`` gets a ``set`` line once the store acknowledged it (a
``set_failed`` line when it refused) and a ``rung`` line at each delivery, before the
handler returns. ``--lifetime`` bounds the whole process.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

import attrs
import trio

import zlink_trio as zl

#: A handler turn takes this long, so a turn of one owner that overlaps another
#: owner's turns is visible in the logs.
HANDLER_HOLD = 0.003
NODE = ""
HANDLER_LOG = ""
#: Where a durable counter logs a save the store refused (``--durable``).
REFUSED_LOG = ""
#: Where a durable counter logs the reminders it set and those delivered (``--remind``).
REMINDER_LOG = ""
#: Seconds after which an ``Add``'s reminder is due (0: none set).
REMIND = 0.0
#: The node the supervisor has open (``None`` while it reopens).
CURRENT: zl.Node | None = None
#: Every node this process opened, by NodeRid (a turn reads its own node's lease).
NODES: dict[str, zl.Node] = {}


@attrs.frozen
class Add:
    rid: str
    #: Extra seconds the turn takes (the driver's "slow" calls).
    hold: float = 0.0


@attrs.frozen
class Total:
    value: int
    node: str


def append(path: str, record: dict[str, Any]) -> None:
    """One ``O_APPEND`` write: lines of concurrent writers never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields}),
          flush=True)


class CountAdapter:
    """The counter's state on a move: its count."""

    def capture(self, spot: ChaosCounter) -> bytes:
        return str(spot.total).encode()

    def restore(self, spot: ChaosCounter, data: bytes) -> None:
        spot.total = int(data)


@zl.instance_spot("chaoscounter", relocation=zl.PreserveStateWith(CountAdapter()))
class ChaosCounter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0

    @zl.handler
    async def add(self, msg: Add) -> Total:
        start = time.time()
        self.total += 1
        await trio.sleep(HANDLER_HOLD + msg.hold)
        log_turn(self.ctx, msg, start, value=self.total)
        return Total(self.total, NODE)


def log_turn(ctx: zl.SpotContext, msg: Add, start: float, **fields: Any) -> None:
    """The handler line of one handled ``Add`` (before the reply; see the module doc)."""
    rid = str(ctx.ref.node_rid)
    node = NODES.get(rid)
    # The lease deadline this lifecycle holds now (renewals move it on; a lost or
    # frozen lease keeps its last one): a turn that ends after it is a zombie's.
    lease = node.statistics().lease_expires_at if node is not None else None
    append(HANDLER_LOG, {"spot": ctx.spot_id, "rid": msg.rid, "node": NODE, "node_rid": rid,
                         "generation": ctx.generation, "start": start, "end": time.time(),
                         "lease_expires_at": lease, **fields})


@attrs.frozen
class Count:
    """The durable state of :class:`DurableCounter`."""

    total: int = 0


@zl.instance_spot("chaoscounter", relocation=zl.RecreateOnRelocation(), state=Count)
class DurableCounter:
    """``--durable``: the counter keeps its count in the store (``ctx.state``), saved
    before the handler line is written and the reply returned, and reloaded by every
    incarnation; a save the store refuses (a zombie's) is logged to ``REFUSED_LOG`` and
    fails the call."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = (ctx.state.load() or Count()).total

    @zl.handler
    async def add(self, msg: Add) -> Total:
        start = time.time()
        self.total += 1
        await trio.sleep(HANDLER_HOLD + msg.hold)
        try:
            await self.ctx.state.save(Count(self.total))
        except zl.ZLinkError as exc:
            append(REFUSED_LOG, {"spot": self.ctx.spot_id, "rid": msg.rid, "node": NODE,
                                 "node_rid": str(self.ctx.ref.node_rid),
                                 "generation": self.ctx.generation, "start": start,
                                 "end": time.time(), "error": type(exc).__name__})
            raise
        if REMIND and msg.rid.rsplit("-", 1)[-1].isdigit() and \
                int(msg.rid.rsplit("-", 1)[-1]) % 5 == 0:
            await self._remind(msg.rid)
        log_turn(self.ctx, msg, start, value=self.total, version=self.ctx.state.version)
        return Total(self.total, NODE)

    async def _remind(self, rid: str) -> None:
        line = {"spot": self.ctx.spot_id, "name": f"r-{rid}", "node": NODE}
        try:
            reminder = await self.ctx.remind(f"r-{rid}", after=REMIND)
        except zl.ZLinkError as exc:  # not acknowledged: nothing to deliver
            append(REMINDER_LOG, {"event": "set_failed", **line, "t": time.time(),
                                  "error": type(exc).__name__})
            return
        append(REMINDER_LOG, {"event": "set", **line, "due": reminder.due, "t": time.time()})

    @zl.handler
    async def rung(self, msg: zl.Reminder) -> None:
        append(REMINDER_LOG, {"event": "rung", "spot": self.ctx.spot_id, "name": msg.name,
                              "due": msg.due, "node": NODE,
                              "generation": self.ctx.generation, "t": time.time()})


@attrs.define
class Supervisor:
    args: argparse.Namespace
    stopping: trio.Event = attrs.Factory(trio.Event)
    reopen: bool = True
    #: Set while a node is open; callers wait on it.
    ready: trio.Event = attrs.Factory(trio.Event)
    in_flight: int = 0
    #: Set whenever ``in_flight`` drops to zero.
    idle: trio.Event = attrs.Factory(trio.Event)
    go: trio.Event = attrs.Factory(trio.Event)
    slow: int = 0

    async def run_node(self) -> None:
        args = self.args
        global CURRENT
        while not self.stopping.is_set():
            options: dict[str, Any] = {
                "store": args.store, "mesh": "chaos",
                "spots": [DurableCounter if args.durable else ChaosCounter],
                "lease": args.lease, "default_timeout": max(args.deadline, 2.0),
                "instance_idle_timeout": 0,
                "placement_weight": 1.0 if args.role == "server" else 0.0}
            if args.role == "server":
                options["stop_on"] = (signal.SIGTERM,)
            if args.endpoint:
                options["endpoint"] = args.endpoint
            signalled = True  # unless the block's code below ran to its end
            try:
                async with zl.open_node(args.node, **options) as node:
                    await self.watch(node)
                    signalled = False
                    CURRENT = None
                    self.ready = trio.Event()
                    with trio.move_on_after(args.deadline + 1):
                        while self.in_flight:  # the callers' calls on it end first
                            await self.idle.wait()
            except zl.ZLinkError as error:  # store unreachable, or NodeLost: open again
                say("open_failed", node=args.node, error=type(error).__name__,
                    message=str(error)[:300])
                if not self.reopen:
                    return
                await trio.sleep(0.1)
                continue
            if signalled or not self.reopen:
                return  # SIGTERM ended the block (the node drained and closed)

    def opened(self, node: zl.Node) -> None:
        """One lifecycle serves: say so (its port) and let the callers call."""
        global CURRENT
        transport = node._rt.peers.transport
        bound = transport.endpoint.rsplit(":", 1)[1] if transport else "0"
        say("open", node=self.args.node, node_rid=str(node.node_rid), bound=int(bound))
        NODES[str(node.node_rid)] = node
        CURRENT = node
        self.ready.set()

    async def watch(self, node: zl.Node) -> None:
        """Report each lifecycle of ``node`` (the runtime rejoins after a lost lease)
        until the process is stopping, or a lease is lost and ``no_reopen`` was asked."""
        serving = None
        lost = None
        while not self.stopping.is_set():
            rid, state = node.node_rid, node.statistics().state
            if state == "serving" and rid != serving:
                if serving is not None and lost != serving:  # a loss too brief to see
                    lost = serving
                    say("lease_lost", node=self.args.node, node_rid=str(serving),
                        why="a new lifecycle serves")
                serving = rid
                self.opened(node)
            elif state in ("lease_lost", "stopped") and rid != lost:
                lost = rid
                say("lease_lost", node=self.args.node, node_rid=str(rid),
                    why=node._rt.lease_loss)
                if not self.reopen:
                    return
            with trio.move_on_after(0.02):
                await self.stopping.wait()

    async def call(self, node: zl.Node, spot: str, rid: str, deadline: float,
                   hold: float = 0.0) -> None:
        """One request ``Add(rid)`` to ``spot``, logged when it ended."""
        start = time.time()
        owner = None
        self.in_flight += 1
        try:
            total = await node.client.request(spot, Add(rid, hold), reply=Total).instance_spot(
                "chaoscounter").timeout(deadline)
            outcome, owner = "ok", total.node
        except zl.ZLinkError as error:
            outcome = type(error).__name__
        except Exception as exc:  # a runtime bug: the checker reports it
            outcome = f"untyped:{type(exc).__name__}:{exc!r}"[:300]
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self.idle.set()
                self.idle = trio.Event()
        append(os.path.join(self.args.logs, f"calls-{self.args.node}-{os.getpid()}.jsonl"),
               {"caller": self.args.node, "rid": rid, "spot": spot, "start": start,
                "end": time.time(), "deadline": deadline, "outcome": outcome, "owner": owner})

    async def call_loop(self, index: int) -> None:
        args = self.args
        seq = 0
        await self.go.wait()
        while not self.stopping.is_set():
            node = CURRENT
            if node is None:
                with trio.move_on_after(0.05):
                    await self.ready.wait()
                continue
            await self.call(node, f"chaos-{(index + seq) % args.spots}",
                            f"{args.node}-{index}-{seq}", args.deadline)
            seq += 1
            await trio.sleep(args.pace)

    async def commands(self, nursery: trio.Nursery) -> None:
        async with trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
            buffer = b""
            while True:
                chunk = await stdin.receive_some(4096)
                if not chunk:
                    break  # the driver went away: stop
                buffer += chunk
                while b"\n" in buffer:
                    line, _, buffer = buffer.partition(b"\n")
                    cmd = json.loads(line)
                    op = cmd["op"]
                    if op == "go":
                        self.go.set()
                    elif op == "slow" and CURRENT is not None:
                        self.slow += 1
                        nursery.start_soon(self.call, CURRENT, cmd["spot"],
                                           f"{self.args.node}-slow-{self.slow}",
                                           float(cmd["deadline"]), float(cmd["hold"]))
                    elif op == "no_reopen":
                        self.reopen = False
                    elif op == "stop":
                        self.go.set()
                        self.stopping.set()
                        return
        self.go.set()
        self.stopping.set()


async def main(args: argparse.Namespace) -> None:
    global NODE, HANDLER_LOG, REFUSED_LOG, REMINDER_LOG, REMIND
    NODE = args.node
    REMIND = args.remind
    REMINDER_LOG = os.path.join(args.logs, f"reminders-{args.node}-{os.getpid()}.jsonl")
    HANDLER_LOG = os.path.join(args.logs, f"handlers-{args.node}-{os.getpid()}.jsonl")
    REFUSED_LOG = os.path.join(args.logs, f"refused-{args.node}-{os.getpid()}.jsonl")
    supervisor = Supervisor(args)
    with trio.fail_after(args.lifetime):
        async with trio.open_nursery() as nursery:
            if args.role == "caller":
                async with trio.open_nursery() as callers:
                    nursery.start_soon(supervisor.commands, callers)
                    callers.start_soon(supervisor.run_node)
                    async with trio.open_nursery() as loops:
                        for index in range(args.callers):
                            loops.start_soon(supervisor.call_loop, index)
                    with trio.move_on_after(args.deadline + 1):
                        while supervisor.in_flight:  # a "slow" call of the driver's
                            await supervisor.idle.wait()
                    say("calls_done", node=args.node)  # every call is logged
            else:
                nursery.start_soon(supervisor.commands, nursery)
                await supervisor.run_node()
            nursery.cancel_scope.cancel()
    say("exit", node=args.node)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--role", choices=["server", "caller"], required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--logs", required=True)
    parser.add_argument("--lease", type=float, default=1.5)
    parser.add_argument("--endpoint", default="")
    parser.add_argument("--spots", type=int, default=12)
    parser.add_argument("--callers", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=2.0)
    parser.add_argument("--pace", type=float, default=0.02)
    parser.add_argument("--lifetime", type=float, default=120.0)
    parser.add_argument("--durable", type=int, default=0,
                        help="1: serve DurableCounter (the count in ctx.state)")
    parser.add_argument("--remind", type=float, default=0.0,
                        help="with --durable 1: every fifth Add sets a reminder due this "
                             "many seconds later")
    return parser.parse_args(argv)


if __name__ == "__main__":
    # Imported as ``node_worker`` (not ``__main__``): message classes travel by
    # module-qualified name, and servers and callers must agree on it.
    import node_worker

    trio.run(node_worker.main, node_worker.parse_args())
