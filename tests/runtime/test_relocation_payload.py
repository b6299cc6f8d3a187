"""The relocation payload's format: one root for a Spot and the members it carries."""

from __future__ import annotations

import json

import pytest

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.runtime.coordinators.relocation_payload import (
    GROUP_FORMAT,
    PAYLOAD_FORMAT,
    MovedMessage,
    MovedTimer,
    RelocationPayload,
)
from zlink_trio.wire.codec import EncodedMessage


def _payload(spot_id: str, **changes: object) -> RelocationPayload:
    fields: dict[str, object] = {
        "spot_id": spot_id, "object_generation": 3, "stable_type": "room", "mesh": "world",
        "owner_generation": 2, "state": b"\x00state", "timers": (MovedTimer("tick", 5, 10),),
        "messages": (MovedMessage(EncodedMessage("Say", b"hi"), 1_000, 7, 9),), **changes}
    return RelocationPayload(**fields)  # type: ignore[arg-type]


def test_a_payload_with_members_round_trips_as_one_root():
    members = (_payload("p-1", stable_type="player", state=None), _payload("p-2"))
    group = _payload("room-1", members=members)
    data = group.encode()
    assert json.loads(data)["format"] == GROUP_FORMAT
    assert RelocationPayload.decode(data) == group
    alone = _payload("room-1")
    assert json.loads(alone.encode())["format"] == PAYLOAD_FORMAT
    assert "members" not in json.loads(alone.encode())
    assert RelocationPayload.decode(alone.encode()) == alone


def test_a_payload_that_claims_the_wrong_format_for_its_members_is_refused():
    """A reader of the single-Spot format must never take a group's root for one Spot's
    (it would commit members it never built), nor the reverse."""
    group = json.loads(_payload("room-1", members=(_payload("p-1"),)).encode())
    group["format"] = PAYLOAD_FORMAT
    alone = json.loads(_payload("room-1").encode())
    alone["format"] = GROUP_FORMAT
    nested = json.loads(_payload("room-1", members=(_payload("p-1"),)).encode())
    nested["members"][0]["members"] = [dict(nested["members"][0])]
    nested["members"][0]["format"] = GROUP_FORMAT
    for fields in (group, alone, nested):
        with pytest.raises(InvalidOperation, match="nor a spot-relocation-v2 one"):
            RelocationPayload.decode(json.dumps(fields).encode())
