"""The cyclic garbage collector against the lease: long-lived objects frozen out of it.

Theory of operation
-------------------
CPython's cyclic garbage collector stops the whole process while it visits every
object of the generations it collects, and a full collection visits every tracked
object there is. A resident idle Spot keeps about 10 of them (its Trio task's, its
incarnation's, its instance's, the store's record; 19 before issue #32), and a full
collection cost about 8 µs per resident Spot: some 8 s at a million Spots, long enough
to cost the node its lease (10 s by default, renewed every third of it;
docs/performance.md). CPython starts one
by itself whenever its old generation has grown by a quarter since the last.

So a node freezes what is long-lived (:func:`keep_frozen`, one task per node). As it
starts, it collects the young generations and moves everything to the collector's
permanent generation (``gc.freeze()``), which no collection visits: the modules, the
application's heap as it is -- objects that live as long as the process. Then, each
time its resident Spots have grown by ``gc_freeze_after`` since it last looked, it
collects what is garbage now (``gc.collect()``, a full collection -- of the unfrozen
objects only, those allocated since the last freeze) and freezes what is left. Each
freeze, and each collection CPython starts by itself, then costs in proportion to what
was allocated since the last freeze, not to the node or the process.

A frozen object is still freed by reference counting as soon as nothing refers to it;
only a reference *cycle* of frozen objects that becomes garbage stays, until
``gc.unfreeze()``. The runtime's own objects of a Spot form no cycle once its
incarnation has ended (the incarnation forgets its instance then, and nothing it owns
refers back to it; ``tests/runtime/test_collector.py`` checks that an ended
incarnation is gone without the collector). What the runtime cannot see is a cycle in
the instance of an application's Spot class: an instance still referenced when its
incarnation ends is counted (:func:`instance_outlived`), as it may be such garbage.
When those reach a quarter of the Spots the process froze (at least
``gc_freeze_after``), the node unfreezes, collects and freezes again -- one full
collection, at most as often as CPython itself collects the old generation -- and
warns that a Spot class keeps reference cycles.

``gc`` is one per process: the nodes of a process share the frozen generation, and so
does the application around them (whatever it holds when a node freezes is frozen
too). The last node of the process to stop unfreezes everything, handing the process
back to the collector as it was. ``gc_freeze_after=0`` turns all of this off for a node.
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.runtime.observe.logs import COLLECTOR

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("CHECK_INTERVAL", "instance_outlived", "keep_frozen", "outlived_instances")

#: Seconds between two looks of a node at its resident Spots.
CHECK_INTERVAL: Final = 1.0


class _Process:
    """What the nodes of this process know about the frozen generation they share."""

    __slots__ = ("frozen_by", "outlived")

    def __init__(self) -> None:
        #: Resident Spots of each node that froze (by its key) at its last freeze.
        self.frozen_by: dict[object, int] = {}
        #: Instances still referenced when their incarnation ended, since the frozen
        #: generation began or this module last collected everything.
        self.outlived = 0


_PROCESS: Final = _Process()


def instance_outlived() -> None:
    """An ended incarnation's instance is still referenced elsewhere: maybe a reference
    cycle of the application's, which a frozen generation would keep (module docstring).
    Called by the incarnation as it forgets its instance."""
    _PROCESS.outlived += 1


def outlived_instances() -> int:
    """How many instances outlived their incarnation since the frozen generation began or
    this module last collected everything."""
    return _PROCESS.outlived


def _freeze(*, everything: bool) -> tuple[float, int]:
    """Collect (everything: after unfreezing it) and freeze what is left; the seconds it
    paused the process and the unreachable objects it found."""
    start = time.perf_counter()
    if everything:
        gc.unfreeze()
        _PROCESS.outlived = 0
    collected = gc.collect()
    gc.freeze()
    return time.perf_counter() - start, collected


async def keep_frozen(node_id: str, node_key: object, after: int,
                      resident: Callable[[], int]) -> None:
    """One node's task: freeze once ``resident()`` has grown by ``after`` Spots since its
    last freeze, and collect everything once the outlived instances call for it
    (module docstring). Runs until cancelled; then, unless another node of the process
    keeps objects frozen, unfreezes them."""
    process = _PROCESS
    # A cycle that is old garbage now stays until the process's last node stops;
    # collecting it too would cost a full collection of the whole process at each start.
    gc.collect(1)
    gc.freeze()
    if not process.frozen_by:  # a new frozen generation: what ended before it is not in it
        process.outlived = 0
    base = process.frozen_by[node_key] = resident()
    try:
        while True:
            await trio.sleep(CHECK_INTERVAL)
            now = resident()
            outlived = process.outlived
            everything = outlived >= max(after, sum(process.frozen_by.values()) // 4)
            if not everything and now - base < after:
                base = min(base, now)  # Spots that left make room for the next burst
                continue
            pause, collected = _freeze(everything=everything)
            base = now
            process.frozen_by[node_key] = now
            if everything:
                COLLECTOR.warning(
                    "node %r: %d Spot instances were still referenced when their "
                    "incarnation ended (a reference cycle in a Spot class, or a reference "
                    "kept elsewhere); collecting everything paused the process %.3f s and "
                    "freed %d objects. Break such cycles in on_close (docs/operations.md, "
                    "\"Nodes with very many Spots\")", node_id, outlived, pause, collected)
            else:
                COLLECTOR.debug("node %r: froze %d resident Spots' objects (a %.3f s pause, "
                             "%d objects freed)", node_id, now, pause, collected)
    finally:
        del process.frozen_by[node_key]
        if not process.frozen_by:
            gc.unfreeze()
