"""``timed_store``: a :class:`Store` that times every call of the store it wraps.

Theory of operation
-------------------
``open_node(metrics=...)`` wraps its store with :func:`timed_store`; without metrics
the store is used as it is, so nothing here costs a node that records nothing.  The
three parts -- ``location``, ``relocation``, ``combined`` -- become :class:`TimedPart`
proxies: each coroutine method, looked up once and cached on the proxy, measures the
wall time of the call (``time.perf_counter``) and reports ``(backend, part, method,
seconds, error)`` to ``observe`` when it returns or raises (``error`` is the class
name of what it raised, e.g. ``AuthorityExists``, ``StoreUnavailable``).  Every
other attribute is the wrapped object's.  The calls themselves, their order and their
errors are unchanged; a built-in ``combined`` group is one call (one transaction) and
is timed as one.

``backend`` is the URL scheme the part was opened with (``memory``, ``sqlite``,
``redis``); with a separate Relocation Store the combined steps are ``split``.
"""

from __future__ import annotations

import inspect
import time
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.store.protocol import (
        CombinedTransactions,
        LocationStore,
        RelocationStore,
        Store,
    )

__all__ = ("TimedPart", "TimedStore", "backend_of", "timed_store")



def backend_of(url: object) -> str:
    """The backend label of a store URL (its scheme), ``memory`` for a MemoryStore."""
    if isinstance(url, str) and "://" in url:
        return url.split("://", 1)[0].lower()
    return "memory"


def _timed(method: Callable[..., Awaitable[Any]], backend: str, part: str, name: str,
           observe: Callable[[str, str, str, float, str | None], None]
           ) -> Callable[..., Awaitable[Any]]:
    async def call(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            result = await method(*args, **kwargs)
        except BaseException as exc:
            observe(backend, part, name, time.perf_counter() - started, type(exc).__name__)
            raise
        observe(backend, part, name, time.perf_counter() - started, None)
        return result

    call.__name__ = name
    call.__doc__ = method.__doc__
    return call


class TimedPart:
    """One part of a store (location, relocation or combined) with its calls timed."""

    def __init__(self, inner: object, backend: str, part: str,
                 observe: Callable[[str, str, str, float, str | None], None]) -> None:
        self._inner = inner
        self._backend = backend
        self._part = part
        self._observe = observe

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(attr):
            return attr
        timed = _timed(attr, self._backend, self._part, name, self._observe)
        setattr(self, name, timed)  # cached: the next lookup is an instance attribute
        return timed

    def __repr__(self) -> str:
        return f"<timed {self._part} {self._inner!r}>"


class TimedStore:
    """A :class:`Store` whose three parts are :class:`TimedPart` proxies."""

    def __init__(self, store: Store, *, location: str, relocation: str,
                 observe: Callable[[str, str, str, float, str | None], None]) -> None:
        self._store = store
        combined = location if location == relocation else "split"
        self._location = cast("LocationStore", TimedPart(store.location, location,
                                                         "location", observe))
        self._relocation = cast("RelocationStore", TimedPart(store.relocation, relocation,
                                                             "relocation", observe))
        self._combined = cast("CombinedTransactions", TimedPart(store.combined, combined,
                                                                "combined", observe))

    @property
    def location(self) -> LocationStore:
        """The Location Store, timed."""
        return self._location

    @property
    def relocation(self) -> RelocationStore:
        """The Relocation Store, timed."""
        return self._relocation

    @property
    def combined(self) -> CombinedTransactions:
        """The combined transactions, timed."""
        return self._combined

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def timed_store(store: Store, *, location: str, relocation: str,
                observe: Callable[[str, str, str, float, str | None], None]) -> Store:
    """``store`` with every call timed and reported to ``observe`` (module docstring).

    ``location`` and ``relocation`` are the backend labels of the two parts
    (:func:`backend_of` of the URLs they were opened with).
    """
    return TimedStore(store, location=location, relocation=relocation, observe=observe)


if TYPE_CHECKING:
    def _conforms(timed: TimedStore) -> Store:
        # mypy proves here that the wrapper satisfies the Store protocol.
        return timed
