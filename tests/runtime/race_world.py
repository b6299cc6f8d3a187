"""The world of a three-node race model: a fresh store, the nodes, the operations' tasks.

``test_relocation_model.py`` and ``test_actor_model.py`` drive three listening nodes on
one store from a hypothesis state machine (the test kit's ``run_race_model``, on a
``MockClock`` with ``rate=0``). What every such example needs is here, once:
:class:`Setup` (what the test hands the machine), :class:`RaceWorld` (the store view,
the nodes, one ordered sender per node and the nursery of the unordered operations,
settling between rules, the shutdown) and :func:`patch_backend` (every store call of the
backend counted, so settling knows when none is in flight). A model subclasses
:class:`RaceWorld` with its Spot types, node options and how it runs one operation.
"""

from __future__ import annotations

import math
import random
import uuid
from collections import Counter as Tally
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, TypeVar

import attrs
import trio
from store_calls import postgres_helpers, redis_helpers

import zlink_trio as zl
from zlink_trio.core.errors import Unavailable
from zlink_trio.store import open_store
from zlink_trio.testing import InFlight, RaceHarness, Recorder, settle

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

__all__ = ("CUSHION", "RaceWorld", "Setup", "patch_backend")

#: Real seconds without a runnable task that count as settled (link bytes have landed).
CUSHION: Final = 0.004

OpT = TypeVar("OpT")


@attrs.define
class Setup:
    """What the test hands the machine (``RaceHarness.data["setup"]``)."""

    backend: str
    tmp: Path
    #: Counts store calls (no clock: these tests never autojump).
    in_flight: InFlight


