"""Location Store conformance: a move's payload receipt, and the release of a move whose
target died past relay-ready (``record_relocation_payload``, ``release_relay_ready``).

The source names its payload root on the Sealed record before it writes the root;
AcceptRelayReady keeps the receipt, CommitRelocation and AbortRelocation clear it.
Past relay-ready a move cannot be aborted (the source is never restored, 06 §6.1, §8)
and is not resumed by another process (06 §8): once the target's lifecycle is over,
ReleaseRelayReady ends the incarnation -- the record is deleted, both capacity units
are returned, and the ID takes a new incarnation with a larger ObjectGeneration.
Runs once per backend under an absolute ``trio.fail_after``; every refusal is checked
to have written nothing (the record, the statistics and both nodes' units).
"""

from __future__ import annotations

import pytest
import trio
from store_helpers import LEASE, claim, ready, units

from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.records import AuthorityRecord, AuthorityState
from zlink_trio.store import TargetAlive
from zlink_trio.store.rules.relocation_store import receipt_of

TIMEOUT = 5
LATE = LEASE + 1.0  # every lease of claims made at 0 has expired
PAYLOAD = receipt_of(b"a captured relocation payload")
OTHER = receipt_of(b"another payload")


async def _snapshot(store, *nodes):
    return (await store.location.find("r-1"), await store.location.statistics(),
            [await units(store, n) for n in nodes])


async def _moving(store, stage, *, target_lease=LEASE):
    """Nodes a and b, r-1 Ready at a and moved toward b up to ``stage``."""
    a = await claim(store, "node-a", lease=100.0)
    b = await claim(store, "node-b", lease=target_lease)
    r = await ready(store, a)
    loc = store.location
    stages = ("ready", "relocating", "sealed", "named", "relay_ready")
    if stages.index(stage) >= 1:
        await loc.begin_relocation(r.fence(), target=b.owner(), now=0.0)
    if stages.index(stage) >= 2:
        await loc.seal_relocation(r.fence(), now=0.0)
    if stages.index(stage) >= 3:
        await loc.record_relocation_payload(r.fence(), payload=PAYLOAD, now=0.0)
    if stages.index(stage) >= 4:
        await loc.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
    return a, b, r


# -- the payload receipt --------------------------------------------------------------------


async def test_a_sealed_record_names_its_payload_until_commit(store):
    with trio.fail_after(TIMEOUT):
        _a, b, r = await _moving(store, "sealed")
        loc = store.location
        sealed = await loc.find("r-1")
        named = await loc.record_relocation_payload(r.fence(), payload=PAYLOAD, now=0.0)
        assert named.relocation_payload == PAYLOAD
        assert named.state is AuthorityState.SEALED
        assert named.store_version == sealed.store_version + 1
        assert await loc.find("r-1") == named
        # Idempotent: the same receipt again writes nothing.
        assert await loc.record_relocation_payload(r.fence(), payload=PAYLOAD, now=0.0) == named
        relay = await loc.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
        assert relay.relocation_payload == PAYLOAD  # kept past relay-ready
        moved = await loc.commit_relocation(r.fence(), now=0.0)
        assert moved.relocation_payload is None
        assert (await loc.find("r-1")).relocation_payload is None


async def test_an_aborted_move_forgets_its_payload(store):
    with trio.fail_after(TIMEOUT):
        _a, _b, r = await _moving(store, "named")
        kept = await store.location.abort_relocation(r.fence())
        assert kept.state is AuthorityState.READY
        assert kept.relocation_payload is None
        assert (await store.location.find("r-1")).relocation_payload is None


@pytest.mark.parametrize("stage", ["ready", "relocating", "relay_ready"])
async def test_only_a_sealed_record_takes_a_payload(store, stage):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, stage)
        before = await _snapshot(store, a, b)
        with pytest.raises(StaleFence):
            await store.location.record_relocation_payload(r.fence(), payload=OTHER, now=0.0)
        assert await _snapshot(store, a, b) == before


async def test_record_relocation_payload_refusals_write_nothing(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "sealed")
        loc = store.location
        before = await _snapshot(store, a, b)
        with pytest.raises(InvalidOperation):
            await loc.record_relocation_payload(r.fence(), payload="sha256:x", now=0.0)
        with pytest.raises(InvalidOperation):
            await loc.record_relocation_payload(r.fence(), payload=PAYLOAD, now=float("nan"))
        wrong = AuthorityRecord(**{**_fields(r), "owner_generation": 2}).fence()
        with pytest.raises(StaleFence):
            await loc.record_relocation_payload(wrong, payload=PAYLOAD, now=0.0)
        with pytest.raises(Unavailable):  # the source's lease is over
            await loc.record_relocation_payload(r.fence(), payload=PAYLOAD, now=200.0)
        assert await _snapshot(store, a, b) == before


