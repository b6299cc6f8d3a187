"""Record, fence, SpotRef and descriptor values (sans-IO, no event loop)."""

from __future__ import annotations

import json

import attrs
import pytest

from statecharts import SpotAuthority, compile
from zlink_trio.core.descriptor import NodeClaim, NodeDescriptor
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id
from zlink_trio.core.placement import Role
from zlink_trio.core.records import (
    MAX_GENERATION,
    MOVING_STATES,
    AuthorityRecord,
    AuthorityState,
    CreationIntent,
    OwnerFence,
    RecoveryPointer,
    SpotRef,
)

RID = NodeRid(bytes(range(1, 17)))
SHA = "0f" * 32


def ref(**kw):
    return SpotRef(**{"spot_id": "r-1", "generation": 42, "mesh": "world", "node_rid": RID, **kw})


def test_spot_ref_json_round_trip_with_decimal_generation():
    value = ref(generation=MAX_GENERATION)
    obj = value.to_json()
    assert obj["generation"] == "9223372036854775807"
    assert SpotRef.from_json(json.loads(json.dumps(obj))) == value


@pytest.mark.parametrize("generation", [0, -1, 2**63, True, 1.0])
def test_spot_ref_generation_bounds(generation):
    with pytest.raises(InvalidOperation):
        ref(generation=generation)


@pytest.mark.parametrize(
    "patch",
    [
        {"generation": 42},
        {"generation": "042"},
        {"generation": "+42"},
        {"generation": " 42"},
        {"generation": "0"},
        {"generation": "9223372036854775808"},
        {"generation": "1e3"},
        {"nodeRid": "xyz"},
        {"spotId": ""},
        {"mesh": "x" * 256},
        {"extra": "1"},
    ],
)
def test_spot_ref_from_json_refuses_bad_input(patch):
    obj = {**ref().to_json(), **patch}
    with pytest.raises(InvalidOperation):
        SpotRef.from_json(obj)


@pytest.mark.parametrize("value", [None, [], "r-1", {"spotId": "r-1"}])
def test_spot_ref_from_json_refuses_non_objects(value):
    with pytest.raises(InvalidOperation):
        SpotRef.from_json(value)


def record(**kw):
    base = {
        "spot_id": "r-1", "kind": SpotKind.USER, "stable_type": "room", "mesh": "world",
        "state": AuthorityState.READY, "object_generation": 5, "owner_generation": 1,
        "store_version": 2, "owner": OwnerFence(RID, 1),
    }
    return AuthorityRecord(**{**base, **kw})


def test_authority_record_ref_and_json():
    r = record()
    assert r.ref() == ref(generation=5)
    assert r.to_json()["objectGeneration"] == "5"
    assert r.encoded_size() == len(json.dumps(r.to_json(), separators=(",", ":")).encode())


@pytest.mark.parametrize(
    "patch",
    [
        {"creation_intent": CreationIntent(content_ref="c", sha256=SHA, size=1)},
        {"state": AuthorityState.RELOCATING},
        {"state": AuthorityState.RELAY_READY},
        {"relocation_target": OwnerFence(RID, 2)},
        {"kind": SpotKind.INVALID},
        {"kind": SpotKind.ENTRY, "state": AuthorityState.CLOSING},
        {"store_version": 0},
        {"state": AuthorityState.MISSING},
    ],
)
def test_authority_record_invariants(patch):
    with pytest.raises(InvalidOperation):
        record(**patch)


def test_stored_states_are_the_authority_charts():
    # AuthorityState is the chart's state set, in its order; Missing is the absence of a
    # record, so no record holds it (a record that says so is refused).
    table = compile(SpotAuthority)
    assert tuple(s.value for s in AuthorityState) == table.state_order
    assert {s.value for s in MOVING_STATES} == table.tags["moving"]
    with pytest.raises(InvalidOperation):
        AuthorityRecord.from_json({**record().to_json(), "state": "missing"})
    # A move is what the chart can reach from Ready by begin_relocation before it ends:
    # Ready again (committed or aborted) or Missing (released past relay-ready).
    moving, frontier = set(), {table.step("ready", "begin_relocation")}
    while frontier:
        state = frontier.pop()
        moving.add(state)
        frontier |= {t for (s, _), t in table.transitions.items() if s == state} - moving - {
            "ready", "missing"}
    assert {s.value for s in MOVING_STATES} == moving == {"relocating", "sealed", "relay_ready"}