class RaceWorld(Generic[OpT]):
    """One example's store, nodes and operations (see the module docstring)."""

    #: The node names, in index order.
    names: ClassVar[tuple[str, ...]] = ()
    #: What names this model's stores (``memory://<tag>-...``, ``<tag>-....db``).
    tag: ClassVar[str] = "race"

    def __init__(self, harness: RaceHarness) -> None:
        self.harness = harness
        self.setup: Setup = harness.data["setup"]
        self.nodes: list[zl.Node] = []
        self.node_names: dict[str, str] = {}
        self.view: Any = None
        self.ops_nursery: trio.Nursery | None = None
        self.queues: list[trio.MemorySendChannel[OpT]] = []
        self.stop = trio.Event()
        self.stopped = trio.Event()
        self.crash: BaseException | None = None
        self.ops: dict[int, Any] = {}
        self.handled: Tally[int] = Tally()
        #: Per (ID, generation): the operations handled, in order (all nodes).
        self.history: dict[tuple[str, int], list[int]] = {}
        self.factories: Tally[tuple[str, int]] = Tally()
        self.moves_started: Tally[tuple[str, int]] = Tally()
        self.running: dict[str, tuple[int, int]] = {}
        self.violations: list[str] = []
        #: Chart transitions checked against the charts, the runtime's warnings.
        self.recorder = Recorder()
        self.logs = self.recorder.logs
        self.leftovers: list[Any] = []
        #: The clock before the last ``advance`` jump.
        self.before_jump = -math.inf
        self.leftover_roots: Any = None

    # ------------------------------------------------------------- what a model says

    def node_options(self, index: int) -> dict[str, Any]:
        """``open_node``'s keyword arguments for node ``index`` (its ``spots`` too)."""
        raise NotImplementedError

    async def _run(self, op: OpT) -> None:
        """Run one operation to its end (its outcome recorded, never raised)."""
        raise NotImplementedError

    # ------------------------------------------------------------- lifetime

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.violations.append(what)

    async def _url(self, stack: AsyncExitStack) -> str:
        backend = self.setup.backend
        if backend == "memory":
            return f"memory://{self.tag}-{uuid.uuid4().hex}"
        if backend == "sqlite":
            return f"sqlite://{self.setup.tmp / f'{self.tag}-{uuid.uuid4().hex}.db'}"
        if backend == "postgresql":  # the prefix's schema goes when the stack closes
            url: str = await stack.enter_async_context(postgres_helpers().fresh_url())
            return url
        helpers = redis_helpers()
        if backend == "redis-cluster":  # the prefix's keys go when the stack closes
            url = await stack.enter_async_context(helpers.fresh_cluster_url())
            return url
        prefix = helpers.fresh_prefix()
        stack.push_async_callback(self._delete_keys, helpers, prefix)
        return str(helpers.url_with(prefix))

    async def _delete_keys(self, helpers: Any, prefix: str) -> None:
        with trio.CancelScope(shield=True), self.setup.in_flight.io("delete keys"):
            await helpers.delete_prefix(prefix)

    async def hold(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                   ) -> None:
        """Open the store view, the nodes and the operations' nursery until :attr:`stop`."""
        try:
            async with AsyncExitStack() as stack:
                url = await self._url(stack)
                opener = self.setup.in_flight.open_store(open_store)
                self.view = await stack.enter_async_context(opener(url))
                # runs once the nodes are closed, while the view (and a memory store) lives
                stack.push_async_callback(self._read_leftovers)
                for i, name in enumerate(self.names):
                    node = await stack.enter_async_context(zl.open_node(
                        name, store=url, on_stop="close",
                        injected=zl.InjectedOptions(
                            clock=trio.current_time, random=random.Random(i)),
                        **self.node_options(i)))
                    self.nodes.append(node)
                    self.node_names[str(node.node_rid)] = name
                async with trio.open_nursery() as ops:
                    self.ops_nursery = ops
                    for _ in self.names:
                        send, receive = trio.open_memory_channel[OpT](math.inf)
                        self.queues.append(send)
                        ops.start_soon(self._sender, receive)
                    task_status.started()
                    await self.stop.wait()
                    ops.cancel_scope.cancel()
        except Exception as exc:  # a crashed node is reported by the invariants
            self.crash = exc
        finally:
            self.stopped.set()

    async def _read_leftovers(self) -> None:
        with self.setup.in_flight.io("the model's own store read"):
            page = await self.view.location.query(page_size=100)
            self.leftovers = [r for r in page.records if r.kind is not zl.SpotKind.ENTRY]
            self.leftover_roots = await self.view.relocation.statistics()

    async def settle(self) -> None:
        """Until nothing runs: no runnable task for CUSHION real seconds, no store call."""
        await settle(self.setup.in_flight, cushion=CUSHION)

    async def act(self, action: Any, *args: Any) -> None:
        """One rule: do ``action`` (sync or async), then settle."""
        result = action(*args)
        if hasattr(result, "__await__"):
            await result
        await self.settle()

    async def find(self, spot_id: str) -> Any:
        """The store's record of ``spot_id`` (a read the settling counts)."""
        with self.setup.in_flight.io("the model's own store read"):
            return await self.view.location.find(spot_id)

    async def finish_ops(self) -> None:
        """Open every gate and let every operation end (the mock clock moves on)."""
        for gate in getattr(self, "gates", {}).values():
            gate.act("open")
        for _ in range(40):
            await self.settle()
            if all(op.done for op in self.ops.values()):
                break
            self.harness.clock.jump(0.5)
        late = [op for op in self.ops.values() if not op.done]
        assert not late, f"operations never ended: {late}"

    async def shut_down(self) -> None:
        self.stop.set()
        for _ in range(60):
            await self.settle()
            if self.stopped.is_set():
                return
            self.harness.clock.jump(1.0)
        raise AssertionError("the nodes did not shut down within 60 s of (mock) time")

    async def _sender(self, queue: trio.MemoryReceiveChannel[OpT]) -> None:
        async for op in queue:
            await self._run(op)


async def patch_backend(backend: str, in_flight: InFlight, tmp_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Count every store call of the backend's classes (and fail if Redis is absent)."""
    if backend == "memory":
        return
    if backend == "postgresql":
        async with postgres_helpers().postgres_test_store() as store:
            in_flight.patch_backend(monkeypatch, store)
        in_flight.patch_open_store(monkeypatch)
        return
    helpers = redis_helpers()
    if backend == "redis-cluster":
        async with helpers.cluster_test_store() as store:
            in_flight.patch_backend(monkeypatch, store)
        in_flight.patch_open_store(monkeypatch)
        return
    url = f"sqlite://{tmp_path / 'patch.db'}" if backend == "sqlite" else \
        helpers.url_with(helpers.fresh_prefix())
    try:
        async with open_store(url) as store:
            in_flight.patch_backend(monkeypatch, store)
    except Unavailable as error:
        helpers.unreachable(error.message)
    in_flight.patch_open_store(monkeypatch)
