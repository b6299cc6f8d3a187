"""``codec.decode_ready`` (CommitReady's reply, fields reused from the fence) against the
general ``codec.decode_record``: the same record for every reply, the same error for a bad one."""

from __future__ import annotations

import pytest

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import NodeRid
from zlink_trio.core.records import OwnerFence, ReservationFence
from zlink_trio.store.redis.codec import decode_ready, decode_record

RID = NodeRid.generate()
SHA = "0123456789abcdef" * 4
POINTER = [b"pr", f"sha256-{SHA}".encode(), b"psh", SHA.encode(), b"psz", b"412", b"pv", b"1"]


def _fence(**changes: object) -> ReservationFence:
    fields: dict[str, object] = {
        "spot_id": "spot-1", "store_version": 1, "object_generation": 1234,
        "owner_generation": 1, "owner": OwnerFence(RID, 3), "owner_lease_expires_at": 5.0}
    fields.update(changes)
    return ReservationFence(**fields)  # type: ignore[arg-type]


def _reply(pointer: bool = True, **changes: bytes) -> list[object]:
    fields = {b"id": b"spot-1", b"kind": b"instance", b"type": b"bench-echo",
              b"mesh": b"bench", b"state": b"ready", b"gen": b"1234", b"ogen": b"1",
              b"ver": b"2", b"orid": str(RID).encode(), b"olc": b"3"}
    fields.update({k.encode(): v for k, v in changes.items()})
    flat: list[object] = [x for pair in fields.items() for x in pair]
    return flat + (POINTER if pointer else [])


@pytest.mark.parametrize("reply", [
    _reply(), _reply(pointer=False), _reply(kind=b"user"), _reply(type=b"other-type"),
    _reply(gen=b"99"), _reply(ver=b"7"), _reply(ogen=b"2"), _reply(olc=b"4"),
    _reply(orid=str(NodeRid.generate()).encode()), _reply(id=b"spot-2"),
    _reply(state=b"closing"), _reply(extra=b"ignored"),
], ids=["ready", "no-pointer", "user", "type", "gen", "ver", "ogen", "olc", "orid", "id",
        "closing", "extra-field"])
def test_decode_ready_equals_decode_record(reply: list[object]) -> None:
    assert decode_ready(reply, _fence()) == decode_record(reply)


@pytest.mark.parametrize("reply", [
    _reply(kind=b"bogus"), _reply(type=b""), _reply(mesh=b"\x00" * 300), _reply(ver=b"x"),
    _reply(kind=b"entry"), _reply(pointer=False, state=b"sealed"),
])
def test_a_bad_reply_raises_what_decode_record_raises(reply: list[object]) -> None:
    with pytest.raises((InvalidOperation, ValueError, KeyError)) as general:
        decode_record(reply)
    with pytest.raises(type(general.value)) as fast:
        decode_ready(reply, _fence())
    assert str(fast.value) == str(general.value)
