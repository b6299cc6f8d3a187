"""Store calls in flight under a mock clock: count them, suspend autojump, watch for hangs.

Theory of operation
-------------------
``trio.testing.MockClock(autojump_threshold=0)`` jumps to the next deadline as soon as
every task is blocked -- including a task waiting for a Redis reply or a SQLite worker
thread, since Trio cannot tell I/O from sleeping.  A jump in the middle of a store round
trip lands on whatever deadline is next (a lease renewal, an idle sweep, the test's own
``fail_after``), so a test on a shared store would fail at random.  :class:`InFlight`
counts the store calls in flight -- every public coroutine method of the backend's
Location and Relocation Store classes (:meth:`InFlight.patch_backend`), and opening and
closing the store (:meth:`InFlight.open_store`) -- and sets the clock's autojump
threshold to ``inf`` while any is, so store calls take no mock time, as on
``memory://``, and mock time still jumps the moment the test is idle with no I/O.

The same count tells a race model when the nodes have *settled*: no runnable task for a
few real milliseconds and no store call in flight (:func:`settle`).

The watchdog.  With autojump suspended, mock time stands still while a store call is in
flight, so no ``trio.fail_after`` can fire: a store call that never answers would hang
the test forever.  A real-time watchdog thread (:meth:`InFlight.start`) looks once a
second and cancels a store call that has taken more than :data:`STORE_CALL_LIMIT` real
seconds; :meth:`InFlight.check` then raises :class:`StoreCallHung` naming it.

Patching.  The backend classes are patched through a ``patcher`` with pytest's
``MonkeyPatch.setattr(target, name, value)`` shape: pytest's own ``monkeypatch`` fixture,
or this module's :class:`Patcher` (``undo()`` restores everything) where pytest is not
around -- this module does not import pytest.
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
import time
from contextlib import asynccontextmanager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio
import trio.testing

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from zlink_trio.store import MemoryStore, Store

__all__ = ("STORE_CALL_LIMIT", "InFlight", "Patcher", "SetAttr", "StoreCallHung", "settle")

#: Real seconds a store call may take under suspended autojump before the watchdog
#: fails the test (a healthy call takes milliseconds; a loaded CI machine, seconds).
STORE_CALL_LIMIT = 20.0


class StoreCallHung(AssertionError):
    """A store call under suspended autojump took longer than :data:`STORE_CALL_LIMIT`."""


class SetAttr(Protocol):
    """What :meth:`InFlight.patch_backend` needs: pytest's ``monkeypatch`` or a :class:`Patcher`."""

    def setattr(self, target: object, name: str, value: object) -> None: ...


class Patcher:
    """``setattr`` that remembers the old values; :meth:`undo` puts them back (newest first)."""

    def __init__(self) -> None:
        self._saved: list[tuple[object, str, object]] = []

    def setattr(self, target: object, name: str, value: object) -> None:
        self._saved.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    def undo(self) -> None:
        while self._saved:
            target, name, old = self._saved.pop()
            setattr(target, name, old)


@attrs.define
class InFlight:
    """Counts store I/O in flight; a MockClock's autojump is off while any is.

    ``clock`` is the MockClock whose autojump to suspend, or ``None`` to only count
    (a test that jumps the clock itself). Every call in flight is also watched in real
    time: :meth:`start` the watchdog, :meth:`stop` it, then :meth:`check`.
    """

    clock: trio.testing.MockClock | None = None
    count: int = 0
    #: The calls in flight: what, real start time, the scope the watchdog cancels.
    calls: dict[int, tuple[str, float, trio.CancelScope | None]] = attrs.field(factory=dict)
    #: The calls the watchdog cancelled, and why.
    hung: dict[int, str] = attrs.field(factory=dict)
    serial: int = 0
    stopping: threading.Event = attrs.field(factory=threading.Event)
    thread: threading.Thread | None = None

    def _autojump(self, threshold: float) -> None:
        if self.clock is not None:
            self.clock.autojump_threshold = threshold

    @contextmanager
    def io(self, what: str = "store I/O", *, scoped: bool = True) -> Iterator[None]:
        """Count (and watch) one store call; ``scoped=False`` for opening or closing a
        store, whose nursery must not nest inside a cancel scope of ours."""
        self.count += 1
        if not self.hung:
            self._autojump(math.inf)
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
                self._autojump(0)

    def counted(self, method: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` (a coroutine function) with every call counted."""
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
        """Stop the watchdog thread (and wait for it)."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join()

    def check(self) -> None:
        """Raise :class:`StoreCallHung` if the watchdog had to cancel a hung store call."""
        if self.hung:
            raise StoreCallHung("; ".join(self.hung.values()))

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
                self._autojump(0)

    def open_store(self, real: Callable[..., Any]) -> Callable[..., Any]:
        """``real`` (``zlink_trio.store.open_store``) with opening and closing counted."""
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

    def patch_backend(self, patcher: SetAttr, store: Store) -> None:
        """Count every public store call of ``store``'s backend classes (all instances)."""
        combined = getattr(store, "combined", None)
        parts = [store.location, store.relocation] + ([combined] if combined else [])
        for part in parts:
            for name, method in inspect.getmembers(type(part), inspect.iscoroutinefunction):
                if not name.startswith("_"):
                    patcher.setattr(type(part), name, self.counted(method))

    def patch_open_store(self, patcher: SetAttr) -> None:
        """Count ``open_node``'s own opening and closing of its store."""
        import zlink_trio.runtime.node as node_module
        from zlink_trio.store import open_store

        patcher.setattr(node_module, "open_store", self.open_store(open_store))


async def settle(in_flight: InFlight | None = None, *, cushion: float = 0.0,
                 limit: int = 2000) -> None:
    """Return once nothing runs: no runnable task for ``cushion`` real seconds (so link
    bytes have landed) and no store call counted by ``in_flight``.

    Raises ``AssertionError`` if a store call stays in flight for ``limit`` rounds.
    """
    wait = cushion
    for _ in range(limit):
        await trio.testing.wait_all_tasks_blocked(wait)
        if in_flight is None or not in_flight.count:
            return
        wait = max(cushion, 0.004)  # a store call runs on a thread or a socket: real time
    raise AssertionError("a store call stayed in flight for seconds")
