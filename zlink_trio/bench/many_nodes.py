"""Many nodes on one store: ``python -m zlink_trio.bench.many_nodes``.

Theory of operation
-------------------
What a node costs the store and itself as the Mesh grows: at rest, and with its nodes
linked and in use. For each count of :data:`NODES` (2, 20 and 200 by default), in turn,
in one process of its own (:func:`measure_process` starts it fresh), each mode runs that
many nodes on an in-process ``memory://`` store of its own, with the store clock on
Trio's, in its own ``trio.run`` on ``trio.testing.MockClock(autojump_threshold=0)``: time
jumps whenever every node waits, so seconds of rest take only the CPU the nodes spend,
and process CPU time (``time.process_time()``) is what each figure costs.

``many_nodes_at_rest``: the nodes without links (a node at rest opens none). After they
started and settled (:data:`SETTLE`), it counts, over :data:`WINDOW` seconds of rest:

- ``store_ops_per_node_per_s``: every store call of every node (lease renewals,
  descriptor reads, the reminder scans), per node and per second of the window, and
  ``store_ops_by_method`` the same by store method;
- ``cpu_ms_per_node_per_s``: the process's CPU time per node and per second of the window
  (one process runs them all, so this is what one node at rest costs its own process);
- ``start_s``: the wall time to start every node.

``many_nodes_mesh``: the nodes linked, over the in-process link double (the transport's
memory network, ``zlink_trio.transport._memory``: the same websocket links, handshake and
peer checks over memory streams, no socket, so the mock clock still holds). Node
``bench-mesh-0``, the caller, does everything; once every node started and settled
(:data:`SETTLE`):

- ``cold_activation``: the caller first activates :data:`WARMUP_PER_NODE` times N
  ``Echo`` Instance Spots of distinct IDs (its first request with
  ``.instance_spot("bench-echo")``), so that placement spread them and the caller linked
  with most nodes (``warmup_activations``; ``warmup_nodes_reached``: the distinct nodes
  they landed on; ``links_open``: the distinct other nodes the caller has a link with
  after, at most N - 1). Then it activates K more (``--calls``, :data:`CALLS`), one at a
  time, and reports ``activations`` (K), ``answered`` (the replies that echoed their
  request), ``cpu_us_per_activation`` (the process's CPU, every node's included, per
  activation: nothing waits on time over the link double, so no mock time passes and no
  background work runs meanwhile),
  ``store_calls_per_activation`` and ``store_calls_by_method`` (every store call of every
  node but the reminder tasks', per activation: ``bench.stores.count_store_calls``),
  ``placed_on_caller`` (the fraction of the K the caller placed on itself: about 1/N by
  rendezvous hashing) and ``nodes_placed_on`` (the distinct nodes the K landed on).
  Placement decides on a fresh read of every live descriptor claim whenever it places a
  Spot on another node (``runtime.coordinators.placement``), so about (N-1)/N of the
  activations read N claims and rank N candidates (``location.descriptors`` in the
  breakdown): the store calls per activation stay flat, but its CPU grows with N for that
  reason, each such activation building N placement candidates and ranking them by
  rendezvous hashing more than once.
- ``warm_call``: K requests (``node.client.request(id, Ping(i), reply=Pong)``) from the
  caller to Spots of the cold activations that are active on *other* nodes, in turn, so
  every figure is a remote call whatever N, after one unmeasured request to each of them
  (the reply of an activation placed on another node does not fill the caller's route
  cache, so its first request finds the owner in the store) (``calls``, ``answered``,
  ``nodes_called``: the distinct nodes they went to, ``cpu_us_per_call``,
  ``store_calls_per_call`` and ``store_calls_by_method``: expected none, the route is
  cached). With one node there is no other to call: ``calls`` is 0 and the figures
  ``null``.
- ``join_leave``: one more node (``bench-mesh-joiner``) starts, then stops. A node holds
  no membership of its own: the Mesh is the live descriptor claims in the store, and a
  node learns of a join or a leave when it next reads them. So a node *sees* the joiner
  at the first descriptor read of its own that returns the joiner's claim, and sees it
  gone at the first read after the stop began that does not. The reads are watched
  through ``node.inspection.wrap_store`` (the test hook every later store call of the
  node goes through; nothing private is read). At rest, every node's reminder task reads
  them once per ``placement_max_age`` (1 s by default) to share out the reminder
  partitions, so each node sees a join or a leave within that time whatever N. Nodes,
  joiner and its stop all take no mock time, so every node's reads are in phase and the
  join and the leave each fall just after one: the figures are that worst case. Placement
  itself
  reads them again at its next placement on another node (and reuses its last read for
  up to ``placement_max_age`` only when that read places the Spot on the placing node),
  so a node at rest places a Spot on the joiner from its very next placement.
  ``join_seen_s``: mock seconds from the joiner's start (its ``open_node`` called) until
  every one of the N nodes saw it; ``leave_seen_s``: from its stop (its ``async with``
  left: it closes, then removes its claim) until every node saw it gone;
  ``join_seen_by`` and ``leave_seen_by``: how many of the N did, within
  :data:`MEMBERSHIP_DEADLINE` (a time is ``null`` when not all did).

A flat row means each node, activation or call costs the same whatever the Mesh's size;
why a row is not flat is said above. Nothing here is a test: no figure is asserted.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Final

import trio
import trio.testing

import zlink_trio as zl
from zlink_trio.bench.child import child_figures
from zlink_trio.bench.local import Echo, Ping, Pong
from zlink_trio.bench.output import print_figures
from zlink_trio.bench.stores import count_store_calls
from zlink_trio.store import open_store
from zlink_trio.transport._memory import NETWORK, MemoryNetwork

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.store import Store

__all__ = ("CALLS", "NODES", "WINDOW", "main", "measure_at_rest", "measure_mesh",
           "measure_process")

#: The Mesh sizes measured by default.
NODES: Final = (2, 20, 200)
#: Seconds of rest counted (mock time).
WINDOW: Final = 10.0
#: Seconds of rest before counting: every node past its startup reads.
SETTLE: Final = 5.0
#: Cold activations measured, then warm calls measured, per Mesh size (``--calls``).
CALLS: Final = 1_000
#: Warm-up activations per node of the Mesh before the cold activations are measured:
#: three per node land on about 95% of the nodes (rendezvous placement is uniform).
WARMUP_PER_NODE: Final = 3
#: Deadline of one request of the mesh figures.
CALL_TIMEOUT: Final = 60.0
#: Mock seconds given to every node to see the joiner, then to see it gone.
MEMBERSHIP_DEADLINE: Final = 60.0
#: Mock seconds one Mesh size may take in all (its mock time is a few seconds).
MESH_DEADLINE: Final = 600.0
#: Deadline of the whole child process.
CHILD_TIMEOUT: Final = 1_200.0
#: The Mesh of the linked nodes, and the NodeId of the node that joins and leaves it.
_MESH: Final = "bench-mesh"
_JOINER: Final = "bench-mesh-joiner"


async def measure_at_rest(nodes: int, window: float = WINDOW) -> dict[str, object]:
    """The ``many_nodes_at_rest`` figures for ``nodes`` nodes; call it in a run on
    ``MockClock``."""
    url = f"memory://bench-many-{nodes}"
    injected = zl.InjectedOptions(clock=trio.current_time)
    started = time.perf_counter()
    async with AsyncExitStack() as stack:
        view = await stack.enter_async_context(open_store(url))
        for i in range(nodes):
            await stack.enter_async_context(zl.open_node(
                f"bench-many-{i}", store=url, mesh="bench-many", spots=[Echo], listen=None,
                injected=injected))
        start_s = time.perf_counter() - started
        await trio.sleep(SETTLE)
        with count_store_calls(view, background=True) as calls:
            cpu = time.process_time()
            await trio.sleep(window)
            cpu = time.process_time() - cpu
    per = nodes * window
    return {"store_ops_per_node_per_s": round(sum(calls.values()) / per, 3),
            "store_ops_by_method": {name: round(n / per, 3)
                                    for name, n in sorted(calls.items())},
            "cpu_ms_per_node_per_s": round(cpu * 1e3 / per, 3),
            "start_s": round(start_s, 2)}


def _linked_node(node_id: str, url: str) -> AbstractAsyncContextManager[zl.Node]:
    """A node of the linked Mesh. Its transport listens on the memory network of the
    calling task's context (:data:`NETWORK`), not on a socket; ``on_stop="close"``: a node
    leaving at the end closes its Spots instead of moving them to the nodes still up."""
    return zl.open_node(node_id, store=url, mesh=_MESH, spots=[Echo], listen="127.0.0.1:0",
                        on_stop="close", injected=zl.InjectedOptions(clock=trio.current_time))


def _per(calls: collections.Counter[str], count: int) -> dict[str, float]:
    return {name: round(n / count, 3) for name, n in sorted(calls.items())}


async def _echo(node: zl.Node, spot_id: str, n: int, *, activate: bool) -> bool:
    """One request of ``Ping(n)`` to ``spot_id`` (a cold activation if ``activate``);
    whether it echoed ``n``."""
    call = node.client.request(spot_id, Ping(n), reply=Pong).timeout(CALL_TIMEOUT)
    reply = await (call.instance_spot("bench-echo") if activate else call)
    return reply.n == n


def _hosts(mesh: list[zl.Node], spot_ids: list[str]) -> dict[str, int]:
    """The index in ``mesh`` of the node hosting each of ``spot_ids`` (those hosted)."""
    where: dict[str, int] = {}
    for i, node in enumerate(mesh):
        for spot_id in spot_ids:
            if node.inspection.hosted_spot(spot_id) is not None:
                where[spot_id] = i
    return where


async def _cold_activations(view: Store, mesh: list[zl.Node], calls: int
                            ) -> tuple[dict[str, object], list[str]]:
    """The ``cold_activation`` figures, and the IDs activated (for the warm calls)."""
    caller = mesh[0]
    warmup = [f"bench-mesh-warm-{i}" for i in range(WARMUP_PER_NODE * len(mesh))]
    for i, spot_id in enumerate(warmup):
        await _echo(caller, spot_id, i, activate=True)
    reached = len(set(_hosts(mesh, warmup).values()))
    links_open = len(set(caller.inspection.linked_nodes()))
    spot_ids = [f"bench-mesh-cold-{i}" for i in range(calls)]
    answered = 0
    with count_store_calls(view) as counted:
        cpu = time.process_time()
        for i, spot_id in enumerate(spot_ids):
            answered += await _echo(caller, spot_id, i, activate=True)
        cpu = time.process_time() - cpu
    placed = collections.Counter(_hosts(mesh, spot_ids).values())
    return {"activations": calls, "answered": answered,
            "warmup_activations": len(warmup), "warmup_nodes_reached": reached,
            "links_open": links_open,
            "cpu_us_per_activation": round(cpu * 1e6 / calls, 1),
            "store_calls_per_activation": round(sum(counted.values()) / calls, 3),
            "store_calls_by_method": _per(counted, calls),
            "placed_on_caller": round(placed[0] / calls, 3),
            "nodes_placed_on": len(placed)}, spot_ids


async def _warm_calls(view: Store, mesh: list[zl.Node], spot_ids: list[str], calls: int
                      ) -> dict[str, object]:
    """The ``warm_call`` figures: ``calls`` requests from ``mesh[0]`` to the Spots of
    ``spot_ids`` hosted on other nodes, in turn."""
    caller = mesh[0]
    remote = {spot_id: i for spot_id, i in _hosts(mesh, spot_ids).items() if i != 0}
    if not remote:  # every Spot on the caller: there is no remote call to measure
        return {"calls": 0, "answered": 0, "nodes_called": 0, "cpu_us_per_call": None,
                "store_calls_per_call": None, "store_calls_by_method": {}}
    targets = list(remote)
    # The caller's first request to a Spot it had placed on another node finds its owner
    # in the store (the activation's reply does not fill the caller's route cache): one
    # request to each first, so the measured ones are warm calls, their route cached.
    for i, spot_id in enumerate(targets):
        await _echo(caller, spot_id, i, activate=False)
    answered = 0
    with count_store_calls(view) as counted:
        cpu = time.process_time()
        for i in range(calls):
            answered += await _echo(caller, targets[i % len(targets)], i, activate=False)
        cpu = time.process_time() - cpu
    called = {remote[targets[i % len(targets)]] for i in range(calls)}
    return {"calls": calls, "answered": answered, "nodes_called": len(called),
            "cpu_us_per_call": round(cpu * 1e6 / calls, 1),
            "store_calls_per_call": round(sum(counted.values()) / calls, 3),
            "store_calls_by_method": _per(counted, calls)}


class _MembershipWatch:
    """What the descriptor reads of ``count`` nodes show of one NodeId's claim.

    Idle until :meth:`expect`; then :meth:`saw` (each watched node's every descriptor
    read) records, per node, the Trio time of its first read where the claim's presence is
    the one expected, and :attr:`everyone` is set once every node had such a read.
    """

    def __init__(self, node_id: str, count: int) -> None:
        self.node_id: Final = node_id
        self.count: Final = count
        self.present: bool | None = None
        self.seen: dict[int, float] = {}
        self.everyone = trio.Event()

    def expect(self, *, present: bool) -> None:
        """From now on, watch for reads where the claim is ``present`` (or absent)."""
        self.present = present
        self.seen = {}
        self.everyone = trio.Event()

    def saw(self, index: int, claims: list[NodeClaim]) -> None:
        """Node ``index`` of the watched ones read ``claims``."""
        if self.present is None or index in self.seen:
            return
        if any(c.descriptor.node_id == self.node_id for c in claims) is self.present:
            self.seen[index] = trio.current_time()
            if len(self.seen) == self.count:
                self.everyone.set()

    async def wait(self, since: float) -> tuple[float | None, int]:
        """Wait (up to :data:`MEMBERSHIP_DEADLINE`) until every node saw it: the seconds
        from ``since`` until the last did (``None`` if not all did), and how many did."""
        with trio.move_on_after(MEMBERSHIP_DEADLINE):
            await self.everyone.wait()
        if len(self.seen) < self.count:
            return None, len(self.seen)
        return round(max(self.seen.values()) - since, 3), self.count


class _WatchedLocation:
    """A node's Location Store, its descriptor reads shown to a :class:`_MembershipWatch`."""

    def __init__(self, inner: Any, watch: _MembershipWatch, index: int) -> None:
        self._inner = inner
        self._watch = watch
        self._index = index

    async def descriptors(self, mesh: str | None = None, *, now: float) -> list[NodeClaim]:
        claims: list[NodeClaim] = await self._inner.descriptors(mesh, now=now)
        self._watch.saw(self._index, claims)
        return claims

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _WatchedStore:
    """A node's store with :class:`_WatchedLocation` in front of its Location Store."""

    def __init__(self, inner: Store, watch: _MembershipWatch, index: int) -> None:
        self.inner: Final = inner
        self.location: Any = _WatchedLocation(inner.location, watch, index)
        self.relocation: Any = inner.relocation
        self.combined: Any = inner.combined

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _watching(watch: _MembershipWatch, index: int) -> Callable[[Store], Store]:
    """The ``wrap_store`` of watched node ``index``."""
    def wrap(store: Store) -> Store:
        return _WatchedStore(store, watch, index)

    return wrap


