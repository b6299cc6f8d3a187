"""A Spot's durable state as its code sees it: ``ctx.state`` (docs/state.md).

Theory of operation
-------------------
A Spot or Actor type declared with ``state=SomeAttrsClass`` keeps one value of that
class in the node's store under its ID, beside its authority (``store.state_steps``).
The value outlives the incarnation that saved it -- idle eviction, a crash and
restart recovery, a move -- until ``clear()`` or the close of a User Spot or an Actor.

The incarnation loads it before its factory runs (:meth:`DurableState.fetch`, awaited
by ``Incarnation.build``), so ``ctx.state.load()`` answers at once, in ``__init__``
too. ``save`` and ``clear`` write through the store with this incarnation's fence, and
the store checks that fence against the authority record in the same transaction: the
write happens only while this incarnation owns the Spot with a live lease and serves
it. Otherwise it raises (:class:`StaleFence` when another incarnation owns the Spot
now, :class:`Unavailable` when this one cannot act) and nothing was written -- what
``load()`` returns stays the last value saved. A zombie incarnation (paused past its
lease, cut off from the store) therefore never overwrites its successor's state.

Who may write, and when, is :class:`~.owner_writes.OwnerWrites`' rule (the fence
``ctx.remind`` writes with too): only between the incarnation's opening and its end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from zlink_trio.core.errors import InvalidOperation, RemoteProtocolError
from zlink_trio.runtime import observers

if TYPE_CHECKING:
    from zlink_trio.runtime.incarnation.owner_writes import OwnerWrites

__all__ = ("DurableState",)

T = TypeVar("T")


class DurableState(Generic[T]):
    """``ctx.state``: the Spot's durable value of its declared ``state`` class."""

    __slots__ = ("_type", "_value", "_version", "_writes")

    def __init__(self, writes: OwnerWrites, state_type: type[T]) -> None:
        self._writes = writes
        self._type = state_type
        self._value: T | None = None
        self._version = 0

    @property
    def ended(self) -> bool:
        """Whether its incarnation has ended here (closed, moved away, or its activation
        failed): from then on the store refuses its writes."""
        return self._writes.ended

    async def fetch(self) -> None:
        """Read the stored value (before the factory runs). Raises
        :class:`InvalidOperation` when the stored bytes do not decode as the declared
        class (the class changed incompatibly since they were saved)."""
        inc = self._writes
        saved = await inc.rt.store.location.load_state(inc.spot_id)
        if saved is None:
            self._value, self._version = None, 0
            self._loaded()
            return
        try:
            self._value = inc.rt.codec.from_json(saved.data, self._type)
        except RemoteProtocolError as exc:
            raise InvalidOperation(
                f"the durable state of {inc.spot_id!r} (version {saved.version}) does not "
                f"decode as {self._type.__qualname__}: {exc.message}; keep the class "
                "compatible with what was saved, or clear the state") from exc
        self._version = saved.version
        self._loaded()

    def _loaded(self) -> None:
        if observers.OBSERVERS:
            inc = self._writes
            for observer in observers.OBSERVERS:
                observer.state_loaded(inc.rt.node_id, inc.spot_id, inc.generation, self,
                                      self._value, self._version)

    def _written(self, value: object, version: int | None,
                 error: BaseException | None) -> None:
        if observers.OBSERVERS:
            inc = self._writes
            for observer in observers.OBSERVERS:
                observer.state_written(inc.rt.node_id, inc.spot_id, inc.generation, self,
                                       value, version, error)

    def load(self) -> T | None:
        """The last value saved (``None`` when none was saved, or it was cleared)."""
        return self._value

    @property
    def version(self) -> int:
        """How many saves the stored value has seen (0: none stored)."""
        return self._version

    async def save(self, value: T) -> None:
        """Store ``value`` (an instance of the declared class) as the Spot's durable
        state, if this incarnation still owns the Spot (see the module docstring)."""
        if not isinstance(value, self._type):
            raise InvalidOperation(
                f"{self._writes.spot_id!r} keeps a {self._type.__qualname__} as its "
                f"state, not a {type(value).__qualname__}")
        rt = self._writes.rt
        data = rt.codec.to_json(value)
        try:
            saved = await rt.store.location.save_state(
                await self._writes.fence("its state"), data, now=rt.now())
        except Exception as exc:
            self._written(value, None, exc)
            raise
        self._value, self._version = value, saved.version
        self._written(value, saved.version, None)

    async def clear(self) -> None:
        """Delete the Spot's durable state, under the same check as :meth:`save`."""
        rt = self._writes.rt
        try:
            await rt.store.location.clear_state(await self._writes.fence("its state"),
                                                now=rt.now())
        except Exception as exc:
            self._written(None, None, exc)
            raise
        self._value, self._version = None, 0
        self._written(None, 0, None)
