"""The fast paths for commands 39 and 20 agree with the general codec on every input.

``frames.encode``/``decode`` try :mod:`zlink_trio.wire._fast_frames` first. Here the
general path is run on its own (the field-by-field ``Writer``/``Reader`` functions of
``_frame_layouts`` and ``_reply_layouts``) and compared: the same bytes for every
generated frame, and for every generated or mutated byte string the same frame or the
same refusal.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_frames import FRAMES, MUTATIONS, golden, mutate

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.wire import _fast_frames, _frame_layouts, _reply_layouts, frames
from zlink_trio.wire._frame_fields import Reader, Writer
from zlink_trio.wire.frames import Command, Reply, SpotMessage

HOT = st.one_of(FRAMES["message"], FRAMES["reply"])
BODY = frames.MAX_BODY_BYTES


def general_encode(frame: SpotMessage | Reply) -> bytes:
    w = Writer()
    w.raw(frames.MAGIC)
    w.u8(frames.VERSION)
    if isinstance(frame, SpotMessage):
        w.u8(Command.SPOT_MESSAGE)
        _frame_layouts.write_spot_message(w, frame)
    else:
        w.u8(Command.REPLY)
        _reply_layouts.write_reply(w, frame)
    return bytes(w)


def general_decode(data: bytes) -> object:
    """The general decoder's frame for a 39/20 byte string, or its refusal message."""
    try:
        r = Reader(data)
        r.raw(4, "header")
        decoder = (_frame_layouts.read_spot_message if data[3] == Command.SPOT_MESSAGE
                   else _reply_layouts.read_reply)
        frame = decoder(r, BODY)
        r.end()
    except RemoteProtocolError as exc:
        return exc.message
    return frame


def fast_decode(data: bytes) -> object:
    fast = (_fast_frames.decode_spot_message(data, BODY) if data[3] == Command.SPOT_MESSAGE
            else _fast_frames.decode_reply(data, BODY))
    return fast


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(frame=HOT)
def test_fast_encoding_writes_the_general_bytes(frame):
    data = frames.encode(frame)
    assert data == general_encode(frame)
    assert frames.decode(data) == frame
    assert fast_decode(data) in (frame, None)  # None: success replies to 47/48/60, route kind 3


@pytest.mark.parametrize("name", ["message-ready", "message-activation", "reply-failed",
                                  "reply-message", "reply-relocate-failed"])
def test_golden_frames_take_the_fast_path(name):
    data = golden(name)
    fast = fast_decode(data)
    assert fast is not None
    assert fast == general_decode(data)
    assert frames.encode(fast) == data


@pytest.mark.parametrize("name", ["message-follow", "reply-create", "reply-close",
                                  "reply-relocate"])
def test_other_golden_frames_take_the_general_path(name):
    data = golden(name)
    frame = general_decode(data)
    assert isinstance(frame, SpotMessage | Reply)
    assert fast_decode(data) is None
    assert frames.decode(data) == frame
    assert frames.encode(frame) == data
    if isinstance(frame, SpotMessage):
        assert _fast_frames.encode_spot_message(frame) is None
    else:
        assert _fast_frames.encode_reply(frame) is None


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(frame=HOT, mutation=st.sampled_from(MUTATIONS), data=st.data())
def test_fast_decoding_accepts_only_what_the_general_decoder_accepts(frame, mutation, data):
    mutated = mutate(data, frame, mutation, start=4)  # keep the header
    fast = fast_decode(mutated)
    general = general_decode(mutated)
    if fast is not None:
        assert fast == general
    # And the public decoder gives the general result either way.
    if isinstance(general, str):
        with pytest.raises(RemoteProtocolError) as refused:
            frames.decode(mutated)
        assert refused.value.message == general
    else:
        assert frames.decode(mutated) == general