async def _join_leave(url: str, mesh: list[zl.Node]) -> dict[str, object]:
    """The ``join_leave`` figures: :data:`_JOINER` starts, then stops, while every node of
    ``mesh`` reads the descriptors as it does."""
    watch = _MembershipWatch(_JOINER, len(mesh))
    for i, node in enumerate(mesh):
        node.inspection.wrap_store(_watching(watch, i))
    watch.expect(present=True)
    joined = trio.current_time()
    async with _linked_node(_JOINER, url):
        join_s, join_by = await watch.wait(joined)
        watch.expect(present=False)
        left = trio.current_time()
    leave_s, leave_by = await watch.wait(left)
    return {"join_seen_s": join_s, "join_seen_by": join_by,
            "leave_seen_s": leave_s, "leave_seen_by": leave_by}


async def measure_mesh(nodes: int, calls: int = CALLS) -> dict[str, object]:
    """The ``many_nodes_mesh`` figures for ``nodes`` linked nodes, ``calls`` cold
    activations and warm calls; call it in a run on ``MockClock``. Raises
    ``TimeoutError`` past :data:`MESH_DEADLINE` mock seconds, and what a request raises."""
    url = f"memory://bench-mesh-{nodes}"
    # Every node is opened in this task, so the transport of each listens on this network
    # and every dial goes through it.
    token = NETWORK.set(MemoryNetwork())
    try:
        with trio.fail_after(MESH_DEADLINE):
            async with AsyncExitStack() as stack:
                view = await stack.enter_async_context(open_store(url))
                mesh = [await stack.enter_async_context(_linked_node(f"bench-mesh-{i}", url))
                        for i in range(nodes)]
                await trio.sleep(SETTLE)
                cold, spot_ids = await _cold_activations(view, mesh, calls)
                warm = await _warm_calls(view, mesh, spot_ids, calls)
                await trio.sleep(SETTLE)  # every node at rest again before the join
                membership = await _join_leave(url, mesh)
    finally:
        NETWORK.reset(token)
    return {"cold_activation": cold, "warm_call": warm, "join_leave": membership}