def test_creation_intent_is_at_most_one_mib():
    CreationIntent(content_ref="c", sha256=SHA, size=1024 * 1024)
    with pytest.raises(InvalidOperation):
        CreationIntent(content_ref="c", sha256=SHA, size=1024 * 1024 + 1)
    with pytest.raises(InvalidOperation):
        CreationIntent(content_ref="c", sha256=SHA.upper(), size=1)


def descriptor(**kw):
    base = {
        "mesh": "world", "node_rid": RID, "node_id": "node-a", "endpoint": "ws://h:1",
        "roles": [Role.OBJECT_SERVER], "served_types": {"room": SpotKind.USER,
                                                        "counter": SpotKind.INSTANCE},
        "capacity": 10, "entry_spot_id": "node-a-entry-" + "0" * 8 + "-0000-4000-8000-" + "0" * 12,
    }
    return NodeDescriptor(**{**base, **kw})


def test_descriptor_digest_covers_immutable_fields_including_entry_id():
    d = descriptor()
    assert d.digest == descriptor().digest
    # Insertion order of served types does not matter.
    assert d.digest == descriptor(served_types={"counter": SpotKind.INSTANCE,
                                                "room": SpotKind.USER}).digest
    for patch in ({"entry_spot_id": new_entry_spot_id("node-a")}, {"capacity": 11},
                  {"endpoint": "ws://h:2"}, {"placement_weight": 2.0}, {"node_id": "b"}):
        assert attrs.evolve(d, **patch).digest != d.digest


@pytest.mark.parametrize(
    "patch",
    [
        {"entry_spot_id": "not-an-entry-id"},
        {"roles": [Role.OBJECT_CLIENT]},  # serves types without object_server
        {"served_types": {"x": SpotKind.ENTRY}},
        {"capacity": -1},
        {"placement_weight": -1.0},
        {"placement_weight": float("nan")},
        {"roles": ["gateway"]},
        {"mesh": ""},
    ],
)
def test_descriptor_validation(patch):
    with pytest.raises(InvalidOperation):
        descriptor(**patch)


def test_node_claim_liveness_and_owner():
    c = NodeClaim(descriptor=descriptor(), lifecycle_generation=3, lease_expires_at=10.0)
    assert c.is_live(9.99)
    assert not c.is_live(10.0)
    assert c.owner() == OwnerFence(RID, 3)
    assert c.key == ("world", RID)


# -- JSON round trips (what the durable stores keep) ----------------------------------------


def full_records():
    intent = CreationIntent(content_ref="sha256:" + SHA, sha256=SHA, size=7)
    pointer = RecoveryPointer(root_ref="sha256:" + SHA, sha256=SHA, size=9, version=2)
    return [
        record(),
        record(state=AuthorityState.CREATING, creation_intent=intent, recovery_pointer=pointer,
               object_generation=MAX_GENERATION, store_version=MAX_GENERATION),
        record(state=AuthorityState.SEALED, relocation_target=OwnerFence(RID, 7),
               kind=SpotKind.INSTANCE, owner_generation=3),
        record(state=AuthorityState.RELAY_READY, relocation_target=OwnerFence(RID, 8)),
        record(kind=SpotKind.ENTRY, stable_type="zlink.entry", spot_id=new_entry_spot_id("n")),
    ]


@pytest.mark.parametrize("value", full_records())
def test_authority_record_json_round_trip(value):
    assert AuthorityRecord.from_json(json.loads(json.dumps(value.to_json()))) == value


