"""Shared field checks for the record and descriptor values.

Each check returns the value it accepted or raises :class:`InvalidOperation`
with a message that says what was wrong and what to pass instead, so the
attrs validators and the JSON decoders refuse bad input the same way.

The ``*_field`` functions are attrs validators (``(instance, attribute, value)``,
returning nothing) that the authority record, the fences and SpotRef share; the
text ones test the common case -- an ASCII str within the bound, what
``identity``'s validators accept without encoding -- before calling them.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Final

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import (
    MAX_ID_BYTES,
    MAX_OBJECT_GENERATION,
    NodeRid,
    validate_mesh_name,
    validate_spot_id,
    validate_stable_type,
)

if TYPE_CHECKING:
    import attrs

__all__ = (
    "MAX_GENERATION",
    "check_finite",
    "check_generation",
    "check_int",
    "check_sha256_hex",
    "check_text",
    "generation_field",
    "mesh_field",
    "node_rid_field",
    "parse_decimal",
    "spot_id_field",
    "stable_type_field",
    "validate_mesh_name",
)

#: Largest ObjectGeneration, AuthorityOwnerGeneration, StoreVersion or
#: lifecycle generation: unsigned 63-bit, so it fits a signed 64-bit column.
MAX_GENERATION: Final = MAX_OBJECT_GENERATION

_SHA256: Final = re.compile(r"\A[0-9a-f]{64}\Z")
_DECIMAL: Final = re.compile(r"\A[1-9][0-9]{0,18}\Z")


def check_text(value: object, what: str, max_bytes: int = MAX_ID_BYTES) -> str:
    """Return ``value`` if it is a ``str`` of 1..``max_bytes`` UTF-8 bytes."""
    size = 0
    if isinstance(value, str):
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            size = 0
    if not 1 <= size <= max_bytes:
        raise InvalidOperation(
            f"{what} must be a str of 1..{max_bytes} UTF-8 bytes, got {value!r}; "
            "pass a non-empty, valid UTF-8 value within the bound"
        )
    assert isinstance(value, str)
    return value


def check_int(value: object, what: str, low: int, high: int) -> int:
    """Return ``value`` if it is an ``int`` (not ``bool``) in ``low..high``."""
    if type(value) is not int or not low <= value <= high:
        raise InvalidOperation(f"{what} must be an int in {low}..{high}, got {value!r}")
    return value


def check_generation(value: object, what: str) -> int:
    """Return ``value`` if it is a non-zero unsigned 63-bit ``int``."""
    return check_int(value, what, 1, MAX_GENERATION)


def check_finite(value: object, what: str, *, positive: bool = False) -> float:
    """Return ``value`` as a float if it is a finite real (``> 0`` if ``positive``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidOperation(f"{what} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise InvalidOperation(f"{what} must be > 0, got {value!r}")
    return float(value)


def check_sha256_hex(value: object, what: str = "sha256") -> str:
    """Return ``value`` if it is 64 lowercase hex digits (a SHA-256 digest)."""
    # ``strip`` leaves nothing of a str made of hex digits only (cheaper than the regex).
    if type(value) is str and len(value) == 64 and not value.strip("0123456789abcdef"):
        return value
    if not isinstance(value, str) or _SHA256.match(value) is None:
        raise InvalidOperation(
            f"{what} must be 64 lowercase hex digits (a SHA-256 digest), got {value!r}"
        )
    return value


def parse_decimal(value: object, what: str) -> int:
    """Parse a generation written as a decimal string (``"1"``..``"9223372036854775807"``).

    No sign, no leading zeros, no whitespace, non-zero, below 2**63; raises
    :class:`InvalidOperation` otherwise.
    """
    if not isinstance(value, str) or _DECIMAL.match(value) is None:
        raise InvalidOperation(
            f"{what} must be a decimal string without sign or leading zeros, got {value!r}"
        )
    return check_generation(int(value), what)


# -- attrs validators (see the module docstring) ------------------------------------------

def node_rid_field(instance: object, attribute: attrs.Attribute[NodeRid], value: NodeRid
                   ) -> None:
    """Refuse a ``value`` that is not a :class:`NodeRid`."""
    if not isinstance(value, NodeRid):
        raise InvalidOperation(f"{attribute.name} must be a NodeRid, got {type(value).__name__}")


def generation_field(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    """Refuse a ``value`` that is not a non-zero unsigned 63-bit ``int`` (a generation)."""
    if type(value) is not int or not 0 < value <= MAX_GENERATION:  # (check_generation, inline)
        check_generation(value, attribute.name)


def spot_id_field(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    """Refuse a ``value`` that is not a valid Spot ID."""
    if not (type(value) is str and value.isascii() and 0 < len(value) <= MAX_ID_BYTES):
        validate_spot_id(value)


def mesh_field(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    """Refuse a ``value`` that is not a valid Mesh name."""
    if not (type(value) is str and value.isascii() and 0 < len(value) <= MAX_ID_BYTES):
        validate_mesh_name(value)


def stable_type_field(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    """Refuse a ``value`` that is not a valid stable type."""
    if not (type(value) is str and value.isascii() and 0 < len(value) <= MAX_ID_BYTES):
        validate_stable_type(value)