def _run(nodes: tuple[int, ...], window: float, calls: int) -> dict[str, object]:
    at_rest: dict[str, object] = {}
    linked: dict[str, object] = {}
    for count in nodes:
        at_rest[str(count)] = trio.run(measure_at_rest, count, window,
                                       clock=trio.testing.MockClock(autojump_threshold=0))
        linked[str(count)] = trio.run(measure_mesh, count, calls,
                                      clock=trio.testing.MockClock(autojump_threshold=0))
    return {"many_nodes_at_rest": at_rest, "many_nodes_mesh": linked}


async def measure_process(nodes: tuple[int, ...] = NODES, window: float = WINDOW,
                          calls: int = CALLS) -> dict[str, object]:
    """:func:`measure_at_rest` and :func:`measure_mesh` for each count, in a fresh process
    (its nodes and their mock clock stay out of the caller): ``{"many_nodes_at_rest": {N:
    ...}, "many_nodes_mesh": {N: ...}}``. Raises :class:`~zlink_trio.Unavailable` if the
    child process fails, ``TimeoutError`` past :data:`CHILD_TIMEOUT` seconds."""
    with trio.fail_after(CHILD_TIMEOUT):
        return await child_figures("zlink_trio.bench.many_nodes", "--json", "--nodes",
                                   ",".join(str(n) for n in nodes), "--window", str(window),
                                   "--calls", str(calls))


def main(argv: list[str] | None = None) -> int:
    """``python -m zlink_trio.bench.many_nodes [--nodes N,N,...] [--window S] [--calls K]
    [--json]``."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench.many_nodes",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default=",".join(str(n) for n in NODES),
                        help="Mesh sizes, comma-separated (2,20,200)")
    parser.add_argument("--window", type=float, default=WINDOW,
                        help="seconds of rest counted, in mock time (10)")
    parser.add_argument("--calls", default=str(CALLS),
                        help=f"cold activations, then warm calls, per Mesh size ({CALLS})")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)
    try:
        nodes = tuple(int(n) for n in args.nodes.split(",") if n.strip())
    except ValueError:
        parser.error(f"--nodes takes comma-separated counts, got {args.nodes!r}")
    if not nodes or min(nodes) < 1:
        parser.error("--nodes takes positive counts")
    if not args.window > 0:
        parser.error("--window takes a positive number of seconds")
    try:
        calls = int(args.calls)
    except ValueError:
        parser.error(f"--calls takes a positive count, got {args.calls!r}")
    if calls < 1:
        parser.error(f"--calls takes a positive count, got {args.calls!r}")
    print_figures(_run(nodes, args.window, calls), as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
