"""The relocation figures' Spot and mesh: a Spot that records every message, three nodes.

Theory of operation
-------------------
:class:`Moving` is an Instance Spot whose state is the list of the sequence numbers
it handled (:class:`Mark`), in order. It is declared ``PreserveStateWith``
(:class:`RecordAdapter`), so the list moves with the Spot: what the Spot's last
incarnation answers to :class:`Report` is every message whose effect survived
every move. Each handler run is also counted in :data:`HANDLED`, keyed by Spot ID
and sequence number -- the nodes share the benchmark process, so that counter sees
the runs the moved state may have lost (a turn at the source after the capture).

:func:`tally` compares both with what the sender got accepted (a request that
returned its reply, a send that returned -- outbound admission): a message is
**lost** when it was accepted but its number is not in the Spot's final record,
**duplicated** when it was handled more than once (two runs, or twice in the
record). :func:`three_nodes` opens the nodes of one figure on one store URL with
real loopback links, as separate processes would: ``bench-a`` takes every new Spot
(placement weight 1), ``bench-b`` and ``bench-c`` only what a ``to=`` names.

Nothing here is a test: nothing is asserted.
"""

from __future__ import annotations

import collections
import uuid
from array import array
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import attrs

import zlink_trio as zl
from zlink_trio.bench.stores import bench_store_url
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

__all__ = ("HANDLED", "MESH", "MOVING_TYPE", "Mark", "Moving", "RecordAdapter", "Report",
           "Seen", "Tally", "mesh_url", "tally", "three_nodes")

#: Mesh and stable type of the relocation figures.
MESH: Final = "bench-relocation"
MOVING_TYPE: Final = "bench-moving"
#: Handler runs of :class:`Mark`, by ``(spot_id, sequence number)``, on every node.
HANDLED: Final[collections.Counter[tuple[str, int]]] = collections.Counter()


@attrs.frozen
class Mark:
    """One numbered message; the reply is the same value."""

    n: int


@attrs.frozen
class Report:
    """Asks the Spot for its record."""


@attrs.frozen
class Seen:
    """The sequence numbers the Spot's state holds, in the order they were handled."""

    seqs: list[int]


class RecordAdapter:
    """Moves the Spot's record: the sequence numbers as 8-byte integers."""

    def capture(self, spot: Any) -> bytes:
        """The record of ``spot`` as bytes."""
        return bytes(spot.seqs.tobytes())

    def restore(self, spot: Any, data: bytes) -> None:
        """Load a record from :meth:`capture` into ``spot``."""
        spot.seqs = array("q", data)


@zl.instance_spot(MOVING_TYPE, relocation=zl.PreserveStateWith(RecordAdapter()))
class Moving:
    """An Instance Spot that records each :class:`Mark` it handles (module docstring)."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.seqs = array("q")

    @zl.handler
    async def mark(self, msg: Mark) -> Mark:
        HANDLED[self.ctx.spot_id, msg.n] += 1
        self.seqs.append(msg.n)
        return msg

    @zl.handler
    async def report(self, msg: Report) -> Seen:
        return Seen(list(self.seqs))


@attrs.frozen
class Tally:
    """What :func:`tally` found."""

    lost: int
    duplicated: int


def tally(records: dict[str, list[int]], accepted: Iterable[tuple[str, int]]) -> Tally:
    """Lost and duplicated messages (module docstring).

    ``records`` maps each Spot ID to its final :class:`Seen` record; ``accepted`` are
    the ``(spot_id, n)`` the sender got accepted (a request answered, a send returned).
    Only the Spots in ``records`` are counted.
    """
    counts = {spot_id: collections.Counter(seqs) for spot_id, seqs in records.items()}
    empty: collections.Counter[int] = collections.Counter()
    lost = sum(1 for spot_id, n in accepted if counts.get(spot_id, empty)[n] == 0)
    twice = {key for key, runs in HANDLED.items() if runs > 1 and key[0] in records}
    for spot_id, seen in counts.items():
        twice.update((spot_id, n) for n, times in seen.items() if times > 1)
    return Tally(lost=lost, duplicated=len(twice))


@asynccontextmanager
async def mesh_url(backend: str, *, redis_url: str) -> AsyncIterator[str]:
    """A fresh store URL of ``backend`` that several nodes of this process can share."""
    if backend != "memory":
        async with bench_store_url(backend, redis_url=redis_url) as url:
            yield url
        return
    url = f"memory://bench-relocation-{uuid.uuid4().hex}"
    async with open_store(url):  # a named in-process store lives while it is held
        yield url


@asynccontextmanager
async def three_nodes(url: str, **options: Any) -> AsyncIterator[list[zl.Node]]:
    """Nodes ``bench-a`` (takes every new Spot), ``bench-b`` and ``bench-c`` on ``url``."""
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(zl.open_node(
            f"bench-{name}", store=url, mesh=MESH, spots=[Moving],
            placement_weight=1.0 if name == "a" else 0.0, instance_idle_timeout=0,
            **options)) for name in "abc"]
