"""``python -m zlink_trio.samples.demo --nodes 3`` -- the demo's story across node processes.

Theory of operation
-------------------
The driver (this module, run by :func:`zlink_trio.samples.demo.main`) makes a
temporary directory with one SQLite file, starts one node process per name
(``python -m zlink_trio.samples.demo_mesh --serve NAME ...``), each running the
sample Spots of :mod:`.spots`, and tells the same story as the one-node demo,
with every call crossing processes where placement put the Spot:

1. a counter is cold-activated by a message sent from one node; placement picks
   its owner; the other nodes then reach it by ID alone;
2. a plain call to a Spot that does not exist is ``NotFound`` and writes nothing;
3. 100 concurrent ``get_or_create`` callers spread over every node converge on one
   room: the factory runs once (one line in the shared event log), one CREATED;
4. a node that does not own the room closes it (command 48 to the owner); it is
   re-created at a larger generation;
5. the idle counter is evicted by its owner and the next call with Instance intent
   activates a new incarnation.

A node process answers one JSON line per command line on stdin (:func:`_serve`), and
its Spots append ``factory``/``evicted`` lines to the shared event log (:class:`_Log`,
the only way to see side effects of other processes). The driver checks every step,
and kills its processes and deletes the directory in ``finally`` -- on failure and on
Ctrl-C too (children ignore SIGINT, so the driver alone decides how they end).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

import zlink_trio as zl
from zlink_trio.samples import spots
from zlink_trio.samples.spots import Add, Counter, Events, Room, RoomSpec, Total, Welcome

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ("run",)

#: The whole story's deadline, one command's answer, a process's start-up.
DEADLINE = 60.0
CALL_DEADLINE = 20.0
POLL = 0.05


class _Log(Events):
    """A node process's Spots report to the shared event log: ``kind spot generation node``."""

    def __init__(self, path: str, node: str) -> None:
        self.path, self.node = path, node

    def _line(self, kind: str, ctx: zl.SpotContext) -> None:
        # One O_APPEND write per line: lines of concurrent processes never interleave.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{kind} {ctx.spot_id} {ctx.generation} {self.node}\n".encode())
        finally:
            os.close(fd)

    def factory_ran(self, ctx: zl.SpotContext) -> None:
        self._line("factory", ctx)

    def evicted(self, ctx: zl.SpotContext, total: int) -> None:
        self._line("evicted", ctx)


# -- a node process ---------------------------------------------------------------------


def _ref(ref: zl.SpotRef | None) -> dict[str, Any] | None:
    return None if ref is None else {"generation": ref.generation, "node_rid": str(ref.node_rid)}


async def _command(node: zl.Node, cmd: dict[str, Any]) -> dict[str, Any]:
    op, spot = cmd["op"], str(cmd.get("spot", ""))
    try:
        if op == "request":
            call = node.client.request(spot, Add(int(cmd["n"])), reply=Total)
            total = await (call.instance_spot("counter") if cmd.get("intent") else call)
            return {"value": total.value}
        if op == "send":
            await node.client.send(spot, Add(int(cmd["n"])))
            return {}
        if op == "find":
            return {"ref": _ref(await node.spots.find(spot))}
        if op == "get_or_create":
            results: list[dict[str, Any]] = []

            async def one(i: int) -> None:
                try:
                    result = await node.spots.get_or_create(spot, "room").request(
                        RoomSpec(f"topic from {node.node_id} caller {i}"))
                except zl.ZLinkError as error:  # reported: the driver's check names it
                    results.append({"state": type(error).__name__, "message": error.message})
                    return
                reply = result.reply.text if isinstance(result.reply, Welcome) else None
                results.append({"state": result.state.name, "ref": _ref(result.ref),
                                "reply": reply})

            async with trio.open_nursery() as nursery:
                for i in range(int(cmd.get("count", 1))):
                    nursery.start_soon(one, i)
            return {"results": results}
        if op == "close":
            found = await node.spots.find(spot)
            closed = [await node.spots.close(found) for _ in range(2)] if found else []
            return {"closed": closed, "ref": _ref(found)}
    except zl.ZLinkError as error:
        return {"error": type(error).__name__, "message": error.message}
    raise SystemExit(f"demo node: unknown command {op!r}")


async def _serve(name: str, store: str, idle_timeout: float) -> None:
    """Run one node; answer commands from stdin until ``quit`` or end of input."""
    with trio.fail_after(10 * DEADLINE):  # never outlive a lost driver for long
        async with zl.open_node(
                name, store=store, mesh="world", spots=[Counter, Room],
                instance_idle_timeout=idle_timeout, idle_sweep_interval=idle_timeout / 4,
                default_timeout=CALL_DEADLINE) as node:
            print(json.dumps({"node_rid": str(node.node_rid),
                              "endpoint": node.statistics().endpoint}), flush=True)
            async with trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
                buffer = b""
                while True:
                    while b"\n" not in buffer:
                        chunk = await stdin.receive_some(65536)
                        if not chunk:
                            return
                        buffer += chunk
                    line, _, buffer = buffer.partition(b"\n")
                    cmd = json.loads(line)
                    if cmd["op"] == "quit":
                        return
                    print(json.dumps(await _command(node, cmd)), flush=True)