def _fields(record):
    return {f: getattr(record, f) for f in (
        "spot_id", "kind", "stable_type", "mesh", "state", "object_generation",
        "owner_generation", "store_version", "owner")}


# -- ReleaseRelayReady ----------------------------------------------------------------------


async def test_a_move_whose_target_died_past_relay_ready_is_released(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relay_ready", target_lease=1.0)
        loc = store.location
        relay = await loc.find("r-1")
        assert (await units(store, a), await units(store, b)) == ((0, 1), (1, 0))
        released = await loc.release_relay_ready(r.fence(), target=b.owner(), now=LATE)
        assert released == relay  # the record as it was: it names the payload root
        assert released.relocation_payload == PAYLOAD
        assert await loc.find("r-1") is None
        assert (await units(store, a), await units(store, b)) == ((0, 0), (0, 0))
        stats = await loc.statistics()
        assert (stats.relay_ready, stats.ready) == (0, 2)  # the two Entry claims
        # Idempotent: that incarnation is gone.
        assert await loc.release_relay_ready(r.fence(), target=b.owner(), now=LATE) is None
        # The ID takes a new incarnation, with a larger ObjectGeneration.
        again = await ready(store, a)
        assert again.object_generation > r.object_generation
        assert await loc.release_relay_ready(r.fence(), target=b.owner(), now=LATE) is None


async def test_a_move_toward_a_live_target_is_not_released(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relay_ready", target_lease=100.0)
        before = await _snapshot(store, a, b)
        with pytest.raises(TargetAlive) as refused:
            await store.location.release_relay_ready(r.fence(), target=b.owner(), now=LATE)
        assert isinstance(refused.value, InvalidOperation)
        assert refused.value.record == before[0]
        assert refused.value.lease_expires_at == pytest.approx(100.0)
        assert "commits the move itself" in refused.value.message
        assert await _snapshot(store, a, b) == before
        # Still the target's to commit.
        moved = await store.location.commit_relocation(r.fence(), now=LATE)
        assert moved.owner == b.owner()


async def test_a_restarted_target_releases_the_move_of_its_dead_lifecycle(store):
    with trio.fail_after(TIMEOUT):
        _a, b, r = await _moving(store, "relay_ready", target_lease=1.0)
        # The target's NodeId claims again (a new lifecycle): the old one is over.
        restarted = await claim(store, "node-b", now=LATE)
        assert restarted.lifecycle_generation == b.lifecycle_generation + 1
        assert await store.location.release_relay_ready(
            r.fence(), target=b.owner(), now=LATE) is not None
        assert await store.location.find("r-1") is None
        assert await units(store, restarted) == (0, 0)


@pytest.mark.parametrize("stage", ["ready", "relocating", "sealed"])
async def test_release_relay_ready_refuses_a_move_before_relay_ready(store, stage):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, stage, target_lease=1.0)
        before = await _snapshot(store, a, b)
        with pytest.raises(StaleFence):
            await store.location.release_relay_ready(r.fence(), target=b.owner(), now=LATE)
        assert await _snapshot(store, a, b) == before


async def test_release_relay_ready_refusals_write_nothing(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relay_ready", target_lease=1.0)
        c = await claim(store, "node-c", lease=1.0)
        loc = store.location
        before = await _snapshot(store, a, b, c)
        with pytest.raises(InvalidOperation):
            await loc.release_relay_ready(r.fence(), target="node-b", now=LATE)
        with pytest.raises(InvalidOperation):
            await loc.release_relay_ready(r.fence(), target=b.owner(), now=float("inf"))
        with pytest.raises(StaleFence):  # another target than the move names
            await loc.release_relay_ready(r.fence(), target=c.owner(), now=LATE)
        wrong = AuthorityRecord(**{**_fields(r), "owner_generation": 2}).fence()
        with pytest.raises(StaleFence):
            await loc.release_relay_ready(wrong, target=b.owner(), now=LATE)
        assert await _snapshot(store, a, b, c) == before
