"""``python -m zlink_trio.samples.demo`` — one node doing its job, told line by line.

The story, on one node with the ``memory://`` store:

1. a counter Spot is cold-activated by its first message (Instance intent),
   and later calls find it by ID;
2. a plain call to a Spot that does not exist is ``NotFound`` and writes nothing;
3. 100 concurrent ``get_or_create`` callers converge on one chat room: the
   factory runs once, one caller sees CREATED, 99 see EXISTING;
4. the room is closed and re-created: same ID, a larger generation;
5. an idle counter is evicted (``on_close(IDLE_EVICTED)``) and the next call
   with Instance intent activates a new incarnation.

Each step checks what it prints; exit status 0 means every step behaved as
``docs/concepts.md`` describes. No step sleeps to wait: it waits on events,
under a deadline.

``--nodes N`` (2..9) tells the same story across N node processes sharing one
temporary SQLite file, with calls crossing processes (:mod:`.demo_mesh`). The
Spots are the samples' own (:mod:`.spots`); like every sample, this module
imports only the public API. ``--render DIR`` also renders the lifecycle
statecharts, with their own command (``python -m statecharts render DIR``).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

import trio

import zlink_trio as zl
from zlink_trio.samples import demo_mesh, spots
from zlink_trio.samples.spots import Add, Counter, Events, Room, RoomSpec, Total

__all__ = ("main",)

DEADLINE = 20.0
#: The named in-process store the node runs on and the story reads after it closed.
STORE = "memory://demo"


class _Story(Events):
    """What the Spots report back to the demo: the room's factory runs, the eviction."""

    def __init__(self) -> None:
        self.room_factory_runs = 0
        self.evicted_counter = trio.Event()

    def factory_ran(self, ctx: zl.SpotContext) -> None:
        if ctx.stable_type == "room":
            self.room_factory_runs += 1

    def evicted(self, ctx: zl.SpotContext, total: int) -> None:
        _say(f"   {ctx.spot_id} (generation {ctx.generation}) was idle: "
             f"on_close({zl.CloseReason.IDLE_EVICTED.name}) with total {total}")
        self.evicted_counter.set()


def _say(line: str) -> None:
    print(line, flush=True)


def _check(ok: bool, rule: str) -> None:
    # Not ``assert``: the demo must check its story even under ``python -O``.
    if not ok:
        raise SystemExit(f"demo check failed: {rule}")


async def _cold_activation(node: zl.Node) -> None:
    _say("== 1. cold activation: the first message creates the counter")
    total = await node.client.request("counter-1", Add(2), reply=Total).instance_spot(
        "counter").timeout(5)
    ref = await node.spots.find("counter-1")
    _check(ref is not None and total == Total(2) and ref.node_rid == node.node_rid,
           "cold activation answers the first message, on this node")
    assert ref is not None  # for the type checker; _check already refused None
    _say(f"   request(Add(2)).instance_spot('counter') -> {total}; it now lives at "
         f"generation {ref.generation} on node {node.node_id!r}")
    for n in (3, 5):
        total = await node.client.request("counter-1", Add(n), reply=Total)
        _say(f"   request(Add({n})) by ID alone -> {total}")
    _check(total == Total(10), "later calls reach the same incarnation")


async def _not_found(node: zl.Node) -> None:
    _say("== 2. a plain call never creates: NotFound, nothing written")
    try:
        await node.client.send("nobody-home", Add(1))
    except zl.NotFound as error:
        _say(f"   send('nobody-home') -> NotFound: {error.message}")
    else:  # pragma: no cover - the demo checks the rule
        raise AssertionError("a send without Instance intent created a Spot")
    _check(await node.spots.find("nobody-home") is None, "NotFound writes nothing")


async def _convergence(node: zl.Node, story: _Story) -> int:
    _say("== 3. 100 concurrent get_or_create('lobby', 'room') callers")
    results: list[zl.CreateResult] = []

    async def caller(i: int) -> None:
        result = await node.spots.get_or_create("lobby", "room").request(
            RoomSpec(f"topic from caller {i}")).timeout(10)
        results.append(result)

    async with trio.open_nursery() as nursery:
        for i in range(100):
            nursery.start_soon(caller, i)
    created = [r for r in results if r.state is zl.CreateState.CREATED]
    existing = [r for r in results if r.state is zl.CreateState.EXISTING]
    generations = {r.ref.generation for r in results}
    _check(story.room_factory_runs == 1 and len(created) == 1 and len(existing) == 99,
           "100 callers converge on one factory run")
    _check(len(generations) == 1, "every caller sees one incarnation")
    _say(f"   factory runs: {story.room_factory_runs}; CREATED: {len(created)} "
         f"(reply {created[0].reply}); EXISTING: {len(existing)}; "
         f"one generation: {generations.pop()}")
    return created[0].ref.generation


