"""Store doubles: a memory store whose Location Store is a test's own subclass.

Theory of operation
-------------------
To steer one store transaction -- answer a renewal late, refuse a Reserve, count
``find`` calls -- subclass :class:`~zlink_trio.store.memory.MemoryLocationStore`,
override that method (calling ``super()`` for the real transaction), and give the
double to :class:`MemoryStoreWith`; pass the result as ``store=`` to a node (or to
:func:`~zlink_trio.testing.open_test_cluster`). Everything else is the memory store's,
the combined cold-activation transactions included: they reach the Location Store
through :attr:`MemoryStoreWith.location`, so they see the double too, and the store
offers no immediate transactions (``MemoryStore(immediate=False)``: those read the
states directly, past the double). For faults that
need no subclass (fail the next call, pause a node's store) use
:class:`~zlink_trio.testing.Faults`.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from zlink_trio.store import MemoryStore
from zlink_trio.store.memory import MemoryLocationStore

__all__ = ("MemoryStoreWith",)

L = TypeVar("L", bound=MemoryLocationStore)


class MemoryStoreWith(MemoryStore, Generic[L]):
    """A :class:`MemoryStore` whose Location Store is ``location``, a test double."""

    def __init__(self, location: L) -> None:
        super().__init__(immediate=False)
        self._double = location

    @property
    def location(self) -> L:
        """The double."""
        return self._double
