"""Message Follow (command 39, route kind 3) and planned relocation (command 60 and its reply).

Pure tests, no event loop: the frame codec is sans-IO. The golden frames, the
strategies and the refusals every frame shares (truncation, trailing bytes, empty
text, zero rids, generations out of range, fuzzing) are in ``test_frames.py``;
here are the rules only these frames have, each tried at its boundaries.
"""

from __future__ import annotations

from typing import TypeVar

import attrs
import pytest
from test_frames import GOLDEN, OWNER_A, OWNER_B, REF, ROOT, SHA, golden, refused

from zlink_trio.core.errors import InvalidOperation, LocalProtocolError, StaleFence
from zlink_trio.core.records import MAX_ROOT_BYTES, CreationIntent
from zlink_trio.wire.frames import (
    MAX_FOLLOW_HOPS,
    CloseOutcome,
    Command,
    CreateOutcome,
    Failure,
    FollowRoute,
    MessageOutcome,
    RelocateOutcome,
    RelocateSpot,
    Reply,
    RouteKind,
    SpotMessage,
    WireCreateState,
    decode,
    encode,
)

T = TypeVar("T")


def golden_frame(name: str, cls: type[T]) -> T:
    frame, _ = GOLDEN[name]
    assert isinstance(frame, cls)
    return frame


FOLLOW = golden_frame("message-follow", SpotMessage)
RELOCATE = golden_frame("relocate", RelocateSpot)
assert isinstance(FOLLOW.route, FollowRoute)


# --------------------------------------------------------------------------- the byte tables


def test_frame_sizes_match_the_totals_of_the_byte_tables():
    # docs/wire.md: route kind 3 has C = 55+a; a Spot message is C+55+d+M+t+n bytes.
    spot, type_name, body = len("c-1"), len("app:Add"), len(b'{"n":2}')
    assert len(golden("message-follow")) == (55 + spot) + 55 + 0 + 0 + type_name + body
    # Command 60: 144+a+b+c+d (Spot ID, stable type, mesh, root ref).
    assert len(golden("relocate")) == 144 + len("r-1") + len("room") + len("world") + len(
        "rel:r-1"
    )
    # The reply tail after 60 is a spotref: 26+a+b, after the 16 bytes up to the tail.
    assert len(golden("reply-relocate")) == 16 + 26 + len("r-1") + len("world")


def test_route_kind_and_sha256_travel_as_the_tables_say():
    assert FOLLOW.route_kind is RouteKind.FOLLOW
    data = golden("relocate")
    assert bytes.fromhex(SHA) in data  # 32 raw bytes, not 64 hex characters
    assert SHA.encode() not in data
    frame = decode(data)
    assert isinstance(frame, RelocateSpot)
    assert frame.payload.sha256 == SHA


# --------------------------------------------------------------------------- FollowRoute


