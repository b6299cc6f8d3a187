"""Identity values: Spot IDs, stable types, the reserved Entry format, uuid4s, NodeRids."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import (
    MAX_ID_BYTES,
    NodeRid,
    is_entry_spot_id,
    is_lowercase_uuid4,
    new_entry_spot_id,
    new_uuid4,
    validate_entry_prefix,
    validate_node_id,
    validate_spot_id,
    validate_stable_type,
    validate_user_spot_id,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

VALIDATORS: list[Callable[[object], str]] = [
    validate_spot_id,
    validate_user_spot_id,
    validate_stable_type,
    validate_node_id,
]
by_validator = pytest.mark.parametrize("validate", VALIDATORS, ids=lambda f: f.__name__)

UUID4 = "3f2b8c1e-9d4a-4c6b-8e2f-1a2b3c4d5e6f"

# Any str of 1..255 UTF-8 bytes without surrogates: draw text, cut it at 255 bytes.
valid_ids = (
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=255)
    .map(lambda s: s.encode()[:MAX_ID_BYTES].decode("utf-8", "ignore"))
    .filter(bool)
)


def _counting_bytes(seed: bytes) -> Callable[[int], bytes]:
    """A deterministic ``random_bytes`` that yields ``seed`` chunks in order."""
    chunks: Iterator[bytes] = iter([seed])

    def random_bytes(n: int) -> bytes:
        chunk = next(chunks)
        assert len(chunk) == n
        return chunk

    return random_bytes


# --------------------------------------------------------------------------- text bounds


@by_validator
def test_bounds_count_utf8_bytes(validate: Callable[[object], str]) -> None:
    assert validate("a") == "a"
    assert validate("a" * 255) == "a" * 255
    assert validate("é" * 127 + "a") == "é" * 127 + "a"  # 128 characters, 255 bytes
    for bad in ("", "a" * 256, "é" * 128, "€" * 86):  # 0, 256, 256, 258 bytes
        with pytest.raises(InvalidOperation, match="UTF-8 bytes"):
            validate(bad)


@by_validator
@pytest.mark.parametrize("bad", ["\ud800", "ok\udfff", "\udc80x"])
def test_lone_surrogates_refused(validate: Callable[[object], str], bad: str) -> None:
    with pytest.raises(InvalidOperation, match="surrogate"):
        validate(bad)


@by_validator
@pytest.mark.parametrize("bad", [None, 1, b"spot", bytearray(b"spot"), ["a"]])
def test_non_str_refused(validate: Callable[[object], str], bad: object) -> None:
    with pytest.raises(InvalidOperation, match="must be a str"):
        validate(bad)


def test_ids_are_not_normalised_or_case_folded() -> None:
    nfc = unicodedata.normalize("NFC", "café")
    nfd = unicodedata.normalize("NFD", "café")
    assert nfc.encode() != nfd.encode()
    assert validate_spot_id(nfc) == nfc
    assert validate_spot_id(nfd) == nfd
    assert validate_spot_id(nfc) != validate_spot_id(nfd)
    assert validate_stable_type("Room") != validate_stable_type("room")


@given(valid_ids)
def test_any_short_surrogate_free_text_validates(value: str) -> None:
    assert validate_spot_id(value) == value
    assert validate_stable_type(value) == value


@given(valid_ids, valid_ids)
def test_str_order_is_utf8_byte_order(a: str, b: str) -> None:
    assert (a == b) == (a.encode() == b.encode())
    assert (a < b) == (a.encode() < b.encode())


@given(st.text(st.characters(codec="utf-8"), min_size=64, max_size=400))
def test_anything_over_255_bytes_refused(value: str) -> None:
    if len(value.encode()) > MAX_ID_BYTES:
        with pytest.raises(InvalidOperation):
            validate_spot_id(value)
    else:
        assert validate_spot_id(value) == value


# --------------------------------------------------------------------------- Entry format


@pytest.mark.parametrize(
    "value",
    [f"node-a-entry-{UUID4}", f"x-entry-{UUID4}", f"a-entry-b-entry-{UUID4}", f"é\n-entry-{UUID4}"],
)
def test_entry_format_is_reserved(value: str) -> None:
    assert is_entry_spot_id(value)
    assert validate_spot_id(value) == value  # a valid Spot ID ...
    with pytest.raises(InvalidOperation, match="reserved"):
        validate_user_spot_id(value)  # ... that callers cannot use


@pytest.mark.parametrize(
    "value",
    [
        f"node-a-entry-{UUID4.upper()}",  # uppercase uuid
        "node-a-entry-3f2b8c1e-9d4a-1c6b-8e2f-1a2b3c4d5e6f",  # version 1
        "node-a-entry-3f2b8c1e-9d4a-4c6b-7e2f-1a2b3c4d5e6f",  # wrong variant
        f"-entry-{UUID4}",  # empty prefix
        f"node-a-Entry-{UUID4}",
        f"node-a-entry-{UUID4}x",
        f"node-a-entry-{UUID4}\n",
        f"node-a-entry-{{{UUID4}}}",
        UUID4,
    ],
)
def test_near_misses_are_not_reserved(value: str) -> None:
    assert not is_entry_spot_id(value)
    assert validate_user_spot_id(value) == value


def test_new_entry_spot_id_is_deterministic_with_injected_bytes() -> None:
    spot_id = new_entry_spot_id("node-a", _counting_bytes(bytes(range(16))))
    assert spot_id == "node-a-entry-00010203-0405-4607-8809-0a0b0c0d0e0f"
    assert is_entry_spot_id(spot_id)


def test_new_entry_spot_id_draws_a_fresh_uuid_each_time() -> None:
    assert new_entry_spot_id("node-a") != new_entry_spot_id("node-a")


@given(valid_ids.filter(lambda p: len(p.encode()) <= 212), st.binary(min_size=16, max_size=16))
def test_every_generated_entry_id_is_detected(prefix: str, seed: bytes) -> None:
    spot_id = new_entry_spot_id(prefix, _counting_bytes(seed))
    assert spot_id.startswith(f"{prefix}-entry-")
    assert is_entry_spot_id(spot_id)
    assert validate_spot_id(spot_id) == spot_id
    with pytest.raises(InvalidOperation):
        validate_user_spot_id(spot_id)


def test_entry_prefix_budget() -> None:
    assert validate_entry_prefix("p" * 212) == "p" * 212
    assert len(new_entry_spot_id("p" * 212).encode()) == MAX_ID_BYTES
    for bad in ("p" * 213, "é" * 107, ""):
        with pytest.raises(InvalidOperation):
            new_entry_spot_id(bad)


# --------------------------------------------------------------------------- uuid4


def test_new_uuid4_is_lowercase_canonical_v4() -> None:
    assert new_uuid4(_counting_bytes(b"\xff" * 16)) == "ffffffff-ffff-4fff-bfff-ffffffffffff"
    assert new_uuid4(_counting_bytes(bytes(16))) == "00000000-0000-4000-8000-000000000000"


@given(st.binary(min_size=16, max_size=16))
def test_new_uuid4_always_matches_the_format(seed: bytes) -> None:
    value = new_uuid4(_counting_bytes(seed))
    assert is_lowercase_uuid4(value)
    assert value == value.lower()
    assert len(value) == 36


@pytest.mark.parametrize(
    "value",
    [UUID4.upper(), "3f2b8c1e-9d4a-1c6b-8e2f-1a2b3c4d5e6f", UUID4.replace("-", ""), UUID4 + "\n"],
)
def test_is_lowercase_uuid4_refuses_other_forms(value: str) -> None:
    assert not is_lowercase_uuid4(value)


# --------------------------------------------------------------------------- NodeRid


@pytest.mark.parametrize(
    "raw", [bytes(15), b"\x01" * 15, b"\x01" * 17, b"", bytearray(b"\x01" * 16)]
)
def test_node_rid_is_exactly_16_bytes(raw: bytes) -> None:
    with pytest.raises(InvalidOperation, match="16 bytes"):
        NodeRid(raw)


def test_zero_node_rid_refused() -> None:
    with pytest.raises(InvalidOperation, match="all-zero"):
        NodeRid(bytes(16))
    with pytest.raises(InvalidOperation):
        NodeRid.parse("0" * 32)


@given(st.binary(min_size=16, max_size=16).filter(any))
def test_node_rid_text_round_trip(raw: bytes) -> None:
    rid = NodeRid(raw)
    text = str(rid)
    assert text == raw.hex()
    assert NodeRid.parse(text) == rid


@pytest.mark.parametrize("text", ["", "ab" * 15, "ab" * 17, "zz" * 16, "0x" + "ab" * 15, 1234])
def test_node_rid_parse_refuses_malformed_text(text: str) -> None:
    with pytest.raises(InvalidOperation, match="32 hex digits"):
        NodeRid.parse(text)


def test_node_rid_generate_skips_zero_and_uses_injected_bytes() -> None:
    chunks = iter([bytes(16), b"\x07" * 16])
    rid = NodeRid.generate(lambda n: next(chunks))
    assert rid.value == b"\x07" * 16
    assert NodeRid.generate() != NodeRid.generate()
