"""The direct writers of a Ready call and its success reply write the general encoder's bytes.

``frames.encode_ready_message`` / ``encode_message_reply`` build commands 39 (route
kind 1) and 20 from fields, without frame objects; here they are compared with
``frames.encode`` of the same frame on generated values, and every value a frame's
validators refuse is refused by them too (``LocalProtocolError``). ``link_decoder``
gives exactly ``decode``'s result or refusal for every input.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_frames import FRAMES, gens, ids, owners, payloads, text8s, u64s

from zlink_trio.core.errors import InvalidConfiguration, LocalProtocolError, RemoteProtocolError
from zlink_trio.core.identity import NodeRid
from zlink_trio.core.records import OwnerFence
from zlink_trio.wire import frames
from zlink_trio.wire.frames import (
    Command,
    EncodedMessage,
    MessageOutcome,
    ReadyRoute,
    Reply,
    SpotMessage,
)

ready_routes = st.builds(ReadyRoute, spot_id=text8s, object_generation=gens,
                         owner_generation=gens, target=owners)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(route=ready_routes, operation_id=ids, correlation=u64s, deadline_ms=gens,
       source=owners, payload=payloads)
def test_a_ready_call_is_written_as_the_general_encoder_writes_it(
        route, operation_id, correlation, deadline_ms, source, payload):
    frame = SpotMessage(route=route, operation_id=operation_id, reply_correlation=correlation,
                        deadline_ms=deadline_ms, source=source, source_spot_id=None,
                        metadata=None, payload=payload)
    data = frames.encode_ready_message(frames.ready_route_bytes(route), operation_id,
                                       correlation, deadline_ms, frames.owner_bytes(source),
                                       payload)
    assert data == frames.encode(frame)
    assert frames.decode(data) == frame


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(correlation=ids, reply=st.none() | payloads)
def test_a_success_reply_is_written_as_the_general_encoder_writes_it(correlation, reply):
    frame = Reply(correlation=correlation, answers=Command.SPOT_MESSAGE,
                  outcome=MessageOutcome(reply=reply))
    data = frames.encode_message_reply(correlation, reply)
    assert data == frames.encode(frame)
    assert frames.decode(data) == frame


_OWNER = OwnerFence(NodeRid(bytes(range(1, 17))), 3)


def _call(**change: object) -> bytes:
    route = ReadyRoute(spot_id="s", object_generation=1, owner_generation=1, target=_OWNER)
    args: dict[str, object] = {
        "route": frames.ready_route_bytes(route), "operation_id": 1, "correlation": 0,
        "deadline_ms": 1, "source": frames.owner_bytes(_OWNER),
        "payload": EncodedMessage("t", b"{}")}
    args.update(change)
    return frames.encode_ready_message(**args)  # type: ignore[arg-type]


def test_the_call_of_the_refusal_tests_is_valid():
    assert frames.decode(_call()).route.target == _OWNER


@pytest.mark.parametrize("change", [
    {"operation_id": 0}, {"operation_id": 2**64}, {"operation_id": True},
    {"correlation": -1}, {"correlation": 2**64}, {"correlation": 1.0},
    {"deadline_ms": 0}, {"deadline_ms": 2**63}, {"deadline_ms": "1"},
    {"payload": EncodedMessage("", b"{}")}, {"payload": EncodedMessage("x" * 256, b"{}")},
    {"payload": EncodedMessage("\ud800", b"{}")}, {"payload": EncodedMessage("t", "{}")},
    {"payload": EncodedMessage(b"t", b"{}")}, {"payload": b"{}"},
    {"payload": EncodedMessage("t", b"x" * (frames.MAX_BODY_BYTES + 1))},
])
def test_a_ready_call_refuses_what_the_frame_refuses(change):
    with pytest.raises(LocalProtocolError):
        _call(**change)


@pytest.mark.parametrize(("correlation", "reply"), [
    (0, None), (2**64, None), (True, None), (1, EncodedMessage("", b"")), (1, "x"),
    (1, EncodedMessage("t", b"x" * (frames.MAX_BODY_BYTES + 1))),
])
def test_a_success_reply_refuses_what_the_frame_refuses(correlation, reply):
    with pytest.raises(LocalProtocolError):
        frames.encode_message_reply(correlation, reply)


def test_owner_bytes_refuses_what_is_not_a_fence():
    with pytest.raises(LocalProtocolError):
        frames.owner_bytes("owner")  # type: ignore[arg-type]


def _outcome(decode, data):
    try:
        return decode(data)
    except RemoteProtocolError as exc:
        return exc.message


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.one_of(*FRAMES.values()), cut=st.integers(0, 8), data=st.data())
def test_the_link_decoder_gives_what_decode_gives(frame, cut, data):
    limit = data.draw(st.sampled_from([frames.MIN_FRAME_BYTES, frames.DEFAULT_MAX_FRAME_BYTES]))
    body = data.draw(st.sampled_from([1, 64, frames.MAX_BODY_BYTES]))
    decode_one = frames.link_decoder(limit, body)
    encoded = frames.encode(frame)
    for sample in (encoded, encoded[:len(encoded) - cut], encoded + bytes(cut),
                   data.draw(st.binary(max_size=64)), encoded[:4] + data.draw(st.binary())):
        assert _outcome(decode_one, sample) == _outcome(
            lambda d: frames.decode(d, max_frame_bytes=limit, max_body_bytes=body), sample)


def test_the_link_decoder_checks_its_limits_at_once():
    with pytest.raises(InvalidConfiguration):
        frames.link_decoder(10)
    with pytest.raises(InvalidConfiguration):
        frames.link_decoder(frames.DEFAULT_MAX_FRAME_BYTES, 0)