def _follow(**changes: object) -> FollowRoute:
    assert isinstance(FOLLOW.route, FollowRoute)
    return attrs.evolve(FOLLOW.route, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("hops", [1, 2, MAX_FOLLOW_HOPS])
def test_follow_route_hops_1_to_8_round_trip(hops):
    message = attrs.evolve(FOLLOW, route=_follow(hops=hops))
    data = encode(message)
    assert data == golden("message-follow", hops=f"{hops:02x}")
    assert decode(data) == message


@pytest.mark.parametrize("hops", [0, MAX_FOLLOW_HOPS + 1, 255, -1, True, 1.0, "1", None])
def test_follow_route_hops_out_of_range_cannot_be_built(hops):
    with pytest.raises(LocalProtocolError, match="hops"):
        _follow(hops=hops)


@pytest.mark.parametrize("hops", [0, MAX_FOLLOW_HOPS + 1, 0x80, 0xFF])
def test_follow_route_hops_out_of_range_are_refused(hops):
    refused(golden("message-follow", hops=f"{hops:02x}"), f"hops is {hops}")


def test_follow_route_target_owner_generation_must_be_above_the_sources():
    assert _follow(source_owner_generation=3, target_owner_generation=4).hops == 3
    assert _follow(source_owner_generation=1, target_owner_generation=2**63 - 1)
    assert _follow(source_owner_generation=2**63 - 2, target_owner_generation=2**63 - 1)
    for source, target in [(4, 4), (5, 4), (2**63 - 1, 1), (2**63 - 1, 2**63 - 1)]:
        with pytest.raises(LocalProtocolError, match="must be greater"):
            _follow(source_owner_generation=source, target_owner_generation=target)


@pytest.mark.parametrize(("source", "target"), [(4, 4), (4, 3), (2**63 - 1, 1)])
def test_follow_route_target_not_above_the_source_is_refused(source, target):
    data = golden(
        "message-follow",
        source_owner_generation=f"{source:016x}",
        target_owner_generation=f"{target:016x}",
    )
    refused(data, f"target owner generation {target} is not above the source")


def test_follow_route_target_just_above_the_source_decodes():
    data = golden(
        "message-follow",
        source_owner_generation=f"{2**63 - 2:016x}",
        target_owner_generation=f"{2**63 - 1:016x}",
    )
    frame = decode(data)
    assert isinstance(frame, SpotMessage)
    assert frame.route == _follow(
        source_owner_generation=2**63 - 2, target_owner_generation=2**63 - 1
    )
    assert encode(frame) == data


@pytest.mark.parametrize(
    "changes",
    [
        {"spot_id": ""},
        {"spot_id": "x" * 256},
        {"spot_id": "\ud800"},
        {"object_generation": 0},
        {"object_generation": 2**63},
        {"source_owner_generation": 0},
        {"target_owner_generation": 2**63},
        {"source_owner_generation": True},
        {"target": OWNER_A.node_rid},
        {"target": REF},
    ],
)
def test_invalid_follow_route_values_cannot_be_built(changes):
    with pytest.raises(LocalProtocolError):
        _follow(**changes)


def test_a_follow_route_is_a_spot_message_route_and_nothing_else_is():
    assert attrs.evolve(FOLLOW, route=_follow(hops=8)).route_kind is RouteKind.FOLLOW
    with pytest.raises(LocalProtocolError, match="FollowRoute"):
        attrs.evolve(FOLLOW, route=ROOT)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- RelocateSpot


@pytest.mark.parametrize(
    "changes",
    [
        {"correlation": 0},
        {"correlation": 2**64},
        {"operation_id": 0},
        {"operation_id": -1},
        {"source": OWNER_A.node_rid},
        {"target": None},
        {"spot_id": ""},
        {"stable_type": "x" * 256},
        {"mesh": ""},
        {"mesh": b"world"},
        {"object_generation": 0},
        {"owner_generation": 2**63},
        {"expected_store_version": 0},
        {"expected_store_version": 1.0},
        {"deadline_ms": 0},
        {"deadline_ms": 2**63},
        {"payload": None},
        {"payload": attrs.asdict(ROOT)},
        {"payload": CreationIntent.from_receipt(ROOT)},
        {"payload": REF},
    ],
)
def test_invalid_relocate_values_cannot_be_built(changes):
    with pytest.raises(LocalProtocolError):
        attrs.evolve(RELOCATE, **changes)


@pytest.mark.parametrize("size", [0, 1, MAX_ROOT_BYTES])
def test_payload_root_sizes_0_to_the_root_bound_round_trip(size):
    frame = attrs.evolve(RELOCATE, payload=attrs.evolve(ROOT, size=size))
    data = encode(frame)
    assert data == golden("relocate", root_size=f"{size:016x}")
    assert decode(data) == frame


@pytest.mark.parametrize("size", [MAX_ROOT_BYTES + 1, 2**63, 2**64 - 1])
def test_payload_root_size_above_the_root_bound_is_refused(size):
    refused(golden("relocate", root_size=f"{size:016x}"), f"above the {MAX_ROOT_BYTES}-byte")


@pytest.mark.parametrize(
    "changes",
    [
        {"size": -1},
        {"size": MAX_ROOT_BYTES + 1},
        {"sha256": SHA[:-2]},  # 31 bytes
        {"sha256": SHA + "00"},  # 33 bytes
        {"sha256": SHA.upper()},
        {"sha256": bytes.fromhex(SHA)},
        {"ref": ""},
        {"ref": "x" * 256},
    ],
)
def test_a_root_receipt_that_has_no_byte_form_cannot_be_built(changes):
    with pytest.raises(InvalidOperation):  # the core value validates itself
        attrs.evolve(ROOT, **changes)


@pytest.mark.parametrize("sha_bytes", [0, 1, 31, 33, 64])
def test_a_sha256_of_another_length_is_refused(sha_bytes):
    # The length is not on the wire, so the fields after the digest shift and the
    # frame ends too early or too late.
    refused(golden("relocate", root_sha256="ab" * sha_bytes))


def test_a_sha256_of_any_32_bytes_decodes_to_lowercase_hex():
    data = golden("relocate", root_sha256="AB" * 31 + "0F")
    frame = decode(data)
    assert isinstance(frame, RelocateSpot)
    assert frame.payload.sha256 == "ab" * 31 + "0f"
    assert encode(frame) == data


def test_relocate_with_the_longest_texts_round_trips():
    long = "\U0001f600" * 63 + "abc"
    frame = attrs.evolve(
        RELOCATE,
        spot_id=long,
        stable_type=long,
        mesh=long,
        payload=attrs.evolve(ROOT, ref=long, size=MAX_ROOT_BYTES),
        correlation=2**64 - 1,
        operation_id=2**64 - 1,
        deadline_ms=2**63 - 1,
    )
    data = encode(frame)
    assert len(data) == 144 + 4 * 255
    assert decode(data) == frame


# --------------------------------------------------------------------------- the reply to 60


def test_a_reply_to_60_carries_a_relocate_outcome_or_a_failure():
    failure = Failure.from_error(StaleFence("the Sealed record changed"))
    for outcome in (RelocateOutcome(ref=REF), failure):
        reply = Reply(correlation=5, answers=Command.RELOCATE_SPOT, outcome=outcome)
        assert decode(encode(reply)) == reply
    with pytest.raises(LocalProtocolError):
        RelocateOutcome(ref=OWNER_B)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answers", "outcome"),
    [
        (Command.RELOCATE_SPOT, MessageOutcome()),
        (Command.RELOCATE_SPOT, CreateOutcome(state=WireCreateState.CREATED, ref=REF)),
        (Command.RELOCATE_SPOT, CloseOutcome(closed=True)),
        (Command.SPOT_MESSAGE, RelocateOutcome(ref=REF)),
        (Command.USER_SPOT_CREATE, RelocateOutcome(ref=REF)),
        (Command.USER_SPOT_CLOSE, RelocateOutcome(ref=REF)),
    ],
)
def test_a_success_tail_of_another_command_is_refused(answers, outcome):
    with pytest.raises(LocalProtocolError, match="carries a Failure or a"):
        Reply(correlation=5, answers=answers, outcome=outcome)


@pytest.mark.parametrize(
    ("answers", "needle"),
    [
        ("27", "reply flag must be 0 or 1"),  # 39's tail: the spotref's length byte 3
        ("30", "closed must be 0 or 1"),  # 48's tail: likewise
        ("2f", "truncated"),  # 47's tail: state 3 (REJECTED), then a 114-byte Spot ID
        ("3b", "cannot answer command 59; known: 39, 47, 48, 60, 61"),
        ("3d", "node operation report is 57814321 bytes, above"),  # 61: u32 length
    ],
)
def test_a_reply_to_60s_tail_under_another_command_is_refused(answers, needle):
    refused(golden("reply-relocate", answers=answers), needle)


def test_a_command_60_is_answered_and_a_reply_is_not_a_request():
    assert int(Command.RELOCATE_SPOT) == 60
    with pytest.raises(LocalProtocolError, match="RELOCATE_SPOT"):
        Reply(correlation=1, answers=Command.REPLY, outcome=RelocateOutcome(ref=REF))
