"""The one wire converter and the JSON byte functions behind the message codec.

Theory of operation
-------------------
:func:`make_converter` builds a fresh :class:`cattrs.Converter` (the global
cattrs converter is never used or changed) whose structure hooks *never
coerce*: a JSON string is not an ``int``, a number is not a ``str``, ``true``
is not ``1``, a string or an object is not a list, a list is not an object.
cattrs' own defaults call ``int(x)``, ``str(x)``, ``bool(x)`` and iterate any
iterable, which would turn ``"5"`` into ``5``, ``{"a": 1}`` into a string and
``"abc"`` into ``["a", "b", "c"]``; each hook below shadows one of those.

Supported field types: attrs classes, ``int`` (exact at any size), ``float``
(finite), ``str`` (no lone surrogates), ``bool``, ``None`` / ``X | None``,
unions of JSON scalars, ``list[X]``, ``tuple[X, ...]``, ``tuple[X, Y]``,
``Sequence[X]`` (decoded as a tuple), ``dict[str, X]``, enums whose values are
``int`` or ``str``, ``datetime`` / ``date`` (ISO 8601 text) and ``bytes``
(standard padded base64, which every language decodes). Sets and non-``str``
mapping keys are refused when the hook is built (JSON has neither, and set
order differs between processes, so bytes would not be deterministic).
Unknown object keys are ignored, so adding a field *with a default* is a
compatible change between versions. A field's JSON key is its attribute name
unless its class declares ``__zlink_json_names__ = "camelCase"``
(:mod:`zlink_trio.wire._json_names`); then the Python spelling of a renamed
field is refused, not ignored.

:func:`dump_json` writes compact UTF-8 JSON (``separators=(",", ":")``,
``ensure_ascii=False``); the same value always yields the same bytes (attrs
field order, dict insertion order). NaN and infinities have no JSON form and
are refused. :func:`load_json` is total over any byte string: invalid UTF-8,
non-standard constants, overflowing floats, duplicate keys (parsers disagree
on which wins), over-deep nesting and shape errors all become
:class:`RemoteProtocolError`, worded by :func:`cattrs.transform_error`, with
the original exception chained as ``__cause__``.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import enum
import json
import math
from collections.abc import Callable
from typing import Final, TypeVar, cast, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    is_any_set,
    is_mapping,
    is_sequence,
    list_structure_factory,
    mapping_structure_factory,
)
from cattrs.errors import StructureHandlerNotFoundError
from cattrs.strategies import configure_union_passthrough
from cattrs.v import format_exception

from zlink_trio.core.errors import InvalidOperation, RemoteProtocolError
from zlink_trio.wire._json_names import PythonSpelledKeyError, configure_json_names

__all__ = ("dump_json", "load_json", "make_converter")

T = TypeVar("T")

#: At most this many cattrs error lines go into one RemoteProtocolError message.
_MAX_REPORTED_ERRORS: Final = 5
_MAX_MESSAGE_CHARS: Final = 1000

_Hook = Callable[[object, object], object]


def _json_kind(value: object) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _enum_value(value: object, cl: type[enum.Enum]) -> enum.Enum:
    if type(value) not in {type(m.value) for m in cl}:
        raise TypeError(f"expected a {cl.__name__} value, got a JSON {_json_kind(value)}")
    return cl(value)


def _structure_int(value: object, cl: type[int]) -> object:
    if cl is int and type(value) is int:  # the common field: no enum to look for
        return value
    # Singledispatch also routes int subclasses (IntEnum, IntFlag) here.
    if isinstance(cl, type) and issubclass(cl, enum.Enum):
        return _enum_value(value, cl)
    if type(value) is not int:
        raise TypeError(f"expected an integer, got a JSON {_json_kind(value)}")
    return value


def _structure_float(value: object, cl: type[float]) -> float:
    if type(value) is not float and type(value) is not int:
        raise TypeError(f"expected a number, got a JSON {_json_kind(value)}")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError("number out of range for a float")
    return result


def _structure_str(value: object, cl: type[str]) -> object:
    if cl is str and type(value) is str and value.isascii():  # no enum, no surrogate
        return value
    # Singledispatch also routes str subclasses (StrEnum) here.
    if isinstance(cl, type) and issubclass(cl, enum.Enum):
        return _enum_value(value, cl)
    if type(value) is not str:
        raise TypeError(f"expected a string, got a JSON {_json_kind(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("string holds a lone surrogate") from None
    return value


def _structure_bool(value: object, cl: type[bool]) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected true or false, got a JSON {_json_kind(value)}")
    return value


def _structure_bytes(value: object, cl: type[bytes]) -> bytes:
    if type(value) is not str:
        raise TypeError(f"expected base64 text, got a JSON {_json_kind(value)}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise ValueError("invalid base64 text") from None


def _unstructure_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _structure_datetime(value: object, cl: type[dt.datetime]) -> dt.datetime:
    if type(value) is not str:
        raise TypeError(f"expected ISO 8601 text, got a JSON {_json_kind(value)}")
    return dt.datetime.fromisoformat(value)


def _structure_date(value: object, cl: type[dt.date]) -> dt.date:
    if type(value) is not str:
        raise TypeError(f"expected ISO 8601 text, got a JSON {_json_kind(value)}")
    return dt.date.fromisoformat(value)


def _is_plain_enum(t: object) -> bool:
    return isinstance(t, type) and issubclass(t, enum.Enum)


def _enum_factory(t: type[enum.Enum]) -> _Hook:
    kinds = {type(m.value) for m in t}
    if not kinds <= {int, str}:
        raise StructureHandlerNotFoundError(
            f"enum {t.__qualname__} has values that are not int or str", t
        )

    def structure_enum(value: object, cl: object) -> object:
        return _enum_value(value, t)

    return structure_enum


def _refuse_set(t: object) -> _Hook:
    raise StructureHandlerNotFoundError(
        f"{t} is a set: JSON has no set and set order is not deterministic; use a tuple or a list",
        cast("type", t),
    )


def _is_array(t: object) -> bool:
    return is_sequence(t) or get_origin(t) is tuple or t is tuple


def _array_factory(t: object, conv: cattrs.Converter) -> _Hook:
    # Only JSON arrays become sequences: cattrs alone would iterate a string
    # into characters or an object into its keys.
    origin = get_origin(t) or t
    args = get_args(t)
    if origin is tuple and args and args[-1] is not Ellipsis:
        inner = cast("_Hook", conv.gen_structure_hetero_tuple(t))
    elif origin is list:
        inner = cast("_Hook", list_structure_factory(cast("type", t), conv))
    else:
        inner = cast("_Hook", homogenous_tuple_structure_factory(cast("type", t), conv))

    def structure_array(value: object, cl: object) -> object:
        if type(value) is not list:
            raise TypeError(f"expected a JSON array, got a JSON {_json_kind(value)}")
        return inner(value, cl)

    return structure_array


def _object_factory(t: object, conv: cattrs.Converter) -> _Hook:
    args = get_args(t)
    if args and args[0] is not str:
        raise StructureHandlerNotFoundError(
            f"{t} has {args[0]} keys; JSON object keys are strings, use dict[str, ...]",
            cast("type", t),
        )
    inner = cast(
        "_Hook",
        mapping_structure_factory(
            cast("type", t), conv, dict, detailed_validation=conv.detailed_validation
        ),
    )

    def structure_object(value: object, cl: object) -> object:
        if type(value) is not dict:
            raise TypeError(f"expected a JSON object, got a JSON {_json_kind(value)}")
        return inner(value, cl)

    return structure_object


def make_converter() -> cattrs.Converter:
    """Return a new converter configured for the wire (strict, JSON-shaped).

    Each call builds a fresh, independent :class:`cattrs.Converter`; the
    global cattrs converter is never used or changed. The supported types are
    listed in this module's docstring; add hooks for new value types here,
    never per message class.
    """
    conv = cattrs.Converter(detailed_validation=True, forbid_extra_keys=False)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(bool, _structure_bool)
    conv.register_structure_hook(bytes, _structure_bytes)
    conv.register_unstructure_hook(bytes, _unstructure_bytes)
    conv.register_structure_hook(dt.datetime, _structure_datetime)
    conv.register_unstructure_hook(dt.datetime, dt.datetime.isoformat)
    conv.register_structure_hook(dt.date, _structure_date)
    conv.register_unstructure_hook(dt.date, dt.date.isoformat)
    # Later registrations are tried first, so these shadow cattrs' lenient defaults.
    conv.register_structure_hook_factory(_is_plain_enum, _enum_factory)
    conv.register_structure_hook_factory(is_any_set, _refuse_set)
    conv.register_structure_hook_factory(_is_array, _array_factory)
    conv.register_structure_hook_factory(is_mapping, _object_factory)
    configure_union_passthrough(str | bool | int | float | None, conv)
    # Last, so it is tried before cattrs' own attrs hooks for the classes that opt in.
    configure_json_names(conv)
    return conv


# --------------------------------------------------------------------------- JSON bytes


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range for a float")
    return value


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key in a JSON object")
    return result


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


#: One decoder for every body: ``json.loads`` with keyword arguments would build a
#: fresh ``JSONDecoder`` per call (about half its cost for a 100-byte body).
_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_parse_float,
                                   object_pairs_hook=_no_duplicates)


def _parse(text: str) -> object:
    """``json.loads`` with this module's hooks: compact text (what :func:`dump_json`
    writes) is parsed in one scan; anything else -- whitespace around the value, extra
    data, an error -- goes through the decoder's full ``decode``, which decides."""
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        value, end = None, -1
    return value if end == len(text) else _DECODER.decode(text)


