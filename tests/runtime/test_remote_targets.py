"""The targets of commands 47 and 48 check the source's fence against the store before acting.

A source sends command 47 (remote create) or 48 (remote close) with the fence it read or
made in the store: the reservation's StoreVersion, ObjectGeneration, owner generation and
target lifecycle for 47, the SpotRef, owner generation and StoreVersion for 48 (06 §3.3,
§7.1). Between that read and the frame's arrival the store may have moved on; the target
reads the authority itself and acts only when it still matches: otherwise the outcome is
Unavailable and nothing is built or closed. A real source sends only fences it just read,
so these tests hand the target frames whose fences no longer match, by calling the
target's handler (``serve_remote_create`` / ``serve_remote_close``) on one node, and check
that the same handler acts on the matching frame. The links and the source side of both
commands are tested in ``test_remote_calls.py`` and ``test_spec_06_cross_node.py``.

Timing runs on ``MockClock`` (the ``autojump_clock`` fixture); every test is bounded by
``trio.fail_after`` (mock seconds, so a hang fails at once). Nothing sleeps to wait.
"""

from __future__ import annotations

import json
import time

import attrs
import pytest
import trio
from spec_helpers import PROBE, Ping, Pong, open_test_node

import zlink_trio as zl
from zlink_trio.core.errors import Unavailable
from zlink_trio.core.identity import NodeRid, SpotKind
from zlink_trio.core.records import CreationIntent, OwnerFence
from zlink_trio.runtime.coordinators.remote_close import serve_remote_close
from zlink_trio.runtime.coordinators.remote_create import serve_remote_create
from zlink_trio.store import MemoryStore
from zlink_trio.wire.frames import (
    CloseOutcome,
    CreateOutcome,
    Failure,
    UserSpotClose,
    UserSpotCreate,
)

#: The lifecycle the frames come from (a source node that is not running here).
SOURCE = OwnerFence(NodeRid.parse("0123456789abcdef0123456789abcdef"), 1)


@pytest.fixture(autouse=True)
def _fresh_probe():
    PROBE.reset()


def _deadline_ms() -> int:
    return int((time.time() + 5) * 1000)


def _unavailable(outcome: object) -> bool:
    return isinstance(outcome, Failure) and isinstance(outcome.to_error(), Unavailable)


async def test_command_47_target_builds_nothing_for_a_fence_the_store_no_longer_holds(
    autojump_clock,
):
    """The target of a remote create compares every field of the reservation fence with
    the store's Creating record: a frame naming another StoreVersion, generation or owner
    generation builds nothing (Unavailable) and leaves the reservation as it is."""
    mem = MemoryStore()
    with trio.fail_after(30):
        async with open_test_node(store=mem) as node:
            rt = node._rt
            # The source's Reserve: the creation request root, and this node as the owner.
            request = json.dumps({"spotId": "r-1", "stableType": "room",
                                  "request": None}).encode()
            receipt = await mem.relocation.put_root(request)
            fence = await mem.location.reserve(
                "r-1", kind=SpotKind.USER, stable_type="room", mesh=node.mesh,
                owner=rt.owner, now=trio.current_time(),
                creation_intent=CreationIntent.from_receipt(receipt))
            creating = await mem.location.find("r-1")
            matching = UserSpotCreate(
                correlation=1, operation_id=1, source=SOURCE, spot_id="r-1",
                stable_type="room", expected_store_version=fence.store_version,
                object_generation=fence.object_generation,
                owner_generation=fence.owner_generation, target=rt.owner,
                owner_lease_expires_ms=max(0, int(fence.owner_lease_expires_at * 1000)),
                pending_capacity=fence.pending_capacity, deadline_ms=_deadline_ms())
            for operation_id, stale in enumerate((
                    {"expected_store_version": fence.store_version + 1},
                    {"object_generation": fence.object_generation + 1},
                    {"owner_generation": fence.owner_generation + 1}), start=2):
                outcome = await serve_remote_create(rt, attrs.evolve(
                    matching, operation_id=operation_id, **stale))
                assert _unavailable(outcome), (stale, outcome)
                assert "no longer matches the store" in outcome.message
                assert PROBE.factory_runs == []
                assert await mem.location.find("r-1") == creating  # untouched
                assert node.statistics().active_spots == 0
            # The frame that matches the store builds the Spot, once.
            outcome = await serve_remote_create(rt, matching)
            assert isinstance(outcome, CreateOutcome), outcome
            assert outcome.ref.generation == fence.object_generation
            assert len(PROBE.factory_runs) == 1
            assert (await mem.location.find("r-1")).state.name == "READY"


