"""``python -m zlink_trio.demo`` — what the foundation can show today.

The node runtime (``zl.open_node``) arrives with issue [2/4]; until then the
demo shows the parts it will be built on: it compiles every lifecycle chart,
walks a Spot's authority through create → close → re-create the way the
runtime will (and shows a transition the chart refuses), runs the in-memory
Location Store through the same transactions, and renders the statecharts into
Markdown pages you can read.

Exit status 0 means every step behaved as the charts and the store contract say.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import trio

import statecharts
from statecharts import render
from zlink_trio.core.descriptor import NodeDescriptor
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id, new_uuid4
from zlink_trio.core.placement import Role
from zlink_trio.store import AuthorityExists, open_store

__all__ = ("main",)


def _say(line: str) -> None:
    print(line, flush=True)


def _show_charts() -> None:
    _say("== lifecycle charts (statecharts/, compiled once into transition tables)")
    for chart in statecharts.ALL_CHARTS:
        table = statecharts.compile(chart)
        _say(
            f"   {table.name:<18} {len(table.states):>2} states, "
            f"{len(table.transitions):>2} transitions, initial {table.initial!r}"
        )


def _walk_authority() -> None:
    _say("== a Spot's authority, stepped through the compiled SpotAuthority table")
    table = statecharts.compile(statecharts.SpotAuthority)
    state = table.initial
    for event in ("reserve", "commit_ready", "begin_close", "release", "reserve"):
        target = table.step(state, event)
        _say(f"   {state:<9} --{event}--> {target}")
        state = target
    try:
        table.step(state, "begin_close")
    except statecharts.UndefinedTransition as refused:
        _say(f"   refused: {refused}")


async def _walk_store() -> None:
    _say("== the memory:// Location Store, driven through its transactions")
    async with open_store("memory://") as store:
        location = store.location
        descriptor = NodeDescriptor(
            mesh="world",
            node_rid=NodeRid.generate(),
            node_id="node-a",
            endpoint="ws://127.0.0.1:0",
            roles=frozenset({Role.OBJECT_SERVER}),
            served_types={"room": SpotKind.USER},
            capacity=100,
            entry_spot_id=new_entry_spot_id("node-a"),
        )
        claim = await location.new_claim(descriptor, now=0.0, lease=10.0)
        _say(f"   node-a claimed lifecycle {claim.lifecycle_generation}, "
             f"Entry Spot {descriptor.entry_spot_id}")
        generations = []
        for _round in range(2):
            fence = await location.reserve("r-1", kind=SpotKind.USER, stable_type="room",
                                           mesh="world", owner=claim.owner(), now=1.0)
            ready = await location.commit_ready(fence, now=1.0)
            _say(f"   'r-1' {ready.state.value} at generation {ready.object_generation}")
            try:
                await location.reserve("r-1", kind=SpotKind.USER, stable_type="room",
                                       mesh="world", owner=claim.owner(), now=1.0)
            except AuthorityExists as exists:
                _say(f"   a second Reserve of 'r-1' is refused: it is {exists.current.state.value}")
            closing = await location.begin_close("r-1", object_generation=ready.object_generation,
                                                 owner=claim.owner(), now=2.0)
            assert closing is not None
            await location.release(closing.fence())
            _say(f"   'r-1' closed; find('r-1') -> {await location.find('r-1')}")
            generations.append(ready.object_generation)
        assert generations[1] > generations[0]
        _say(f"   re-created with a larger generation: {generations[0]} -> {generations[1]}")
        removed = await location.remove("world", descriptor.node_rid, claim.lifecycle_generation)
        _say(f"   node-a removed its descriptor and Entry claim: {removed}")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.demo", description=__doc__)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("build/statecharts"),
        help="where to render the statechart pages (default: build/statecharts)",
    )
    args = parser.parse_args(argv)

    _say(f"zlink_trio demo — example ids: user Spot {new_uuid4()!r}, "
         f"entry Spot {new_entry_spot_id('node-a')!r}, kinds {[k.name for k in SpotKind][1:]}")
    _show_charts()
    _walk_authority()
    trio.run(_walk_store)

    written = render.write(args.out)
    _say(f"== rendered {len(written)} statechart pages into {args.out}/")
    _say(f"   start at {args.out / 'index.md'} (the committed copy is docs/statecharts/index.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
