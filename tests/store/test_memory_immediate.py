"""``MemoryStore.immediate``: the cold activation's store calls without a checkpoint.

Its coroutines never suspend and run the same transactions as the store's own
methods; a wrapper of the class's methods sees its calls, and a store opened with
``immediate=False`` (a test double) or seen through a proxy offers none.
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
from zlink_trio.testing import MemoryStoreWith

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


async def test_counting_sees_the_immediate_calls() -> None:
    store = MemoryStore()
    owner = await claim(store)
    immediate = immediate_of(store)
    assert immediate is not None
    with count_store_calls(store) as calls:  # wraps the classes' methods
        assert immediate_of(store) is immediate
        assert _now(immediate.find("s-1")) is None
        _now(immediate.reserve_with_root(
            "s-1", b"root", kind=SpotKind.INSTANCE, stable_type=_INSTANCE_TYPE, mesh=MESH,
            owner=owner.owner(), now=0.0))
    assert calls == {"location.find": 1, "combined.reserve_with_root": 1}


def test_no_immediate_when_opened_without() -> None:
    assert immediate_of(MemoryStore(immediate=False)) is None

    class Double(MemoryLocationStore):
        pass

    # A double sees every call: its store offers no immediate transactions.
    assert immediate_of(MemoryStoreWith(Double())) is None

    class SubStore(MemoryStore):
        pass

    assert immediate_of(SubStore()) is not None


def test_no_immediate_through_a_proxy() -> None:
    store = MemoryStore()
    timed = timed_store(store, location="memory://", relocation="memory://",
                        observe=lambda *args: None)
    assert immediate_of(timed) is None
