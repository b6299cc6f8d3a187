"""``MessageCodec.to_json`` / ``from_json``: a body without its type name, for HTTP and records.

Also that the codec is public (``zl.MessageCodec``), so the samples reach it through the
public API. Pure tests, no event loop.
"""

from __future__ import annotations

from typing import ClassVar

import attrs
import pytest

import zlink_trio as zl
from zlink_trio.core.errors import InvalidOperation, RemoteProtocolError
from zlink_trio.wire.codec import MessageCodec


@attrs.frozen
class Reply:
    __zlink_type__: ClassVar[str] = "test.Reply"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    updated_at_unix_ms: int = 0


CODEC = MessageCodec()


def test_the_codec_is_public():
    assert zl.MessageCodec is MessageCodec
    assert zl.EncodedMessage is type(CODEC.encode(Reply("o")))


def test_to_json_is_the_body_of_encode_and_from_json_its_inverse():
    body = CODEC.to_json(Reply("o", 5))
    assert body == b'{"orderId":"o","updatedAtUnixMs":5}'
    assert body == CODEC.encode(Reply("o", 5)).body
    assert CODEC.from_json(body, Reply) == Reply("o", 5)


def test_the_same_refusals_as_encode_and_decode():
    with pytest.raises(InvalidOperation, match="messages must be attrs classes"):
        CODEC.to_json({"orderId": "o"})
    with pytest.raises(InvalidOperation, match="messages must be attrs classes"):
        CODEC.from_json(b"{}", dict)
    with pytest.raises(RemoteProtocolError, match="'order_id' is the Python spelling"):
        CODEC.from_json(b'{"order_id":"o"}', Reply)
    with pytest.raises(RemoteProtocolError, match="duplicate key"):
        CODEC.from_json(b'{"orderId":"o","orderId":"p"}', Reply)
    small = MessageCodec(max_body_bytes=10)
    with pytest.raises(InvalidOperation, match="bound"):
        small.to_json(Reply("o"))
    with pytest.raises(RemoteProtocolError, match="bound"):
        small.from_json(b'{"orderId":"o"}', Reply)