@pytest.mark.parametrize(
    "patch",
    [
        {"kind": "invalid"},
        {"kind": 2},
        {"state": "missing"},
        {"objectGeneration": 5},
        {"storeVersion": "0"},
        {"owner": {"nodeRid": str(RID)}},
        {"owner": {"nodeRid": "zz", "lifecycleGeneration": "1"}},
        {"creationIntent": {"contentRef": "c", "sha256": SHA, "size": 1}},  # not Creating
        {"recoveryPointer": {"rootRef": "r", "sha256": SHA, "size": -1, "version": 1}},
        {"relocationTarget": {"nodeRid": str(RID), "lifecycleGeneration": "2"}},
        {"extra": None},
    ],
)
def test_authority_record_from_json_refuses_bad_input(patch):
    with pytest.raises(InvalidOperation):
        AuthorityRecord.from_json({**record().to_json(), **patch})


@pytest.mark.parametrize("value", [None, [], "r-1", {"spotId": "r-1"}])
def test_authority_record_from_json_refuses_non_objects(value):
    with pytest.raises(InvalidOperation):
        AuthorityRecord.from_json(value)


def test_owner_fence_json_round_trip():
    fence = OwnerFence(RID, MAX_GENERATION)
    assert OwnerFence.from_json(json.loads(json.dumps(fence.to_json()))) == fence


def test_descriptor_and_claim_json_round_trip():
    d = descriptor(placement_weight=2.5)
    assert NodeDescriptor.from_json(json.loads(json.dumps(d.to_json()))) == d
    c = NodeClaim(descriptor=d, lifecycle_generation=3, lease_expires_at=10.125,
                  store_version=4)
    back = NodeClaim.from_json(json.loads(json.dumps(c.to_json())))
    assert back == c
    assert back.descriptor.digest == d.digest


@pytest.mark.parametrize(
    "patch",
    [
        {"capacity": 11},  # digest no longer matches
        {"digest": "00" * 32},
        {"roles": "object_server"},
        {"servedTypes": {"room": "entry"}},
        {"servedTypes": []},
        {"placementWeight": "1"},
        {"nodeRid": 5},
        {"extra": 1},
    ],
)
def test_descriptor_from_json_refuses_bad_input(patch):
    with pytest.raises(InvalidOperation):
        NodeDescriptor.from_json({**descriptor().to_json(), **patch})


def test_claim_from_json_refuses_bad_input():
    good = NodeClaim(descriptor=descriptor(), lifecycle_generation=1,
                     lease_expires_at=1.0).to_json()
    for patch in ({"lifecycleGeneration": 1}, {"leaseExpiresAt": "1"}, {"storeVersion": "0"},
                  {"descriptor": None}):
        with pytest.raises(InvalidOperation):
            NodeClaim.from_json({**good, **patch})


def test_claim_json_carries_the_close_placement_mark_only_when_set():
    open_claim = NodeClaim(descriptor=descriptor(), lifecycle_generation=2,
                           lease_expires_at=5.0, store_version=3)
    # Accepting: exactly the JSON earlier versions wrote, and read back as accepting.
    assert "acceptsPlacements" not in open_claim.to_json()
    assert NodeClaim.from_json(open_claim.to_json()).accepts_placements is True
    closed = NodeClaim(descriptor=descriptor(), lifecycle_generation=2, lease_expires_at=5.0,
                       store_version=4, accepts_placements=False)
    assert closed.to_json()["acceptsPlacements"] is False
    assert NodeClaim.from_json(json.loads(json.dumps(closed.to_json()))) == closed
    for bad in (True, "false", 0, None):
        with pytest.raises(InvalidOperation):
            NodeClaim.from_json({**open_claim.to_json(), "acceptsPlacements": bad})
    with pytest.raises(InvalidOperation):
        NodeClaim(descriptor=descriptor(), lifecycle_generation=1, lease_expires_at=1.0,
                  accepts_placements=0)  # type: ignore[arg-type]