async def test_command_48_target_closes_nothing_when_owner_generation_or_version_moved(
    autojump_clock,
):
    """The target of a remote close compares the owner generation and StoreVersion the
    source read with the store's record: a frame naming others closes nothing
    (Unavailable), and the Spot goes on serving."""
    mem = MemoryStore()
    with trio.fail_after(30):
        async with open_test_node(store=mem) as node:
            rt = node._rt
            created = await node.spots.get_or_create("r-1", "room").timeout(5)
            record = await mem.location.find("r-1")
            matching = UserSpotClose(
                correlation=1, operation_id=1, source=SOURCE, ref=created.ref,
                target=rt.owner, expected_owner_generation=record.owner_generation,
                expected_store_version=record.store_version, deadline_ms=_deadline_ms())
            for operation_id, stale in enumerate((
                    {"expected_owner_generation": record.owner_generation + 1},
                    {"expected_store_version": record.store_version + 1},
                    {"expected_store_version": record.store_version - 1}), start=2):
                outcome = await serve_remote_close(rt, attrs.evolve(
                    matching, operation_id=operation_id, **stale))
                assert _unavailable(outcome), (stale, outcome)
                assert "changed since the closing node read it" in outcome.message
                assert PROBE.closes == []
                assert await mem.location.find("r-1") == record  # still Ready, unchanged
                assert await node.client.request("r-1", Ping(), reply=Pong).timeout(5) == Pong(
                    "r-1", created.ref.generation, "Room", str(node.node_rid))
            # The frame that matches the store closes it.
            outcome = await serve_remote_close(rt, matching)
            assert outcome == CloseOutcome(closed=True)
            assert PROBE.closes == [("r-1", created.ref.generation, zl.CloseReason.CLOSED)]
            assert await mem.location.find("r-1") is None


async def test_a_target_that_lost_its_lease_creates_and_closes_nothing(autojump_clock):
    """A node that learned its lease is gone admits no command 47 or 48: both end
    Unavailable naming the lost lease, before the store is read (no factory runs and the
    Spot it hosted is not closed by the frame)."""
    mem = MemoryStore()
    with trio.fail_after(60):
        async with open_test_node(store=mem) as node:
            rt = node._rt
            created = await node.spots.get_or_create("r-1", "room").timeout(5)
            record = await mem.location.find("r-1")
            request = json.dumps({"spotId": "r-2", "stableType": "room",
                                  "request": None}).encode()
            receipt = await mem.relocation.put_root(request)
            fence = await mem.location.reserve(
                "r-2", kind=SpotKind.USER, stable_type="room", mesh=node.mesh,
                owner=rt.owner, now=trio.current_time(),
                creation_intent=CreationIntent.from_receipt(receipt))
            assert node.inspection.lose_lease("a test lost it")
            create = UserSpotCreate(
                correlation=1, operation_id=1, source=SOURCE, spot_id="r-2",
                stable_type="room", expected_store_version=fence.store_version,
                object_generation=fence.object_generation,
                owner_generation=fence.owner_generation, target=rt.owner,
                owner_lease_expires_ms=max(0, int(fence.owner_lease_expires_at * 1000)),
                pending_capacity=fence.pending_capacity, deadline_ms=_deadline_ms())
            close = UserSpotClose(
                correlation=2, operation_id=2, source=SOURCE, ref=created.ref,
                target=rt.owner, expected_owner_generation=record.owner_generation,
                expected_store_version=record.store_version, deadline_ms=_deadline_ms())
            for outcome in (await serve_remote_create(rt, create),
                            await serve_remote_close(rt, close)):
                assert _unavailable(outcome), outcome
                assert "lost its lease (a test lost it)" in outcome.message
            assert PROBE.factory_ids() == ["r-1"]
            assert (await mem.location.find("r-2")).state.name == "CREATING"
            await node.inspection.wait_lease_lost()
            # r-1 stopped with the lease (OWNERSHIP_LOST), not closed by the frame: its
            # authority stays in the store.
            assert PROBE.closes == [("r-1", created.ref.generation,
                                     zl.CloseReason.OWNERSHIP_LOST)]
            assert await mem.location.find("r-1") == record
