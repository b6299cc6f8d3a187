"""Fault hooks a test calls: fail the next store call, cut a link, pause, kill, crash at a step.

Theory of operation
-------------------
:class:`Faults` belongs to one test cluster (``cluster.faults``).  When a node starts,
the cluster hands it to :meth:`Faults.attach`, which puts a :class:`FaultyStore` in
front of the node's store (every store call of that node passes :meth:`Faults._gate`
first) and refuses the node's links with a node it is cut from, dialled out or in --
both through the node's test hooks (``node.inspection``: ``wrap_store``,
``refuse_links``). Nothing here patches a class or reaches past ``node.inspection``.  The hooks:

* :meth:`~Faults.fail_next_store_call` -- the next store call (of one node, of one
  method such as ``"renew"`` or ``"reserve"``, or any) raises :class:`InjectedFault`
  (an ``Unavailable``) instead of reaching the store; nothing is written.
* :meth:`~Faults.cut` / :meth:`~Faults.heal` -- close the links between two nodes and
  refuse new ones until healed; calls between them end ``Unavailable`` or
  ``DeadlineExceeded``, as on a real partition.
* :meth:`~Faults.pause` / :meth:`~Faults.resume` -- the node stops reaching the store
  (its store calls wait, each still bounded by its caller's deadline) and its peers
  (its links are cut), like a process stopped by SIGSTOP or a long GC pause: its lease
  runs out while it is paused, and it learns that when it resumes.
* :meth:`~Faults.kill` -- the node dies: from this instant it never reaches the store
  again (every call fails :class:`InjectedFault` at once), its links are cut, its local
  Spots stop as after a lost lease, and its task ends.  Its authority records and
  descriptor stay in the store, as a crashed process leaves them; a restart under the
  same NodeId (:meth:`TestCluster.restart <zlink_trio.testing.TestCluster.restart>`)
  waits for the old lease and recovers.  (One difference from a real crash: the stopped
  Spots' ``on_close(OWNERSHIP_LOST)`` runs.)
* :meth:`~Faults.crash_at` -- ``ZLINK_CRASH_AT`` as an API: the node that reaches the
  named step (``"cold:after_reserve"``, ``"create:in_factory"``, ``"relocation:sealed"``
  ...; the steps are listed in :mod:`zlink_trio.runtime.crash_points`) is
  killed there: the task that reached it raises :class:`SimulatedCrash` and nothing the
  node does after it reaches the store.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from zlink_trio.core.errors import Unavailable
from zlink_trio.runtime import crash_points
from zlink_trio.runtime.crash_points import CrashPointReached

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.runtime.node_handle import Node
    from zlink_trio.store import Store

__all__ = ("CRASH_STEPS", "Faults", "FaultyStore", "InjectedFault", "SimulatedCrash")

#: Every step :meth:`Faults.crash_at` accepts, as ``flow:step``.
CRASH_STEPS: Final = frozenset(
    {f"cold:{s}" for s in crash_points.COLD_STEPS}
    | {f"create:{s}" for s in crash_points.CREATE_STEPS}
    | {f"relocation:{s}" for s in crash_points.RELOCATION_STEPS})


class InjectedFault(Unavailable):
    """A store call a test failed on purpose (or one of a node the test killed)."""


class SimulatedCrash(CrashPointReached):
    """Raised in the task that reached the step :meth:`Faults.crash_at` named (a
    ``CrashPointReached``: what a fault's clean-up lets pass, as a crash would)."""


@attrs.define
class _FailNext:
    node: str | None
    method: str | None
    error: Exception


class _Part:
    """One of a store's parts (``location``, ``relocation``, ``combined``), every coroutine
    method passing the node's fault gate first; everything else is the part's own."""

    def __init__(self, inner: object, faults: Faults, node: str) -> None:
        self._inner = inner
        self._faults = faults
        self._node = node

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(value):
            return value
        faults, node = self._faults, self._node

        async def call(*args: Any, **kwargs: Any) -> Any:
            await faults._gate(node, name)
            return await value(*args, **kwargs)

        return call


class FaultyStore:
    """A node's view of its store with the cluster's faults in front of every call."""

    def __init__(self, inner: Store, faults: Faults, node: str) -> None:
        self.inner: Final = inner
        self.location: Any = _Part(inner.location, faults, node)
        self.relocation: Any = _Part(inner.relocation, faults, node)
        self.combined: Any = _Part(inner.combined, faults, node)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Faults:
    """The fault hooks of one cluster; see the module doc."""

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._fail: list[_FailNext] = []
        self._paused: dict[str, trio.Event] = {}
        self._dead: set[str] = set()
        self._cuts: set[frozenset[str]] = set()
        self._crash: tuple[str, str | None] | None = None
        #: Called with the node's name when :meth:`kill` or a crash step kills it.
        self.on_kill: Callable[[str], None] | None = None

    # ------------------------------------------------------------------ wiring

    def attach(self, node: Node) -> None:
        """Wrap ``node``'s store and link admission (the cluster does this at start)."""
        name = node.node_id
        self._nodes[name] = node
        self._dead.discard(name)
        inspection = node.inspection
        inspection.wrap_store(lambda store: FaultyStore(store, self, name))

        def refusal(other: str) -> str | None:
            if not self._is_cut(name, other):
                return None
            return (f"the link from node {name!r} to node {other!r} is cut "
                    "(zlink_trio.testing: Faults.cut); heal it to reconnect")

        inspection.refuse_links(refusal)

    def detach(self, node: Node) -> None:
        """Forget ``node`` (it stopped)."""
        if self._nodes.get(node.node_id) is node:
            del self._nodes[node.node_id]

    def close(self) -> None:
        """Disarm :meth:`crash_at` (the cluster does this when it exits)."""
        if self._crash is not None:
            self._crash = None
            crash_points.arm(None)

    # ------------------------------------------------------------------ store faults

    def fail_next_store_call(self, node: str | None = None, *, method: str | None = None,
                             error: Exception | None = None) -> None:
        """Make the next store call of ``node`` (any node) to ``method`` (any method, e.g.
        ``"renew"``, ``"reserve"``, ``"begin_close"``) raise ``error`` (an
        :class:`InjectedFault` by default) without reaching the store. Rules queue: each
        call consumes the oldest one it matches."""
        what = f"{method or 'store'} call" + (f" of node {node!r}" if node else "")
        self._fail.append(_FailNext(node, method, error or InjectedFault(
            f"the next {what} was failed by the test (zlink_trio.testing: "
            "Faults.fail_next_store_call)")))

    async def _gate(self, node: str, method: str) -> None:
        if node in self._dead:
            raise InjectedFault(f"node {node!r} was killed by the test; it reaches no store")
        for rule in self._fail:
            if rule.node in (None, node) and rule.method in (None, method):
                self._fail.remove(rule)
                raise rule.error
        paused = self._paused.get(node)
        if paused is not None:
            await paused.wait()  # bounded by the caller's own deadline, as any store call
            if node in self._dead:
                raise InjectedFault(f"node {node!r} was killed while paused")

    # ------------------------------------------------------------------ links

    def _is_cut(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self._cuts or a in self._dead or b in self._dead

    async def cut(self, a: str, b: str) -> None:
        """Close the links between nodes ``a`` and ``b`` and refuse new ones until
        :meth:`heal`."""
        if a == b:
            raise ValueError(f"Faults.cut: a node has no link to itself ({a!r})")
        self._cuts.add(frozenset((a, b)))
        await self._close_links(a, b)

    def heal(self, a: str, b: str) -> None:
        """Let ``a`` and ``b`` link again (the next call between them dials)."""
        self._cuts.discard(frozenset((a, b)))

    async def _close_links(self, a: str, b: str | None = None) -> None:
        if b is not None:  # the links between ``a`` and ``b``, from both ends
            for name, other in ((a, b), (b, a)):
                node = self._nodes.get(name)
                if node is not None:
                    await node.inspection.close_links(to=other)
            return
        node = self._nodes.get(a)
        if node is not None:
            await node.inspection.close_links()  # every link of ``a`` ...
        for name, node in self._nodes.items():
            if name != a:  # ... and every node's links to ``a``
                await node.inspection.close_links(to=a)

    # ------------------------------------------------------------------ nodes

    async def pause(self, node: str) -> None:
        """The node stops reaching the store and its peers until :meth:`resume`."""
        self._node(node)
        self._paused.setdefault(node, trio.Event())
        for other in self._nodes:
            if other != node:
                self._cuts.add(frozenset((node, other)))
        await self._close_links(node)

    def resume(self, node: str) -> None:
        """Undo :meth:`pause`: waiting store calls go on, links may open again."""
        event = self._paused.pop(node, None)
        if event is not None:
            event.set()
        for other in self._nodes:
            self._cuts.discard(frozenset((node, other)))

    async def kill(self, node: str) -> None:
        """Kill the node now (see the module doc); its task ends soon after."""
        self._kill_now(node)
        await self._close_links(node)

    def _kill_now(self, node: str) -> None:
        self._node(node)
        self.resume(node)
        self._dead.add(node)  # from now on the node reaches no store, no peer
        if self.on_kill is not None:
            self.on_kill(node)  # the cluster stops its Spots (lost lease) and its task

    def crash_at(self, step: str, *, node: str | None = None) -> None:
        """Kill the node that reaches ``step`` (``flow:step``, see :data:`CRASH_STEPS`) --
        only ``node`` when given -- there, once. The task that reached it raises
        :class:`SimulatedCrash`."""
        if step not in CRASH_STEPS:
            raise ValueError(f"Faults.crash_at: unknown step {step!r}; the steps are "
                             f"{sorted(CRASH_STEPS)}")
        self._crash = (step, node)
        crash_points.arm(self._crash_hook)

    def _crash_hook(self, flow: str, step: str, node_id: str) -> None:
        armed = self._crash
        if armed is None or armed[0] != f"{flow}:{step}" or armed[1] not in (None, node_id):
            return
        if node_id not in self._nodes:
            return  # a node of another cluster
        self.close()
        self._kill_now(node_id)
        raise SimulatedCrash(f"node {node_id!r} crashed at {flow}:{step} "
                             "(zlink_trio.testing: Faults.crash_at)")

    def _node(self, name: str) -> Node:
        node = self._nodes.get(name)
        if node is None:
            raise KeyError(f"no running node {name!r} in this cluster; running: "
                           f"{sorted(self._nodes)}")
        return node

