"""Counting the store calls in flight, and the test Redis helpers (shared by the runtime tests).

:class:`InFlight` is what ``conftest.py``'s backend fixture uses to suspend MockClock's
autojump while a store call runs (its module doc tells why) and what the relocation model
uses to know when the nodes have settled; :func:`redis_helpers` loads
``tests/store/redis_helpers.py`` once.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import math
import sys
import threading
import time
from contextlib import asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio.testing

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from types import ModuleType

    from zlink_trio.store import MemoryStore, Store

#: Real seconds a store call may take under suspended autojump before the watchdog
#: fails the test (a healthy call takes milliseconds; a loaded CI machine, seconds).
STORE_CALL_LIMIT = 20.0


class StoreCallHung(AssertionError):
    """A store call under suspended autojump took longer than ``STORE_CALL_LIMIT``."""


def redis_helpers() -> ModuleType:
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