# -- the driver -------------------------------------------------------------------------


@attrs.define
class _Proc:
    name: str
    proc: trio.Process
    rid: str = ""
    buffer: bytes = b""

    async def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with trio.fail_after(CALL_DEADLINE + 10):
            while b"\n" not in self.buffer:
                chunk = await self.proc.stdout.receive_some(65536)
                if not chunk:
                    raise SystemExit(f"demo node {self.name} exited unexpectedly "
                                     f"(status {self.proc.returncode}); see its stderr above")
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return dict(json.loads(line))

    async def call(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(json.dumps(cmd).encode() + b"\n")
        return await self.line()


@asynccontextmanager
async def _nodes(names: list[str], store: str, events: Path,
                 idle_timeout: float) -> AsyncIterator[list[_Proc]]:
    procs: list[_Proc] = []
    try:
        for name in names:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "zlink_trio.samples.demo_mesh", "--serve", name,
                 "--store", store, "--events", str(events), "--idle-timeout", str(idle_timeout)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            procs.append(_Proc(name, process))
        for proc in procs:
            proc.rid = (await proc.line())["node_rid"]
        yield procs
        for proc in procs:  # a clean exit: each node closes its Spots and its claim
            assert proc.proc.stdin is not None
            await proc.proc.stdin.send_all(b'{"op": "quit"}\n')
        with trio.fail_after(CALL_DEADLINE):
            for proc in procs:
                await proc.proc.wait()
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            for proc in procs:
                if proc.proc.returncode is None:
                    proc.proc.kill()
                await proc.proc.wait()
                for stream in (proc.proc.stdin, proc.proc.stdout):
                    if stream is not None:
                        await stream.aclose()


def _say(line: str) -> None:
    print(line, flush=True)


def _check(ok: bool, rule: str) -> None:
    if not ok:
        raise SystemExit(f"demo check failed: {rule}")


def _log(events: Path, kind: str, spot: str) -> list[tuple[int, str]]:
    lines = events.read_text().splitlines() if events.exists() else []
    return [(int(g), n) for k, s, g, n in (x.split(" ") for x in lines) if (k, s) == (kind, spot)]


class _Story:
    def __init__(self, procs: list[_Proc], events: Path) -> None:
        self.procs, self.events = procs, events
        self.by_rid = {p.rid: p.name for p in procs}

    async def owner(self, spot: str) -> tuple[str, int]:
        ref = (await self.procs[0].call(op="find", spot=spot))["ref"]
        _check(ref is not None, f"{spot} is Ready")
        return self.by_rid[ref["node_rid"]], int(ref["generation"])

    async def cold_activation(self) -> int:
        a, b, c = self.procs[0], self.procs[1 % len(self.procs)], self.procs[-1]
        _say(f"== 1. cold activation: {b.name} sends the first message to 'counter-1'")
        first = await b.call(op="request", spot="counter-1", n=2, intent=True)
        owner, generation = await self.owner("counter-1")
        _check(first.get("value") == 2 and _log(self.events, "factory", "counter-1") == [
            (generation, owner)], "cold activation answers the first message; the factory "
               "ran once, on the owner")
        _say(f"   {b.name}: request(Add(2)).instance_spot('counter') -> {first['value']}; "
             f"placement put it on {owner} (generation {generation})")
        for proc, n in ((c, 3), (a, 5)):
            total = await proc.call(op="request", spot="counter-1", n=n)
            where = "locally" if owner == proc.name else f"across to {owner}"
            _say(f"   {proc.name}: request(Add({n})) by ID alone -> {total['value']} ({where})")
        _check(total.get("value") == 10 and _log(self.events, "factory", "counter-1") == [
            (generation, owner)], "later calls reach the same incarnation; one factory run")
        return generation

    async def not_found(self) -> None:
        proc = self.procs[-1]
        _say("== 2. a plain call never creates: NotFound, nothing written")
        answer = await proc.call(op="send", spot="nobody-home", n=1)
        _check(answer.get("error") == "NotFound", "send without Instance intent is NotFound")
        _say(f"   {proc.name}: send('nobody-home') -> NotFound: {answer['message']}")
        found = await self.procs[0].call(op="find", spot="nobody-home")
        _check(found["ref"] is None, "NotFound writes nothing")

    async def convergence(self) -> int:
        _say("== 3. 100 concurrent get_or_create('lobby', 'room') callers over "
             f"{len(self.procs)} nodes")
        answers: list[dict[str, Any]] = []

        async def callers(proc: _Proc, count: int) -> None:
            answers.extend((await proc.call(op="get_or_create", spot="lobby", count=count))
                           ["results"])

        async with trio.open_nursery() as nursery:
            for i, proc in enumerate(self.procs):
                count = 100 // len(self.procs) + (i < 100 % len(self.procs))
                nursery.start_soon(callers, proc, count)
        failed = [r for r in answers if "message" in r]
        _check(not failed, f"every get_or_create succeeds; {len(failed)} failed, e.g. "
               f"{failed[:1]}")
        created = [r for r in answers if r["state"] == "CREATED"]
        runs = _log(self.events, "factory", "lobby")
        generations = {r["ref"]["generation"] for r in answers}
        _check(len(answers) == 100 and len(created) == 1 and len(runs) == 1,
               "100 callers converge on one factory run")
        _check(len(generations) == 1, "every caller sees one incarnation")
        owner, generation = await self.owner("lobby")
        _say(f"   factory runs (all processes): {len(runs)}, on {runs[0][1]}; CREATED: 1 "
             f"(reply {created[0]['reply']!r}); EXISTING: {len(answers) - 1}; "
             f"one generation: {generation}, owned by {owner}")
        return generation

    async def close_and_recreate(self, generation: int) -> None:
        owner, _ = await self.owner("lobby")
        closer = next(p for p in self.procs if p.name != owner)
        _say(f"== 4. {closer.name} closes the room owned by {owner}, then re-creates it")
        closed = (await closer.call(op="close", spot="lobby"))["closed"]
        _check(closed == [True, False], "the first close closes, the second finds it gone")
        _say(f"   close(lobby at generation {generation}) -> True; close again -> False")
        again = (await closer.call(op="get_or_create", spot="lobby"))["results"][0]
        new_owner, new_generation = await self.owner("lobby")
        _check(again["state"] == "CREATED" and new_generation > generation,
               "re-creation gets a larger generation")
        _say(f"   get_or_create -> CREATED at generation {new_generation} (was {generation}) "
             f"on {new_owner}; reply {again['reply']!r}")

    async def idle_eviction(self, generation: int, idle_timeout: float) -> None:
        _say(f"== 5. idle eviction after {idle_timeout} s without work")
        with trio.fail_after(DEADLINE):
            for _ in range(int(DEADLINE / POLL) + 1):
                if evicted := _log(self.events, "evicted", "counter-1"):
                    break
                await trio.sleep(POLL)  # another process's log: no event crosses processes
        _say(f"   counter-1 (generation {evicted[0][0]}) was idle on {evicted[0][1]}: "
             "on_close(IDLE_EVICTED)")
        proc = next(p for p in self.procs if p.name != evicted[0][1])
        total = await proc.call(op="request", spot="counter-1", n=1, intent=True)
        if total.get("error") == "StaleRoute":
            # A cached route to an owner that released the Spot ends the call StaleRoute
            # (not run, never resent by the framework); a new call re-resolves
            # (docs/mesh.md, "Calls to another node").
            _say(f"   {proc.name}: its cached route still named {evicted[0][1]} -> StaleRoute: "
                 f"{total['message']}")
            total = await proc.call(op="request", spot="counter-1", n=1, intent=True)
        owner, after = await self.owner("counter-1")
        _check(total.get("value") == 1 and after > generation,
               "after eviction a new incarnation answers")
        _say(f"   {proc.name}: next call with Instance intent -> {total['value']} from a new "
             f"incarnation on {owner} (generation {generation} -> {after})")


async def _story(names: list[str], idle_timeout: float, workdir: Path) -> None:
    store = f"sqlite://{workdir / 'demo.db'}"
    events = workdir / "events.log"
    with trio.fail_after(DEADLINE):
        async with _nodes(names, store, events, idle_timeout) as procs:
            _say(f"{len(procs)} node processes share {store} and serve mesh 'world': "
                 + ", ".join(f"{p.name} (pid {p.proc.pid})" for p in procs))
            story = _Story(procs, events)
            generation = await story.cold_activation()
            await story.not_found()
            room_generation = await story.convergence()
            await story.close_and_recreate(room_generation)
            await story.idle_eviction(generation, idle_timeout)
        async with zl.open_store(store) as opened:
            stats = await opened.location.statistics()
        _check(stats.claims == stats.ready == stats.creating == 0,
               "every node's exit releases everything it owned")
        _say(f"all nodes closed: their Spots were closed and released, their claims removed "
             f"(store now: {stats})")


def run(nodes: int, idle_timeout: float) -> None:
    """Tell the story over ``nodes`` processes on one temporary SQLite file."""
    names = [f"node-{chr(ord('a') + i)}" for i in range(nodes)]
    with tempfile.TemporaryDirectory(prefix="zlink-demo-") as workdir:
        trio.run(_story, names, idle_timeout, Path(workdir))


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.samples.demo_mesh",
                                     description="one node process of the 3-node demo")
    parser.add_argument("--serve", required=True, metavar="NODE_ID")
    parser.add_argument("--store", required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--idle-timeout", type=float, default=2.0)
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    spots.events = _Log(args.events, args.serve)
    trio.run(_serve, args.serve, args.store, args.idle_timeout)


if __name__ == "__main__":
    _main()
