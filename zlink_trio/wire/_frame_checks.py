"""The attrs validators the frame classes share: what this side may send.

Theory of operation
-------------------
A frame constructor runs a validator on every field, so that a frame object
always has a byte form: each ``check_*`` here accepts exactly the values of
one field encoding of :mod:`zlink_trio.wire._frame_fields` (``u64``, ``gen``,
``text8``, an :class:`OwnerFence`, a :class:`SpotRef`, an application
payload, ...) and raises :class:`LocalProtocolError` for anything else -- the
caller's bug, since the runtime builds frames from validated values. Ints
must be exact ``int`` (never ``bool``) in range, texts must have a UTF-8
form of the right size, and ``bytes`` must not be a ``bytearray`` (frames
are immutable and hashable). A check used by one frame module only lives in
that module.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from zlink_trio.core.errors import LocalProtocolError
from zlink_trio.core.identity import MAX_ID_BYTES
from zlink_trio.core.records import OwnerFence, SpotRef
from zlink_trio.wire._frame_fields import MAX_GEN, MAX_U32, MAX_U64
from zlink_trio.wire.codec import EncodedMessage

if TYPE_CHECKING:
    import attrs

__all__ = (
    "T",
    "check_bytes",
    "check_deadline",
    "check_gen",
    "check_optional_payload",
    "check_owner",
    "check_payload",
    "check_ref",
    "check_text8",
    "check_u64",
    "check_u64_nonzero",
    "int_in",
    "text8_size",
)

T = TypeVar("T")


def _fail(attribute: attrs.Attribute[T], expected: str, value: T) -> LocalProtocolError:
    return LocalProtocolError(
        f"cannot encode {attribute.name}={value!r}: it must be {expected}; "
        "build the frame from validated values"
    )


def int_in(value: object, low: int, high: int) -> bool:
    """``value`` is an ``int`` (not a ``bool``) in ``low..high``."""
    return type(value) is int and low <= value <= high


def check_u64(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """An ``int`` in 0..2**64-1."""
    if not int_in(value, 0, MAX_U64):
        raise _fail(attribute, f"an int in 0..{MAX_U64}", value)


def check_u64_nonzero(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """An ``int`` in 1..2**64-1 (operation ids, request correlations)."""
    if not int_in(value, 1, MAX_U64):
        raise _fail(attribute, f"an int in 1..{MAX_U64} (0 is reserved)", value)


def check_gen(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """An ``int`` in 1..2**63-1 (generations, StoreVersions, descriptor versions)."""
    if not int_in(value, 1, MAX_GEN):
        raise _fail(attribute, f"an int in 1..{MAX_GEN}", value)


def check_deadline(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """Milliseconds since the Unix epoch, 1..2**63-1."""
    if not int_in(value, 1, MAX_GEN):
        raise _fail(attribute, f"milliseconds since the Unix epoch in 1..{MAX_GEN}", value)


def text8_size(value: object) -> int:
    """UTF-8 size of ``value``, or -1 if it is not a ``str`` with a UTF-8 form."""
    if not isinstance(value, str):
        return -1
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return -1


def check_text8(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """A ``str`` of 1..255 UTF-8 bytes (no lone surrogates)."""
    if not 1 <= text8_size(value) <= MAX_ID_BYTES:
        raise _fail(attribute, f"a str of 1..{MAX_ID_BYTES} UTF-8 bytes", value)


def check_bytes(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """A ``bytes`` value (not ``bytearray``: frames are immutable and hashable)."""
    if type(value) is not bytes:
        raise _fail(attribute, "bytes", value)


def check_owner(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """An :class:`OwnerFence` (NodeRid + lifecycle generation)."""
    if not isinstance(value, OwnerFence):
        raise _fail(attribute, "an OwnerFence(node_rid, lifecycle_generation)", value)


def check_ref(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """A :class:`SpotRef`."""
    if not isinstance(value, SpotRef):
        raise _fail(attribute, "a SpotRef", value)


def check_payload(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """An :class:`EncodedMessage` with a 1..255-byte type name and a ``bytes`` body.

    The body's size is checked against the configured cap by ``encode``.
    """
    if not (
        isinstance(value, EncodedMessage)
        and 1 <= text8_size(value.type_name) <= MAX_ID_BYTES
        and type(value.body) is bytes
        and len(value.body) <= MAX_U32
    ):
        raise _fail(
            attribute, "an EncodedMessage(type_name: 1..255 UTF-8 bytes, body: bytes)", value
        )


def check_optional_payload(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    """``None`` or a valid :class:`EncodedMessage`."""
    if value is not None:
        check_payload(instance, attribute, value)
