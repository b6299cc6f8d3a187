"""Object-route readiness: tell, passively, when a Workflow node serves orders in the Mesh.

Theory of operation
-------------------
The smoke waits until public readiness confirms the HTTP edge and the RouteMesh
object capability of each API node, and learns the second from a passive
signal: the runner does not send a request of its own (``docs/shoppingmall.md``,
"The smoke"). The signal here is the
Location Store, where every node of a Mesh publishes its claim (NodeId,
served stable types, lease) and where the framework's placement looks for a
node to cold-activate a Missing order on. :func:`watch_object_routes` reads
the live claims of the Mesh (``zl.open_store(url).location.descriptors``) --
every ``interval`` seconds at first, each quiet read doubling the pause up to
``max_interval``, a new Workflow node resetting it -- and the first time it
sees a node other than itself that serves
:data:`~.workflow_calls.ORDER_WORKFLOW_TYPE` as an Instance type, it logs
``shoppingmall-ready kind=object-route node=<self> target=<that NodeId>``.
Each NodeId is logged once per API process, however often its node restarts
or its claim is read; nothing is ever sent to it.

It only reads the store: it neither joins nor changes the Mesh, and no order
call waits for it (a call finds its owner through the framework whatever this
watcher has seen). A store read that fails (:class:`zlink_trio.Unavailable`) is
skipped and retried after the next pause.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.markers import object_route_ready_line
from zlink_trio.samples.shoppingmall.shared.contracts import ORDER_WORKFLOW_TYPE, WORKFLOW_MESH

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from zlink_trio.samples.shoppingmall.server.commerce_api.markers import LogLine

__all__ = ("DEFAULT_INTERVAL", "DEFAULT_MAX_INTERVAL", "ClaimDirectory", "watch_object_routes")

#: Seconds between two reads of the Mesh's claims, at first and at most.
DEFAULT_INTERVAL: Final = 0.1
DEFAULT_MAX_INTERVAL: Final = 2.0


class _Descriptor(Protocol):
    @property
    def node_id(self) -> str: ...

    def serves(self, stable_type: str, kind: zl.SpotKind) -> bool: ...


class _Claim(Protocol):
    @property
    def descriptor(self) -> _Descriptor: ...


class ClaimDirectory(Protocol):
    """What the watcher reads: ``zl.open_store(url)``'s ``.location`` satisfies it."""

    async def descriptors(self, mesh: str | None = None, *,
                          now: float) -> Sequence[_Claim]:
        """The live node claims of ``mesh`` at store time ``now``."""
        ...


async def watch_object_routes(directory: ClaimDirectory, node_id: str, log: LogLine, *,
                              clock: Callable[[], float], mesh: str = WORKFLOW_MESH,
                              interval: float = DEFAULT_INTERVAL,
                              max_interval: float = DEFAULT_MAX_INTERVAL,
                              task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                              ) -> None:
    """Log each Workflow node of ``mesh`` once, as it appears (module docstring); forever.

    ``clock`` is the store's clock (``time.time`` for a store shared between
    processes, Trio's for ``memory://``), the one leases are stamped with.
    ``interval`` / ``max_interval``: the first and the longest pause between reads.
    ``task_status`` is started after the first read. Runs until cancelled.
    """
    seen: set[str] = set()
    started = False
    pause = interval / 2  # doubled before each sleep: the first pause is ``interval``
    while True:
        try:
            claims = await directory.descriptors(mesh, now=clock())
        except zl.Unavailable:
            claims = []
        for claim in claims:
            target = claim.descriptor.node_id
            if (target != node_id and target not in seen
                    and claim.descriptor.serves(ORDER_WORKFLOW_TYPE, zl.SpotKind.INSTANCE)):
                seen.add(target)
                log(object_route_ready_line(node_id, target))
                pause = interval / 2  # doubled back to ``interval`` below
        if not started:
            started = True
            task_status.started()
        pause = min(pause * 2, max_interval)
        await trio.sleep(pause)
