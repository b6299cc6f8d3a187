"""A link's decoder: ``decode`` with the link's limits, and caches that change nothing.

``frames.LinkDecoder`` holds one link's readers and the immutable values they keep
(owner fences, Ready routes, type names). Here a decoder warmed by a frame decodes
every generated or mutated byte string exactly as a fresh ``decode`` does, the values
it keeps are reused and bounded, and two links share none.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_frames import FRAMES, MUTATIONS, OWNER_A, OWNER_B, golden, mutate

from zlink_trio.core.errors import InvalidConfiguration, RemoteProtocolError
from zlink_trio.wire import frames
from zlink_trio.wire.frames import EncodedMessage, LinkDecoder, ReadyRoute, SpotMessage

HOT = st.one_of(FRAMES["message"], FRAMES["reply"])


def _outcome(decode, data):
    try:
        return decode(data)
    except RemoteProtocolError as exc:
        return exc.message


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(frame=HOT, mutation=st.sampled_from(MUTATIONS), data=st.data())
def test_a_warm_link_decoder_decodes_what_decode_decodes(frame, mutation, data):
    decoder = LinkDecoder()
    assert decoder(frames.encode(frame)) == frame  # its values are kept now
    mutated = mutate(data, frame, mutation, start=4)
    assert _outcome(decoder, mutated) == _outcome(frames.decode, mutated)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.one_of(*FRAMES.values()), cut=st.integers(0, 8), data=st.data())
def test_the_link_decoder_gives_what_decode_gives(frame, cut, data):
    limit = data.draw(st.sampled_from([frames.MIN_FRAME_BYTES, frames.DEFAULT_MAX_FRAME_BYTES]))
    body = data.draw(st.sampled_from([1, 64, frames.MAX_BODY_BYTES]))
    decode_one = LinkDecoder(limit, body)
    encoded = frames.encode(frame)
    for sample in (encoded, encoded[:len(encoded) - cut], encoded + bytes(cut),
                   data.draw(st.binary(max_size=64)), encoded[:4] + data.draw(st.binary())):
        assert _outcome(decode_one, sample) == _outcome(
            lambda d: frames.decode(d, max_frame_bytes=limit, max_body_bytes=body), sample)


def test_the_link_decoder_checks_its_limits_at_once():
    with pytest.raises(InvalidConfiguration):
        LinkDecoder(10)
    with pytest.raises(InvalidConfiguration):
        LinkDecoder(frames.DEFAULT_MAX_FRAME_BYTES, 0)


def _call(spot_id: str) -> bytes:
    return frames.encode(SpotMessage(
        route=ReadyRoute(spot_id=spot_id, object_generation=1, owner_generation=1,
                         target=OWNER_B),
        operation_id=1, reply_correlation=0, deadline_ms=1, source=OWNER_A,
        source_spot_id=None, metadata=None, payload=EncodedMessage("t", b"{}")))


def test_a_link_reuses_the_routes_fences_and_names_it_decoded():
    decoder = LinkDecoder()
    first, second = decoder(_call("s-1")), decoder(_call("s-1"))
    assert isinstance(first, SpotMessage)
    assert isinstance(second, SpotMessage)
    assert first == second
    assert first.route is second.route
    assert first.source is second.source
    assert first.payload.type_name is second.payload.type_name
    other = LinkDecoder()(_call("s-1"))  # another link keeps its own
    assert isinstance(other, SpotMessage)
    assert other == first
    assert other.route is not first.route


def test_what_a_link_keeps_is_bounded():
    decoder = LinkDecoder()
    for n in range(3000):
        decoder(_call(f"s-{n}"))
    kept = {name: len(cache) for name, cache in decoder.readers.caches.items()}
    assert 0 < kept["ReadyRoute"] <= 1024
    assert all(size <= 1024 for size in kept.values())


@pytest.mark.parametrize("name", ["message-ready", "message-activation", "message-follow",
                                  "reply-failed", "reply-message", "reply-create"])
def test_golden_hot_frames_decode_alike_twice(name):
    decoder = LinkDecoder()
    data = golden(name)
    assert decoder(data) == decoder(data) == frames.decode(data)
    assert frames.encode(decoder(data)) == data  # type: ignore[arg-type]
