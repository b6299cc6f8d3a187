"""Shared parts of the cross-node spec tests (``test_spec_06_cross_node.py``,
``test_spec_09_cross_node.py``): the nodes, their shared store per backend, the probe.

``shared`` (a fixture) opens one store per test on the ``url`` backend (memory: one
``MemoryStore`` object given to every node); :func:`open_nodes` opens listening nodes on
it with the given placement weights and registries; the other helpers read what ran
where and what the store holds. The test modules' docstrings list their items.

Every test here runs two (or three) nodes of one process that **listen** (real loopback
websocket links, as separate processes use) and share one store, on each backend:
``memory`` (one :class:`~zlink_trio.store.MemoryStore` *object* given to every node),
``sqlite`` (one file) and ``redis`` (one key prefix) -- the ``url`` fixture of
``conftest.py`` (Redis absent fails under ``CI``, skips locally). Their registries
differ: the owner serves the types of the test, a caller fewer or none (a
:data:`CLIENT` node), so a node that decided from its own registry instead of the
Mesh's descriptors would fail them. A message that has to cross nodes crosses a link,
so no test accepts ``zl.Unavailable`` in place of the outcome its item names: where
Unavailable *is* the outcome (an owner whose lease ran out, a close meeting a move),
the test first shows the same call succeeding across the link, and checks the reason
the error gives.

Each test is named after its item (the same name as the single-node test of
``test_spec_06.py`` / ``test_spec_09.py`` where that one covers the one-node half; a
suffix names the branch when an item has several) and quotes it in its docstring. Only
the public surface is used (``import zlink_trio as zl``: ``open_node``, ``node.spots``,
``node.client``, ``node.relocate``, ``node.statistics()``), plus reads of the store for
"nothing was written". Placement is steered with ``placement_weight`` (a node of weight
0 takes no new Spots), so the owner of every Spot is known.

Timing: the real clock (an autojump ``MockClock`` would jump while a socket waits);
every test is bounded by ``trio.fail_after``, and nothing sleeps to wait for something
-- it polls the store or the probe with :func:`wait_until` under that bound.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
from spec_helpers import (
    PROBE,
    Counter,
    Recorder,
    Room,
    RoomSpec,
    wait_until,
)

import zlink_trio as zl
from zlink_trio.store import MemoryStore, open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from zlink_trio.store import Store

#: Real seconds a test may take (a healthy one takes well under two).
LIMIT = 30


@zl.user_spot("hall", relocation=zl.RecreateOnRelocation())
class Hall(Recorder):
    """A User Spot that can move (Room cannot): for the close-meets-a-move branch."""

    def __init__(self, ctx: zl.SpotContext, request: RoomSpec | None) -> None:
        self._constructed(ctx)


SPOTS = (Counter, Room, Hall)


@attrs.frozen
class Shared:
    """What every node is opened on, and the same store opened for the test to read."""

    store: MemoryStore | str
    view: Store


@asynccontextmanager
async def shared_store(url: str) -> AsyncIterator[Shared]:
    """Each backend: one MemoryStore object for all nodes, or the SQLite / Redis URL.

    The test modules' ``shared`` fixture (a fresh probe, then this).
    """
    PROBE.reset()
    if url.startswith("memory://"):
        memory = MemoryStore()
        yield Shared(memory, memory)
        return
    async with open_store(url) as view:
        yield Shared(url, view)


#: The registry of a client-only node: it hosts nothing (``open_node(client_only=True)``).
CLIENT: tuple[type, ...] = ()


def open_node(shared: Shared, name: str, weight: float, *,
              spots: Sequence[type] = SPOTS, **options: Any) -> Any:
    """A listening node serving ``spots`` on the shared store (loopback, any free port).

    ``spots`` is its registry, :data:`SPOTS` by default; :data:`CLIENT` (none) opens a
    ``client_only`` node, whose placement weight is 0 whatever ``weight`` says.
    """
    if not spots:
        return zl.open_node(name, store=shared.store, client_only=True, **options)
    return zl.open_node(name, store=shared.store, spots=list(spots),
                        placement_weight=weight, **options)


@asynccontextmanager
async def open_nodes(shared: Shared, *weights: float,
                     spots: Sequence[Sequence[type]] = ()) -> AsyncIterator[list[Any]]:
    """Nodes ``node-a``, ``node-b``... of these placement weights on the shared store.

    ``spots`` gives the nodes' registries in the same order (:func:`open_node`), so the
    nodes of a Mesh-wide item can differ; a node it does not reach serves :data:`SPOTS`.
    """
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(open_node(
            shared, f"node-{chr(97 + i)}", w, spots=spots[i] if i < len(spots) else SPOTS))
            for i, w in enumerate(weights)]


def ran_on(node: Any) -> list[object]:
    """The messages handled on ``node``, in order."""
    return [msg for _, _, rid, msg in PROBE.handled if rid == str(node.node_rid)]


async def record_state(view: Store, spot_id: str) -> str | None:
    record = await view.location.find(spot_id)
    return None if record is None else record.state.name


async def settled(view: Store, *, creating: int = 0, roots: int = 0) -> None:
    """Wait until the store holds ``creating`` Creating records and ``roots`` roots."""

    async def done() -> bool:
        location = await view.location.statistics()
        relocation = await view.relocation.statistics()
        return (location.creating, relocation.roots) == (creating, roots)

    await wait_until(done)


