"""Scaffolding of the contract tests (``test_spec_06.py``, ``test_spec_09.py``).

Those tests use only the public surface (``import zlink_trio as zl``), so what the Spots
do is told to the test through :data:`PROBE`, a :class:`Probe` that every Spot here
records into: factory runs, handler turns (with the node that ran them), closes, create
requests, and the events a test uses to hold an activation or a handler turn open. A test
module resets it before each test with an autouse fixture that calls
:meth:`Probe.reset` (in place: the Spots and the tests share the one object).

The Spot types: :class:`Counter` (Instance Spot ``"counter"``, recreated on relocation;
its activation can be held), :class:`Gauge` (Instance Spot ``"gauge"``, not relocated)
and :class:`Room` (User Spot ``"room"``; its ``on_create`` can be held, and declines a
``RoomSpec("reject")``). Every one answers :class:`Ping` and :class:`Note` with a
:class:`Pong` naming its Spot ID, generation, class and node, and blocks on
:class:`Hold` and :class:`Blob` until ``PROBE.hold_gate`` is set.

:func:`open_test_node` opens a node of these Spots on ``MockClock`` without mesh links
(``runtime_spots.open_test_node``); :func:`wait_until` polls in mock time (on the real
clock of ``test_spec_0*_cross_node.py``, in real time). Where an item
says nothing is written or built, :func:`store_unchanged` reads the store around the calls
(never writing it), and :func:`missing_calls_end_not_found` makes the plain calls to a
Missing Spot that both specs say build nothing.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import attrs
import pytest
import runtime_spots
import trio
from runtime_spots import RoomSpec, Welcome

import zlink_trio as zl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from zlink_trio.store import MemoryStore, Store

__all__ = (
    "PROBE",
    "Blob",
    "CloseMe",
    "Counter",
    "Gauge",
    "Hold",
    "Note",
    "Ping",
    "Pong",
    "Probe",
    "Recorder",
    "Room",
    "RoomSpec",
    "Welcome",
    "missing_calls_end_not_found",
    "open_test_node",
    "store_unchanged",
    "wait_until",
)


# --- messages ------------------------------------------------------------------------------


@attrs.frozen
class Ping:
    pass


@attrs.frozen
class Note:
    tag: str


@attrs.frozen
class Hold:
    """Its handler blocks until the test sets ``PROBE.hold_gate``."""

    tag: str = ""


@attrs.frozen
class Blob:
    """A large payload; its handler blocks like ``Hold``."""

    data: str


@attrs.frozen
class CloseMe:
    pass


@attrs.frozen
class Pong:
    spot_id: str
    generation: int
    kind: str
    node_rid: str


# --- what the Spots tell the tests ---------------------------------------------------------


@attrs.define
class Probe:
    """Everything the test Spots record, reset before each test."""

    #: (class name, spot id, generation, node rid) per factory run (``__init__``).
    factory_runs: list[tuple[str, str, int, str]] = attrs.Factory(list)
    #: (spot id, generation, node rid, message) per handler turn.
    handled: list[tuple[str, int, str, object]] = attrs.Factory(list)
    #: (spot id, generation, reason) per ``on_close``.
    closes: list[tuple[str, int, zl.CloseReason]] = attrs.Factory(list)
    #: (spot id, request) per ``on_create`` call.
    create_requests: list[tuple[str, object]] = attrs.Factory(list)
    #: The store record ``on_close`` saw while running (when ``store`` is set).
    records_at_close: list[object] = attrs.Factory(list)
    store: Store | None = None
    #: Spot id -> event the activation hook (on_activate / on_create) waits on.
    activate_gates: dict[str, trio.Event] = attrs.Factory(dict)
    #: Spot id -> event set when its activation hook starts.
    activating: dict[str, trio.Event] = attrs.Factory(dict)
    #: What ``Hold``/``Blob`` handlers wait on; ``holding`` is set when one starts.
    hold_gate: trio.Event = attrs.Factory(trio.Event)
    holding: trio.Event = attrs.Factory(trio.Event)

    def reset(self) -> None:
        """Forget everything: every field back to its default (a fresh list, dict, event)."""
        fresh = Probe()
        for field in attrs.fields(Probe):
            setattr(self, field.name, getattr(fresh, field.name))

    def started(self, spot_id: str) -> trio.Event:
        return self.activating.setdefault(spot_id, trio.Event())

    async def activation_hook(self, spot_id: str) -> None:
        self.started(spot_id).set()
        gate = self.activate_gates.get(spot_id)
        if gate is not None:
            await gate.wait()

    def factory_ids(self) -> list[str]:
        return [spot_id for _, spot_id, _, _ in self.factory_runs]

    def messages_of(self, spot_id: str) -> list[object]:
        return [msg for sid, _, _, msg in self.handled if sid == spot_id]


#: The one probe of the Spots below; reset it (:meth:`Probe.reset`) before each test.
PROBE = Probe()


class Recorder:
    """Handlers and hooks the test Spot types share (found through the MRO)."""

    ctx: zl.SpotContext

    def _constructed(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        PROBE.factory_runs.append(
            (type(self).__name__, ctx.spot_id, ctx.generation, str(ctx.ref.node_rid))
        )

    def _record(self, msg: object) -> Pong:
        rid = str(self.ctx.ref.node_rid)
        PROBE.handled.append((self.ctx.spot_id, self.ctx.generation, rid, msg))
        return Pong(self.ctx.spot_id, self.ctx.generation, type(self).__name__, rid)

    @zl.handler
    async def ping(self, msg: Ping) -> Pong:
        return self._record(msg)

    @zl.handler
    async def note(self, msg: Note) -> Pong:
        return self._record(msg)

    @zl.handler
    async def hold(self, msg: Hold) -> None:
        self._record(msg)
        PROBE.holding.set()
        await PROBE.hold_gate.wait()

    @zl.handler
    async def blob(self, msg: Blob) -> None:
        self._record(Blob(f"{len(msg.data)} bytes"))
        PROBE.holding.set()
        await PROBE.hold_gate.wait()

    async def on_close(self, reason: zl.CloseReason) -> None:
        PROBE.closes.append((self.ctx.spot_id, self.ctx.generation, reason))
        if PROBE.store is not None:
            PROBE.records_at_close.append(await PROBE.store.location.find(self.ctx.spot_id))


@zl.instance_spot("counter", relocation=zl.RecreateOnRelocation())
class Counter(Recorder):
    def __init__(self, ctx: zl.SpotContext) -> None:
        self._constructed(ctx)

    async def on_activate(self) -> None:
        await PROBE.activation_hook(self.ctx.spot_id)

    @zl.handler
    async def close_me(self, msg: CloseMe) -> None:
        self.ctx.close()


@zl.instance_spot("gauge", relocation=zl.DisableRelocation())
class Gauge(Recorder):
    def __init__(self, ctx: zl.SpotContext) -> None:
        self._constructed(ctx)


@zl.user_spot("room", relocation=zl.DisableRelocation())
class Room(Recorder):
    def __init__(self, ctx: zl.SpotContext, request: RoomSpec | None) -> None:
        self._constructed(ctx)
        self.request = request

    async def on_create(self, request: RoomSpec | None) -> Welcome | zl.Reject:
        PROBE.create_requests.append((self.ctx.spot_id, request))
        await PROBE.activation_hook(self.ctx.spot_id)
        if request is not None and request.name == "reject":
            return zl.Reject(Welcome("declined"))
        return Welcome(f"welcome to {self.ctx.spot_id}")


# --- nodes and waiting ---------------------------------------------------------------------


def open_test_node(node_id: str = "node-a", *, spots: tuple[type, ...] = (Counter, Room),
                   store: MemoryStore | str = "memory://", **options: object):
    """A node of ``spots`` on ``store``; the store clock is Trio's (mock) clock unless a test
    passes one, and the node has no mesh listener.

    Trio's clock is ``memory://``'s default; SQLite and Redis default to wall time, which a
    single-process test on ``MockClock`` must not use for leases (``conftest.py``). MockClock
    tests run without mesh links: an autojump clock would jump while a real socket waits.
    Cross-node behaviour is tested on the real clock with listening nodes
    (``test_spec_0*_cross_node.py``, and across processes ``tests/mesh/``).
    """
    return runtime_spots.open_test_node(node_id, store=store, spots=list(spots), **options)


async def wait_until(predicate: Callable[[], Awaitable[bool]], *, step: float = 0.01) -> None:
    """Poll ``predicate`` every ``step`` seconds of Trio's clock (mock or real), bounded by
    the test's fail_after."""
    for _ in range(100_000):
        if await predicate():
            return
        await trio.sleep(step)
    pytest.fail("condition never became true")


@contextlib.asynccontextmanager
async def store_unchanged(store: Store) -> AsyncIterator[None]:
    """Check that the block writes nothing and builds nothing.

    After it, ``store``'s Location and Relocation statistics are what they were before it,
    and no factory ran in it. The store is only read.
    """
    location_before = await store.location.statistics()
    relocation_before = await store.relocation.statistics()
    runs_before = len(PROBE.factory_runs)
    yield
    assert await store.location.statistics() == location_before
    assert await store.relocation.statistics() == relocation_before
    assert PROBE.factory_runs[runs_before:] == []


async def missing_calls_end_not_found(node: object, spot_id: str) -> None:
    """A send and a request to the Missing ``spot_id``, without creation intent, end NotFound."""
    with pytest.raises(zl.NotFound):
        await node.client.send(spot_id, Ping())
    with pytest.raises(zl.NotFound):
        await node.client.request(spot_id, Ping(), reply=Pong).timeout(5)
