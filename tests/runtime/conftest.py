"""Backend parametrisation for the runtime tests that touch the store.

A test that asks for ``store_url`` runs once per backend: ``memory://`` (a named
in-process store), ``sqlite://`` (a fresh file in ``tmp_path``) and ``redis://`` (the
test Redis of ``tests/store/redis_helpers.py`` -- ``ZLINK_TEST_REDIS``, default
``redis://127.0.0.1:6379/0`` -- under a fresh ``?prefix=`` whose keys are deleted when
the test ends). Redis absent **fails** the test when ``CI`` is set and skips it locally,
exactly as the store suite does. Only tests that exercise the store (cold activation,
get-or-create convergence, close, idle eviction, the capacity ceiling) take the fixture;
everything else stays on ``memory://``, which keeps the extra CI time small.

The ``store`` fixture is the same store opened once more for the test to *read*
(``find``, ``query``, ``statistics``): for memory it is the very object the nodes share
(the named store lives while the fixture holds it open); for SQLite and Redis it is a
second connection to the same file / prefix. Tests never write through it.

Clocks. These tests run on ``MockClock`` (``autojump_clock``), so ``trio.sleep`` and
every deadline are mock seconds. ``open_node`` stamps leases and route-cache ages with
the *store clock*, which defaults to ``trio.current_time`` only for ``memory://``; for a
shared store it is wall-clock ``time.time`` (several processes must agree on it). A test
that opens nodes on ``store_url`` in **one process** therefore passes
``clock=trio.current_time`` (``runtime_spots.open_test_node`` does): then leases expire,
renewals land and cached routes age on the mock clock exactly as on ``memory://``, and a
test that moves the clock (``autojump_clock.jump``) sees the same lease expiry on every
backend. Without it, leases and cache ages would follow wall time, which barely moves
while mock time races ahead.

Autojump and real I/O. ``MockClock(autojump_threshold=0)`` jumps to the next deadline as
soon as every task is blocked -- including a task waiting for a Redis reply or a SQLite
worker thread, since Trio cannot tell I/O from sleeping. A jump in the middle of a
round trip lands on whatever deadline is next (a lease renewal, an idle sweep, the
test's own ``fail_after``), so the tests would fail at random. On SQLite and Redis the
fixture therefore counts the store calls in flight -- every public coroutine method of
the backend's Location and Relocation Store classes, and ``open_store`` as ``open_node``
uses it -- and suspends autojump (threshold ``inf``) while any is in flight. Store
calls so take no mock time, as on ``memory://``, and mock time still jumps the moment
the test is idle with no I/O pending.

The watchdog. With autojump suspended, mock time stands still while a store call is in
flight, so no ``trio.fail_after`` can fire: a store call that never answers would hang
the test forever. A real-time watchdog (a thread that looks once a second and, while any
call is in flight, asks the Trio thread to check) cancels a store call that has taken
more than ``STORE_CALL_LIMIT`` real seconds and fails the test naming that call: raised
from the call, and again when the fixture ends, in case the code under test swallowed it.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import math
import sys
import threading
import time
import uuid
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio.testing

import zlink_trio.runtime.node
from zlink_trio.core.errors import Unavailable
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from types import ModuleType

    from zlink_trio.store import MemoryStore, Store

#: The backends ``store_url`` runs a test on (the parameter ids).
BACKENDS = ("memory", "sqlite", "redis")

#: Real seconds a store call may take under suspended autojump before the watchdog
#: fails the test (a healthy call takes milliseconds; a loaded CI machine, seconds).
STORE_CALL_LIMIT = 20.0


class StoreCallHung(AssertionError):
    """A store call under suspended autojump took longer than ``STORE_CALL_LIMIT``."""


def _redis_helpers() -> ModuleType:
    """``tests/store/redis_helpers.py``, shared (one module object) with the store suite."""
    module = sys.modules.get("redis_helpers")
    if module is None:
        path = Path(__file__).parent.parent / "store" / "redis_helpers.py"
        spec = importlib.util.spec_from_file_location("redis_helpers", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["redis_helpers"] = module
        spec.loader.exec_module(module)
    return module


@attrs.define
class InFlight:
    """Counts store I/O in flight; MockClock's autojump is off while any is.

    Every call in flight is also watched in real time (the module doc's watchdog):
    ``start`` the watchdog, ``stop`` it, then ``check`` fails the test if a call hung.
    """

    clock: trio.testing.MockClock
    count: int = 0
    #: The calls in flight: what, real start time, the scope the watchdog cancels.
    calls: dict[int, tuple[str, float, trio.CancelScope | None]] = attrs.field(factory=dict)
    #: The calls the watchdog cancelled, and why.
    hung: dict[int, str] = attrs.field(factory=dict)
    serial: int = 0
    stopping: threading.Event = attrs.field(factory=threading.Event)
    thread: threading.Thread | None = None

    @contextmanager
    def io(self, what: str = "store I/O", *, scoped: bool = True) -> Iterator[None]:
        """Count (and watch) one store call; ``scoped=False`` for opening or closing a
        store, whose nursery must not nest inside a cancel scope of ours."""
        self.count += 1
        if not self.hung:
            self.clock.autojump_threshold = math.inf
        key = self.serial = self.serial + 1
        try:
            with trio.CancelScope() if scoped else nullcontext() as scope:
                self.calls[key] = (what, time.monotonic(), scope)
                yield
            if key in self.hung:
                raise StoreCallHung(self.hung[key])
        finally:
            del self.calls[key]
            self.count -= 1
            if not self.count:
                self.clock.autojump_threshold = 0

    def counted(self, method: Callable[..., Any]) -> Callable[..., Any]:
        what = method.__qualname__

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            with self.io(what):
                return await method(*args, **kwargs)

        return call

    def start(self) -> None:
        """Start the watchdog thread for the current Trio run."""
        token = trio.lowlevel.current_trio_token()

        def watch() -> None:
            while not self.stopping.wait(1.0):
                if self.count:  # an int read: safe from this thread
                    try:
                        token.run_sync_soon(self._cancel_hung)
                    except trio.RunFinishedError:
                        return

        self.thread = threading.Thread(target=watch, name="store-call-watchdog", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join()

    def check(self) -> None:
        """Fail the test if the watchdog had to cancel a hung store call."""
        if self.hung:
            pytest.fail("; ".join(self.hung.values()), pytrace=False)

    def _cancel_hung(self) -> None:
        # Runs in the Trio thread (run_sync_soon), so ``calls`` is consistent here.
        now = time.monotonic()
        for key, (what, started, scope) in self.calls.items():
            if now - started > STORE_CALL_LIMIT and key not in self.hung:
                self.hung[key] = (
                    f"store call {what} got no answer within {STORE_CALL_LIMIT:.0f} s of "
                    "real time while MockClock autojump was suspended for it: a hang in "
                    "the store backend (every call must end with a result or a typed "
                    "error within its deadline)")
                if scope is not None:
                    scope.cancel()
                # From now on mock time moves again, so the test's own fail_after fires
                # even where the hung call could not be cancelled (opening a store).
                self.clock.autojump_threshold = 0

    def open_store(self, real: Callable[..., Any]) -> Callable[..., Any]:
        @asynccontextmanager
        async def opener(url: str | MemoryStore, *,
                         relocation: str | None = None) -> AsyncIterator[Store]:
            manager = real(url, relocation=relocation)
            with self.io(f"open_store({url!r})", scoped=False):
                opened = await manager.__aenter__()
            try:
                yield opened
            except BaseException as exc:
                with self.io(f"closing the store {url!r}", scoped=False):
                    if not await manager.__aexit__(type(exc), exc, exc.__traceback__):
                        raise
            else:
                with self.io(f"closing the store {url!r}", scoped=False):
                    await manager.__aexit__(None, None, None)

        return opener

    def patch_backend(self, monkeypatch: pytest.MonkeyPatch, store: Store) -> None:
        """Count every public store call of ``store``'s backend classes (all instances)."""
        combined = getattr(store, "combined", None)
        parts = [store.location, store.relocation] + ([combined] if combined else [])
        for part in parts:
            for name, method in inspect.getmembers(type(part), inspect.iscoroutinefunction):
                if not name.startswith("_"):
                    monkeypatch.setattr(type(part), name, self.counted(method))


@attrs.frozen
class Backend:
    url: str
    #: The same store opened for the test to read.
    view: Store


@pytest.fixture(params=BACKENDS)
async def _backend(request: pytest.FixtureRequest, tmp_path: Path,
                   autojump_clock: trio.testing.MockClock,
                   monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Backend]:
    kind = request.param
    if kind == "memory":
        url = f"memory://runtime-{uuid.uuid4().hex[:12]}"
        async with open_store(url) as view:
            yield Backend(url, view)
        return
    in_flight = InFlight(autojump_clock)
    in_flight.start()
    try:
        async with _shared_backend(kind, in_flight, tmp_path, monkeypatch) as backend:
            yield backend
    finally:
        in_flight.stop()
    in_flight.check()


@asynccontextmanager
async def _shared_backend(kind: str, in_flight: InFlight, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Backend]:
    """SQLite or Redis: store calls counted (autojump suspended) and watched."""
    opener = in_flight.open_store(open_store)
    monkeypatch.setattr(zlink_trio.runtime.node, "open_store", opener)
    if kind == "sqlite":
        url = f"sqlite://{tmp_path / 'store.db'}"
        async with opener(url) as view:
            in_flight.patch_backend(monkeypatch, view)
            yield Backend(url, view)
        return
    helpers = _redis_helpers()
    prefix = helpers.fresh_prefix()
    url = helpers.url_with(prefix)

    async def delete_keys() -> None:
        with in_flight.io(f"deleting the keys of {prefix!r}"):
            await helpers.delete_prefix(prefix)

    problem = ""
    async with AsyncExitStack() as stack:
        try:
            view = await stack.enter_async_context(opener(url))
        except Unavailable as error:
            problem = error.message  # fail/skip outside the handler, once the error is gone
        if not problem:
            stack.push_async_callback(delete_keys)
            in_flight.patch_backend(monkeypatch, view)
            yield Backend(url, view)
    if problem:
        helpers.unreachable(problem)  # fails under CI, skips locally


@pytest.fixture
def store_url(_backend: Backend) -> str:
    """A store URL of each backend, valid (and isolated) for one test; see the module doc."""
    return _backend.url


@pytest.fixture
def store(_backend: Backend) -> Store:
    """The ``store_url`` store, opened for the test to read; the nodes share its contents."""
    return _backend.view