def _make_encode() -> Callable[[object], str]:
    """Compact JSON text of an unstructured value (``json.dumps`` with this module's options).

    CPython's C encoder is built once instead of once per call (``json.dumps`` with
    keyword arguments builds a ``JSONEncoder`` and a C encoder every time). It keeps no
    table of the containers it is inside: the values come fresh from cattrs, and a cycle
    fails as a ``RecursionError`` instead of ``ValueError`` (both refused the same way).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    quote = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or quote is None:  # no C accelerator: the pure-Python encoder
        encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return encoder.encode
    chunks = make(None, _not_json, quote, None, ":", ",", False, False, False)

    def encode(value: object) -> str:
        if isinstance(value, str):
            return cast("str", quote(value))
        return "".join(chunks(value, 0))

    return encode


_encode: Final = _make_encode()


def _format_exception(exc: BaseException, cl: type | None) -> str:
    # cattrs' formatter words every extra key alike; ours names the key the class expects.
    if isinstance(exc, PythonSpelledKeyError) and exc.message:
        return exc.message
    return format_exception(exc, cl)


def _describe(exc: Exception) -> str:
    lines = cattrs.transform_error(exc, format_exception=_format_exception)
    text = "; ".join(lines[:_MAX_REPORTED_ERRORS])
    if len(lines) > _MAX_REPORTED_ERRORS:
        text += f"; and {len(lines) - _MAX_REPORTED_ERRORS} more"
    if len(text) > _MAX_MESSAGE_CHARS:
        text = text[:_MAX_MESSAGE_CHARS] + "…"
    return text


def dump_json(converter: cattrs.Converter, value: object, *, max_bytes: int,
              unstructure: Callable[[object], object] | None = None) -> bytes:
    """Unstructure ``value`` and return it as compact UTF-8 JSON.

    The same value always gives the same bytes (attrs field order, dict
    insertion order). Raises :class:`InvalidOperation` if the value has no
    JSON form (NaN, a set, a lone surrogate, a foreign object, a cycle) or
    the result is longer than ``max_bytes``. Use it for records as well as
    messages so both share one set of hooks. ``unstructure`` is the converter's
    unstructure hook for ``type(value)`` if the caller kept it (the same result,
    without the converter's dispatch).
    """
    try:
        raw = converter.unstructure(value) if unstructure is None else unstructure(value)
        body = _encode(raw).encode("utf-8")
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError) as exc:
        raise InvalidOperation(
            f"cannot encode {type(value).__qualname__} as JSON ({exc}); use only the "
            "field types listed in zlink_trio.wire._converter"
        ) from exc
    if len(body) > max_bytes:
        raise InvalidOperation(
            f"encoded {type(value).__qualname__} is {len(body)} bytes, above the "
            f"{max_bytes}-byte bound; send less data per message"
        )
    return body


def load_json(converter: cattrs.Converter, data: bytes, cl: type[T], *, max_bytes: int,
              structure: Callable[[object, type[T]], T] | None = None,
              is_attrs: bool | None = None) -> T:
    """Parse JSON ``data`` from a peer and structure it as ``cl``.

    Total: returns a ``cl`` or raises :class:`RemoteProtocolError` (invalid
    UTF-8, invalid or non-finite JSON, duplicate keys, more than
    ``max_bytes`` bytes, a shape that does not match ``cl``, or a validator of
    ``cl`` refusing a value). ``BaseException``\\ s that are not errors
    (e.g. ``KeyboardInterrupt``) pass through. ``structure`` (the converter's
    structure hook for ``cl``) and ``is_attrs`` (``attrs.has(cl)``) are what the
    caller kept of them, if it did (the same result, without looking them up).
    """
    if len(data) > max_bytes:
        raise RemoteProtocolError(
            f"JSON body of {len(data)} bytes exceeds the {max_bytes}-byte bound"
        )
    try:
        raw = _parse(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"body is not valid UTF-8 JSON: {exc}") from exc
    if (attrs.has(cl) if is_attrs is None else is_attrs) and type(raw) is not dict:
        raise RemoteProtocolError(
            f"body does not match {cl.__qualname__}: expected a JSON object, "
            f"got a JSON {_json_kind(raw)}"
        )
    try:
        if structure is None:
            return converter.structure(raw, cl)
        return structure(raw, cl)
    except Exception as exc:  # cattrs groups, validators' errors, RecursionError, ...
        raise RemoteProtocolError(
            f"body does not match {cl.__qualname__}: {_describe(exc)}"
        ) from exc
