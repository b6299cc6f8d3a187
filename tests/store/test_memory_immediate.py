"""``MemoryStore.immediate``: the cold activation's store calls without a checkpoint.

Its coroutines never suspend and run the same transactions as the store's own
methods, and it is offered only while nothing replaced those methods (a subclass, a
patch, a proxy), so whatever wraps them still sees every call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio
from store_helpers import MESH, SERVED, claim

from zlink_trio.bench.stores import count_store_calls
from zlink_trio.core.identity import SpotKind
from zlink_trio.store import MemoryStore
from zlink_trio.store.combined_protocol import immediate_of
from zlink_trio.store.memory import MemoryLocationStore
from zlink_trio.store.timed import timed_store

if TYPE_CHECKING:
    from collections.abc import Coroutine

_INSTANCE_TYPE = next(t for t, k in SERVED.items() if k is SpotKind.INSTANCE)


def _now(call: Coroutine[Any, Any, Any]) -> Any:
    """``call``'s result; it must end without suspending (no checkpoint)."""
    try:
        call.send(None)
    except StopIteration as done:
        return done.value
    call.close()
    raise AssertionError("an immediate transaction suspended")


async def test_immediate_runs_the_activation_transactions() -> None:
    store = MemoryStore()
    owner = await claim(store)
    immediate = immediate_of(store)
    assert immediate is not None
    with trio.fail_after(5):
        assert _now(immediate.find("s-1")) is None
        fence, receipt = _now(immediate.reserve_with_root(
            "s-1", b"root", kind=SpotKind.INSTANCE, stable_type=_INSTANCE_TYPE, mesh=MESH,
            owner=owner.owner(), now=0.0))
        ready, seq = _now(immediate.commit_ready_with_first_record(
            fence, b"root", now=0.0))
        assert seq == 1
        assert await store.location.find("s-1") == ready == _now(immediate.find("s-1"))
        done = _now(immediate.finish_first_record("s-1", fence.object_generation, seq=1,
                                                  expected_version=ready.store_version,
                                                  root=receipt))
        assert (done.cursor_moved, done.pointer_removed, done.root_deleted) == (
            True, True, True)
        record = await store.location.find("s-1")
        assert record is not None
        assert record.recovery_pointer is None


def test_no_immediate_once_a_method_is_replaced() -> None:
    store = MemoryStore()
    assert immediate_of(store) is not None
    with count_store_calls(store):  # patches the classes: every call must be counted
        assert immediate_of(store) is None
    assert immediate_of(store) is not None

    class Sub(MemoryLocationStore):
        pass

    store._location = Sub()  # a swapped half
    assert immediate_of(store) is None

    class SubStore(MemoryStore):
        pass

    assert immediate_of(SubStore()) is None


def test_no_immediate_through_a_proxy() -> None:
    store = MemoryStore()
    timed = timed_store(store, location="memory://", relocation="memory://",
                        observe=lambda *args: None)
    assert immediate_of(timed) is None
