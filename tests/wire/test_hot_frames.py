"""The writers of commands 39 and 20 take pre-encoded slots, and check what they are given.

``frames.encode_spot_message`` / ``encode_reply`` are the one writer of their command:
``encode`` hands them a frame's fields, the hot path hands them fields and slots
pre-encoded (``encode_route``, ``encode_owner``, ``encode_message_outcome``). Here both
ways give the same bytes on generated values, and every value a frame's validators
refuse is refused by the writer too (``LocalProtocolError``).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_frames import gens, ids, owners, payloads, routes, text8s, u64s

from zlink_trio.core.errors import LocalProtocolError
from zlink_trio.core.identity import NodeRid
from zlink_trio.core.records import OwnerFence
from zlink_trio.wire import frames
from zlink_trio.wire.frames import (
    Command,
    EncodedMessage,
    Failure,
    MessageOutcome,
    ReadyRoute,
    Reply,
    SpotMessage,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(route=routes, operation_id=ids, correlation=u64s, deadline_ms=gens,
       source=owners, source_spot_id=st.none() | text8s,
       metadata=st.none() | st.binary(max_size=64), payload=payloads, pre=st.booleans())
def test_a_spot_message_is_written_alike_from_its_fields_and_slots(
        route, operation_id, correlation, deadline_ms, source, source_spot_id, metadata,
        payload, pre):
    frame = SpotMessage(route=route, operation_id=operation_id, reply_correlation=correlation,
                        deadline_ms=deadline_ms, source=source, source_spot_id=source_spot_id,
                        metadata=metadata, payload=payload)
    route_slot = frames.encode_route(route) if pre else route
    source_slot = frames.encode_owner(source) if pre else source
    data = frames.encode_spot_message(route_slot, operation_id, correlation, deadline_ms,
                                      source_slot, source_spot_id, metadata, payload)
    assert data == frames.encode(frame)
    assert frames.decode(data) == frame


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(correlation=ids, reply=st.none() | payloads)
def test_a_success_reply_is_written_alike_from_its_outcome_and_its_bytes(correlation, reply):
    frame = Reply(correlation=correlation, answers=Command.SPOT_MESSAGE,
                  outcome=MessageOutcome(reply=reply))
    data = frames.encode_reply(correlation, Command.SPOT_MESSAGE,
                               frames.encode_message_outcome(reply))
    assert data == frames.encode(frame)
    assert data == frames.encode_reply(correlation, Command.SPOT_MESSAGE, frame.outcome)
    assert frames.decode(data) == frame


_OWNER = OwnerFence(NodeRid(bytes(range(1, 17))), 3)
_ROUTE = ReadyRoute(spot_id="s", object_generation=1, owner_generation=1, target=_OWNER)


def _call(**change: object) -> bytes:
    args: dict[str, object] = {
        "route": frames.encode_route(_ROUTE), "operation_id": 1, "reply_correlation": 0,
        "deadline_ms": 1, "source": frames.encode_owner(_OWNER), "source_spot_id": None,
        "metadata": None, "payload": EncodedMessage("t", b"{}")}
    args.update(change)
    return frames.encode_spot_message(**args)


def test_the_call_of_the_refusal_tests_is_valid():
    assert frames.decode(_call()).route.target == _OWNER  # type: ignore[union-attr]


@pytest.mark.parametrize("change", [
    {"operation_id": 0}, {"operation_id": 2**64}, {"operation_id": True},
    {"reply_correlation": -1}, {"reply_correlation": 2**64}, {"reply_correlation": 1.0},
    {"deadline_ms": 0}, {"deadline_ms": 2**63}, {"deadline_ms": "1"},
    {"payload": EncodedMessage("", b"{}")}, {"payload": EncodedMessage("x" * 256, b"{}")},
    {"payload": EncodedMessage("\ud800", b"{}")}, {"payload": EncodedMessage("t", "{}")},
    {"payload": EncodedMessage(b"t", b"{}")}, {"payload": b"{}"},
    {"payload": EncodedMessage("t", b"x" * (frames.MAX_BODY_BYTES + 1))},
    {"route": _OWNER}, {"source": _ROUTE}, {"source_spot_id": ""}, {"metadata": bytearray()},
    {"metadata": b"m" * (frames.MAX_METADATA_BYTES + 1)},
])
def test_a_spot_message_writer_refuses_what_the_frame_refuses(change):
    with pytest.raises(LocalProtocolError):
        _call(**change)


@pytest.mark.parametrize("correlation", [0, 2**64, True, 1.0])
def test_the_reply_writer_refuses_a_correlation_the_reply_refuses(correlation):
    with pytest.raises(LocalProtocolError):
        frames.encode_reply(correlation, Command.SPOT_MESSAGE,
                            frames.encode_message_outcome(None))


@pytest.mark.parametrize("reply", [
    EncodedMessage("", b""), "x", EncodedMessage("t", "{}"),
    EncodedMessage("t", b"x" * (frames.MAX_BODY_BYTES + 1)),
])
def test_a_success_outcome_refuses_what_the_outcome_refuses(reply):
    with pytest.raises(LocalProtocolError):
        frames.encode_message_outcome(reply)


@pytest.mark.parametrize(("answers", "outcome"), [
    (Command.PING, MessageOutcome()), (39, MessageOutcome()),
    (Command.USER_SPOT_CLOSE, MessageOutcome()), (Command.SPOT_MESSAGE, "outcome"),
])
def test_the_reply_writer_refuses_an_outcome_the_reply_refuses(answers, outcome):
    with pytest.raises(LocalProtocolError):
        frames.encode_reply(1, answers, outcome)


def test_a_pre_encoded_outcome_is_written_as_it_is():
    data = frames.encode_reply(1, Command.SPOT_MESSAGE, b"\x01\x00\x02\x27\x00\x00")
    assert frames.decode(data) == Reply(correlation=1, answers=Command.SPOT_MESSAGE,
                                        outcome=Failure(code=2, message=""))


def test_encode_owner_refuses_what_is_not_a_fence():
    with pytest.raises(LocalProtocolError):
        frames.encode_owner("owner")