async def _close_and_recreate(node: zl.Node, generation: int) -> None:
    _say("== 4. close the room, then create it again")
    ref = await node.spots.find("lobby")
    _check(ref is not None, "the room is Ready")
    assert ref is not None  # for the type checker; _check already refused None
    _say(f"   close({ref.spot_id!r} at generation {ref.generation}) -> "
         f"{await node.spots.close(ref)}")
    _say(f"   close again (that incarnation is gone) -> {await node.spots.close(ref)}")
    again = await node.spots.get_or_create("lobby", "room").request(RoomSpec("second life"))
    _check(again.state is zl.CreateState.CREATED and again.ref.generation > generation,
           "re-creation gets a larger generation")
    _say(f"   get_or_create -> {again.state.name} at generation {again.ref.generation} "
         f"(was {generation}); reply {again.reply}")


async def _idle_eviction(node: zl.Node, idle_timeout: float, story: _Story) -> None:
    _say(f"== 5. idle eviction after {idle_timeout} s without work")
    before = await node.spots.find("counter-1")
    _check(before is not None, "the counter is Ready before eviction")
    assert before is not None  # for the type checker
    await story.evicted_counter.wait()
    # The location is released right after on_close returns. A call with Instance
    # intent that races the release refreshes the route until it completes and then
    # activates a new generation (a Spot created again under its ID gets a larger
    # ObjectGeneration: docs/concepts.md, "Generations"), so the demo needs no sleep here.
    total = await node.client.request("counter-1", Add(1), reply=Total).instance_spot(
        "counter").timeout(5)
    after = await node.spots.find("counter-1")
    _check(after is not None and after.generation > before.generation and total == Total(1),
           "after eviction a new incarnation answers")
    assert after is not None  # for the type checker
    _say(f"   next call with Instance intent -> {total} from a new incarnation "
         f"(generation {before.generation} -> {after.generation})")


async def _story(idle_timeout: float) -> None:
    story = _Story()
    spots.events = story
    # The store is held open around the node, so the story can read it after the node closed.
    with trio.fail_after(DEADLINE):
        async with zl.open_store(STORE) as store:
            async with zl.open_node(
                "demo-node", store=STORE, mesh="world", spots=[Counter, Room],
                instance_idle_timeout=idle_timeout, idle_sweep_interval=idle_timeout / 4,
                # Ctrl-C (or SIGTERM) ends the story and stops the node cleanly.
                stop_on=(signal.SIGINT, signal.SIGTERM),
            ) as node:
                _say(f"node {node.node_id!r} is serving mesh 'world'; its Entry Spot is "
                     f"{node.entry_spot_id}")
                await _cold_activation(node)
                await _not_found(node)
                generation = await _convergence(node, story)
                await _close_and_recreate(node, generation)
                await _idle_eviction(node, idle_timeout, story)
                entry = node.entry_spot_id
            left = (await store.location.statistics(), await store.location.find(entry))
        _check(left[0].claims == left[0].ready == left[0].creating == 0 and left[1] is None,
               "node exit releases everything it owned")
        _say(f"node closed: its Spots were closed and released, its descriptor and Entry "
             f"Spot removed (store now: {left[0]}, Entry Spot record: {left[1]})")


def _render(directory: Path) -> None:
    # The statecharts are not part of the public API a sample may import: run their command.
    done = subprocess.run([sys.executable, "-m", "statecharts", "render", str(directory)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"demo: python -m statecharts render failed:\n{done.stderr}")
    _say(f"rendered the lifecycle statecharts into {directory}/ ({done.stdout.strip()}; "
         "one page per lifecycle, start at index.md)")


def main(argv: list[str] | None = None, *, clock: trio.abc.Clock | None = None) -> int:
    """Run the demo; returns the process exit status.

    ``clock`` is passed to :func:`trio.run` (the tests use a ``MockClock`` so the
    idle timeout passes without real waiting).
    """
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.samples.demo",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle-timeout", type=float, default=None,
                        help="InstanceSpotIdleTimeout of the demo nodes (default 0.5 s; "
                             "2 s with --nodes)")
    parser.add_argument("--nodes", type=int, default=1, choices=range(1, 10), metavar="N",
                        help="run the story across N node processes on one SQLite file "
                             "(default 1: one node in this process, memory:// store)")
    parser.add_argument("--render", type=Path, metavar="DIR",
                        help="also render the lifecycle statecharts into DIR")
    args = parser.parse_args(argv)
    if args.nodes > 1:
        demo_mesh.run(args.nodes, 2.0 if args.idle_timeout is None else args.idle_timeout)
    else:
        trio.run(_story, 0.5 if args.idle_timeout is None else args.idle_timeout,
                 clock=clock)
    if args.render is not None:
        _render(args.render)
    _say("demo finished: every step behaved as specified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
