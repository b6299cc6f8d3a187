"""``codec.decode_claim`` reuses decoded descriptors by their stored JSON: the same claims
as decoding afresh, and a malformed descriptor still fails (nothing of it is kept)."""

from __future__ import annotations

import json

import pytest
from store_helpers import descriptor

from zlink_trio.core.descriptor import NodeDescriptor
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.store.redis import codec


def _stored(node_id: str) -> bytes:
    body = codec.claim_args(descriptor(node_id))[0]
    assert isinstance(body, str)
    return body.encode()


def test_a_repeated_descriptor_decodes_to_the_same_claim() -> None:
    raw = _stored("node-a")
    first = codec.decode_claim([raw, b"1", b"10.5", b"3", None])
    again = codec.decode_claim([raw, b"2", b"11.5", b"4", b"1"])
    fresh = NodeDescriptor.from_json(json.loads(raw))
    assert first.descriptor == again.descriptor == fresh
    assert (again.lifecycle_generation, again.lease_expires_at, again.store_version,
            again.accepts_placements) == (2, 11.5, 4, False)
    other = codec.decode_claim([_stored("node-b"), b"1", b"10.5", b"3"])
    assert other.descriptor.node_id == "node-b"
    assert other.accepts_placements


def test_a_malformed_descriptor_fails_every_time() -> None:
    bad = json.loads(_stored("node-a"))
    bad["capacity"] = -1
    raw = json.dumps(bad).encode()
    for _ in range(2):
        with pytest.raises(InvalidOperation):
            codec.decode_claim([raw, b"1", b"10.5", b"3"])
    assert raw not in codec._DESCRIPTORS


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "_DESCRIPTORS", {})
    monkeypatch.setattr(codec, "_DESCRIPTORS_MAX", 2)
    for name in ("node-a", "node-b", "node-c"):
        codec.decode_claim([_stored(name), b"1", b"10.5", b"3"])
    assert len(codec._DESCRIPTORS) <= 2
