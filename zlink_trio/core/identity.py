"""Identities: Spot IDs, stable types, Entry Spot IDs, uuid4s, NodeIds and NodeRids.

Theory of operation
-------------------
A Spot ID and a stable type are ``str`` values of 1..255 UTF-8 bytes,
compared byte for byte. Python's ``str`` comparison is by code
point, which orders the same as UTF-8 bytes for valid strings, so equality
and ordering of validated values are byte comparisons. A ``str`` holding a
lone surrogate has no UTF-8 encoding and is refused.

Validation happens at the API edge, before any store call: an invalid value
raises :class:`InvalidOperation` and nothing is written.

The Entry Spot ID format ``<prefix>-entry-<lowercase uuid4>`` is reserved for
the framework (docs/concepts.md, "Spot kinds"); callers cannot use it for User
or Instance Spots. The framework never parses a node relationship out of an
ID: the descriptor publishes the mapping.

Randomness is injected (``random_bytes``) so tests can be deterministic; the
default is ``os.urandom``, which reads no clock and does no I/O a test sees.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from enum import IntEnum
from typing import Final

import attrs

from zlink_trio.core.errors import InvalidOperation

__all__ = (
    "MAX_ID_BYTES",
    "MAX_OBJECT_GENERATION",
    "NodeRid",
    "RandomBytes",
    "SpotKind",
    "is_entry_spot_id",
    "is_lowercase_uuid4",
    "new_entry_spot_id",
    "new_uuid4",
    "validate_entry_prefix",
    "validate_mesh_name",
    "validate_node_id",
    "validate_spot_id",
    "validate_stable_type",
    "validate_user_spot_id",
)

#: Upper bound, in UTF-8 bytes, of Spot IDs, stable types, NodeIds and MeshNames.
MAX_ID_BYTES: Final = 255

#: ObjectGeneration is non-zero and below 2**63; this is the largest value.
MAX_OBJECT_GENERATION: Final = 2**63 - 1

#: A source of random bytes: ``random_bytes(n)`` returns ``n`` bytes.
RandomBytes = Callable[[int], bytes]

_UUID4_TEXT: Final = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
_UUID4: Final = re.compile(rf"\A{_UUID4_TEXT}\Z")
_ENTRY: Final = re.compile(rf"\A(?P<prefix>.+)-entry-(?P<uuid>{_UUID4_TEXT})\Z", re.DOTALL)


class SpotKind(IntEnum):
    """The closed set of Spot kinds (docs/concepts.md); the numbers are wire values."""

    #: Never a valid kind; decoding 0 is a protocol error.
    INVALID = 0
    #: One per node lifecycle, issued by the framework, never moves.
    ENTRY = 1
    #: Created explicitly through the SpotManager; may move.
    USER = 2
    #: Created by the first message that declares Instance intent; may move.
    INSTANCE = 3
    #: Not a Spot: an Actor, a member of an Entry or User Spot (docs/actors.md). Its
    #: authority record shares the Spot ID namespace and carries its container.
    ACTOR = 4


def _validate_text(value: object, what: str) -> str:
    # The common case without encoding: an ASCII str's UTF-8 size is its length (and
    # it holds no surrogate); ``isascii`` reads a flag CPython keeps on every str.
    if type(value) is str and value.isascii() and 0 < len(value) <= MAX_ID_BYTES:
        return value
    if not isinstance(value, str):
        raise InvalidOperation(
            f"{what} must be a str of 1..{MAX_ID_BYTES} UTF-8 bytes, got {type(value).__name__}"
        )
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidOperation(
            f"{what} {value!r} is not valid UTF-8 (it holds a lone surrogate); "
            "pass a str that encodes to UTF-8"
        ) from None
    if not 1 <= size <= MAX_ID_BYTES:
        raise InvalidOperation(
            f"{what} must be 1..{MAX_ID_BYTES} UTF-8 bytes, got {size} bytes; "
            "use a shorter non-empty value"
        )
    return value


def validate_spot_id(value: object) -> str:
    """Return ``value`` if it is a well-formed Spot ID of any kind.

    Raises :class:`InvalidOperation` when it is not a ``str``, is empty, is
    longer than 255 UTF-8 bytes or holds a lone surrogate.
    """
    return _validate_text(value, "Spot ID")


def validate_user_spot_id(value: object) -> str:
    """Return ``value`` if a caller may use it for a User or Instance Spot.

    Like :func:`validate_spot_id`, and also refuses the framework's reserved
    Entry format with :class:`InvalidOperation`.
    """
    spot_id = validate_spot_id(value)
    if is_entry_spot_id(spot_id):
        raise InvalidOperation(
            f"Spot ID {spot_id!r} has the reserved '<prefix>-entry-<uuid4>' form that only "
            "the framework issues for Entry Spots; choose an ID of another form"
        )
    return spot_id


def validate_stable_type(value: object) -> str:
    """Return ``value`` if it is a well-formed stable type name.

    Stable types are case-sensitive, never normalised, 1..255 UTF-8 bytes.
    Raises :class:`InvalidOperation` otherwise.
    """
    return _validate_text(value, "stable type")


def validate_node_id(value: object) -> str:
    """Return ``value`` if it is a well-formed operator-given NodeId.

    Raises :class:`InvalidOperation` otherwise.
    """
    return _validate_text(value, "NodeId")


def validate_mesh_name(value: object) -> str:
    """Return ``value`` if it is a well-formed MeshName (1..255 UTF-8 bytes).

    Raises :class:`InvalidOperation` otherwise. A MeshName only chooses where a
    Spot is first placed; it is never part of a Spot's identity: one Spot ID is one
    Spot across the whole store, whatever its Mesh.
    """
    return _validate_text(value, "mesh name")


def validate_entry_prefix(value: object) -> str:
    """Return ``value`` if an Entry Spot ID built on it stays within 255 bytes.

    The prefix is diagnostic only (usually the NodeId); the whole ID must fit
    the Spot ID bound, so the prefix may use at most 255 - 43 bytes.
    """
    prefix = _validate_text(value, "Entry Spot ID prefix")
    budget = MAX_ID_BYTES - len("-entry-") - 36
    if len(prefix.encode("utf-8")) > budget:
        raise InvalidOperation(
            f"Entry Spot ID prefix {prefix!r} is longer than {budget} UTF-8 bytes; "
            "use a shorter NodeId or prefix"
        )
    return prefix


def is_lowercase_uuid4(value: str) -> bool:
    """Tell whether ``value`` is a lowercase canonical RFC 4122 version-4 UUID."""
    return _UUID4.match(value) is not None


def is_entry_spot_id(value: str) -> bool:
    """Tell whether ``value`` has the reserved Entry format ``<prefix>-entry-<uuid4>``."""
    return "-entry-" in value and _ENTRY.match(value) is not None


def new_uuid4(random_bytes: RandomBytes = os.urandom) -> str:
    """Return a fresh lowercase canonical uuid4 string (Create's automatic Spot ID).

    ``str(uuid.UUID(bytes=random_bytes(16), version=4))``, spelt out (a third of its cost).
    """
    raw = bytearray(random_bytes(16))
    if len(raw) != 16:
        raise ValueError("bytes is not a 16-char string")
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_entry_spot_id(prefix: str, random_bytes: RandomBytes = os.urandom) -> str:
    """Issue a framework Entry Spot ID ``<prefix>-entry-<uuid4>``.

    The uuid4 is drawn fresh, never derived from the NodeRid.
    Raises :class:`InvalidOperation` if the prefix is invalid or too long.
    """
    return f"{validate_entry_prefix(prefix)}-entry-{new_uuid4(random_bytes)}"


def _check_rid(instance: NodeRid, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != 16:
        raise InvalidOperation("a NodeRid is exactly 16 bytes (128 bits)")
    if value == bytes(16):
        raise InvalidOperation("the all-zero NodeRid is reserved for 'absent'")


@attrs.frozen(order=True, cache_hash=True)  # a dict key everywhere: hash it once
class NodeRid:
    """A node's 128-bit routing ID, fresh for every process lifecycle.

    Build one with :meth:`generate` or :meth:`parse`; ``str()`` is 32
    lowercase hex digits. The all-zero value is reserved (absent on the wire).
    """

    value: bytes = attrs.field(validator=_check_rid)

    @classmethod
    def generate(cls, random_bytes: RandomBytes = os.urandom) -> NodeRid:
        """Draw a fresh random NodeRid (retrying the negligible all-zero case)."""
        while True:
            raw = random_bytes(16)
            if raw != bytes(16):
                return cls(raw)

    @classmethod
    def parse(cls, text: str) -> NodeRid:
        """Parse 32 hex digits; raises :class:`InvalidOperation` otherwise."""
        if not isinstance(text, str) or len(text) != 32:
            raise InvalidOperation(f"a NodeRid is 32 hex digits, got {text!r}")
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise InvalidOperation(f"a NodeRid is 32 hex digits, got {text!r}") from None
        return cls(raw)

    def __str__(self) -> str:
        return self.value.hex()
