"""Small decoders shared by the records' and descriptors' ``from_json`` methods.

Every function takes a value already parsed from JSON and either returns the
typed field or raises :class:`InvalidOperation` naming what was expected, so
a stored or received object that is malformed never becomes a half-valid
value. The encoders live next to the classes (``to_json``).
"""

from __future__ import annotations

from typing import Final

from zlink_trio.core._checks import check_finite, check_int, parse_decimal
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import SpotKind

__all__ = (
    "decode_kind",
    "encode_kind",
    "json_generation",
    "json_int",
    "json_number",
    "json_object",
    "json_str",
)

_KIND_NAMES: Final = {k.name.lower(): k for k in SpotKind if k is not SpotKind.INVALID}


def json_object(value: object, keys: frozenset[str], what: str) -> dict[str, object]:
    """``value`` as a dict with exactly ``keys``; InvalidOperation otherwise."""
    if not isinstance(value, dict) or set(value) != keys:
        raise InvalidOperation(
            f"a {what} is a JSON object with exactly the keys {sorted(keys)}, got {value!r}"
        )
    return value


def json_str(value: object, what: str) -> str:
    """``value`` if it is a str (content checked by the class's validators)."""
    if not isinstance(value, str):
        raise InvalidOperation(f"{what} must be a JSON string, got {value!r}")
    return value


def json_int(value: object, what: str, low: int, high: int) -> int:
    """``value`` if it is a JSON integer in ``low..high``."""
    return check_int(value, what, low, high)


def json_number(value: object, what: str) -> float:
    """``value`` as a float if it is a finite JSON number."""
    return check_finite(value, what)


def json_generation(value: object, what: str) -> int:
    """A 63-bit counter written as a decimal string."""
    return parse_decimal(value, what)


def encode_kind(kind: SpotKind) -> str:
    """A SpotKind as its lowercase name (``"user"``)."""
    return kind.name.lower()


def decode_kind(value: object, what: str = "kind") -> SpotKind:
    """The SpotKind named by :func:`encode_kind`; InvalidOperation otherwise."""
    kind = _KIND_NAMES.get(value) if isinstance(value, str) else None
    if kind is None:
        raise InvalidOperation(f"{what} must be one of {sorted(_KIND_NAMES)}, got {value!r}")
    return kind
