"""The typed JSON codec for application messages.

Theory of operation
-------------------
An application message is an instance of an ``attrs`` class. On the wire it
travels as two parts: its *stable type name* (carried by the frame, e.g.
command 39, as ``text8``) and a JSON *body*. Nothing is registered per message
class: one explicitly configured :class:`cattrs.Converter` from
:func:`make_converter` structures and unstructures every attrs class from its
field annotations (the supported field types and the strictness rules are in
:mod:`zlink_trio.wire._converter`).

Stable type name. By default it is ``f"{cls.__module__}:{cls.__qualname__}"``;
a class pins another name by defining ``__zlink_type__: ClassVar[str]`` in its
own body. An inherited ``__zlink_type__`` does not count, so a subclass never
silently shares its parent's wire name. The default is stable only as long as
the module path and the class name are: moving or renaming a message class
changes its wire name and breaks mixed-version meshes, so pin
``__zlink_type__`` before the first release of a class you may move. Classes
defined inside functions get ``<locals>`` in their default name and can
collide with each other; pin a name for them. Names are 1..255 UTF-8 bytes,
like every stable type.

Field names. A body's keys are the attribute names, unless the class declares
``__zlink_json_names__: ClassVar[str] = "camelCase"`` (inherited, unlike
``__zlink_type__``); the rules are in :mod:`zlink_trio.wire._json_names`.
:meth:`MessageCodec.to_json` and :meth:`MessageCodec.from_json` give and take a
body alone, for JSON whose type its context names (an HTTP route, a stored record).

Isolation. A Spot and its callers never share a message or a reply object: what
crosses the wire is a copy by nature, and :meth:`MessageCodec.isolated` gives a call
served on its own node the same guarantee. A value whose class is *deeply
immutable* -- a frozen attrs class whose fields are only ``int``, ``float``,
``bool``, ``str``, ``bytes``, ``None``, enums, ``datetime`` / ``date``, other deeply
immutable attrs classes, and ``tuple`` / ``frozenset`` / unions of those, decided
once per class from its annotations -- is passed as it is (nobody can change it);
any other value is copied by decoding its encoding.

Who is at fault. Encoding is the local side's job: anything that cannot be
sent (not an attrs class, a field type the receiver could not decode, a value
with no JSON form, a body above ``max_body_bytes``) is
:class:`InvalidOperation` before any byte leaves. :meth:`MessageCodec.encode`
checks that the *class* is decodable, so a bad field type is found by the
sender; it trusts that field values match their annotations. Decoding reads a
peer's bytes and is total: a malformed type name or a body that does not
decode raises :class:`RemoteProtocolError`, never a raw json, cattrs or
validator exception. A well-formed type name that is not the one expected
raises :class:`TypeMismatch` instead: the frame was valid, but the sender's
application sent (or the caller asked for) another type, so the runtime
should fail that one call, not the link.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import datetime as dt
import enum
import types
import typing
from typing import TYPE_CHECKING, Final, TypeVar, cast, get_args, get_origin

import attrs
from cattrs.errors import StructureHandlerNotFoundError

from zlink_trio.core.errors import (
    InvalidConfiguration,
    InvalidOperation,
    RemoteProtocolError,
    TypeMismatch,
)
from zlink_trio.core.identity import MAX_ID_BYTES
from zlink_trio.wire._converter import dump_json, load_json, make_converter

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    import cattrs

__all__ = (
    "MAX_BODY_BYTES",
    "EncodedMessage",
    "MessageCodec",
    "deeply_immutable",
    "dump_json",
    "load_json",
    "make_converter",
    "message_table",
    "type_name_of",
)

T = TypeVar("T")

#: Default bound of an encoded message body, in bytes (1 MiB).
MAX_BODY_BYTES: Final = 1 << 20


def _require_attrs_class(cl: object) -> type[object]:
    if not (isinstance(cl, type) and attrs.has(cl)):
        raise InvalidOperation(
            f"messages must be attrs classes, got {cl!r}; decorate it with @attrs.frozen"
        )
    return cl


def type_name_of(cl: type[object]) -> str:
    """Return the stable wire type name of the attrs message class ``cl``.

    ``cl.__zlink_type__`` if the class defines it in its own body, else
    ``"<module>:<qualname>"``. Raises :class:`InvalidOperation` if ``cl`` is
    not an attrs class or the name is not 1..255 UTF-8 bytes.
    """
    _require_attrs_class(cl)
    pinned: object = cl.__dict__.get("__zlink_type__")
    name = f"{cl.__module__}:{cl.__qualname__}" if pinned is None else pinned
    if not isinstance(name, str):
        raise InvalidOperation(f"{cl.__qualname__}.__zlink_type__ must be a str, got {name!r}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        size = 0
    if not 1 <= size <= MAX_ID_BYTES:
        raise InvalidOperation(
            f"type name {name!r} of {cl.__qualname__} must be 1..{MAX_ID_BYTES} UTF-8 "
            "bytes; pin a shorter one with __zlink_type__: ClassVar[str]"
        )
    return name


def message_table(classes: Iterable[type[object]]) -> dict[str, type[object]]:
    """Map each class's stable type name to the class, for :meth:`MessageCodec.decode_any`.

    Raises :class:`InvalidConfiguration` if two distinct classes share a name,
    and :class:`InvalidOperation` if one is not an attrs class.
    """
    table: dict[str, type[object]] = {}
    for cl in classes:
        name = type_name_of(cl)
        other = table.setdefault(name, cl)
        if other is not cl:
            raise InvalidConfiguration(
                f"{other.__qualname__} and {cl.__qualname__} share the wire type name "
                f"{name!r}; give one of them another __zlink_type__"
            )
    return table


@attrs.frozen
class EncodedMessage:
    """A message ready for the wire: its stable type name and its JSON body."""

    type_name: str
    body: bytes


def _check_positive(instance: MessageCodec, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or value < 1:
        raise InvalidConfiguration(f"max_body_bytes must be a positive int, got {value!r}")


@attrs.frozen
class MessageCodec:
    """Encodes attrs messages to :class:`EncodedMessage` and decodes them back.

    Stateless apart from the converter's own hook cache, so one instance may
    serve a whole node. ``max_body_bytes`` bounds bodies both ways (default
    1 MiB); it must be a positive int (else :class:`InvalidConfiguration`).
    """

    converter: cattrs.Converter = attrs.field(factory=make_converter)
    max_body_bytes: int = attrs.field(default=MAX_BODY_BYTES, validator=_check_positive)
    #: Classes already checked (attrs, decodable) -> their wire type name: every message
    #: crosses encode and decode, so the checks run once per class, not per message.
    _checked: dict[type[object], str] = attrs.field(factory=dict, init=False, eq=False,
                                                    repr=False)
    #: Per class, the converter's hooks (kept on first use: the converter's own dispatch
    #: is skipped per message), and for decoding whether it is an attrs class.
    _unstructure: dict[type[object], Callable[[object], object]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False)
    _structure: dict[type[object], tuple[Callable[[object, type[object]], object], bool]] = (
        attrs.field(factory=dict, init=False, eq=False, repr=False))
    #: Per class, whether it is deeply immutable (:meth:`isolated` passes it as it is).
    _immutable: dict[type[object], bool] = attrs.field(factory=dict, init=False, eq=False,
                                                       repr=False)

    def _name_of(self, cl: type[object]) -> str:
        name = self._checked.get(cl)
        if name is None:
            name = type_name_of(_require_attrs_class(cl))
            self._check_decodable(cl)
            self._checked[cl] = name
        return name

    def _check_decodable(self, cl: type[object]) -> None:
        # Cached by cattrs after the first call per class.
        try:
            self.converter.get_structure_hook(cl)
        except StructureHandlerNotFoundError as exc:
            raise InvalidOperation(
                f"{cl.__qualname__} has a field type the codec cannot decode ({exc}); "
                "use only the field types listed in zlink_trio.wire._converter"
            ) from exc
        except (NameError, TypeError, AttributeError) as exc:  # unresolvable annotations
            raise InvalidOperation(
                f"the annotations of {cl.__qualname__} cannot be resolved ({exc}); import at "
                "run time every name its fields' annotations use"
            ) from exc

    def encode(self, msg: object) -> EncodedMessage:
        """Encode ``msg``; raises :class:`InvalidOperation` if it cannot be sent.

        Refused: a value whose class is not an attrs class ("messages must be
        attrs classes"), a class with a field type that cannot be decoded, a
        value with no JSON form, a body above ``max_body_bytes``.
        """
        cl = type(msg)
        name = self._name_of(cl)
        hook = self._unstructure.get(cl)
        if hook is None:
            hook = self._unstructure[cl] = self.converter.get_unstructure_hook(cl)
        return EncodedMessage(name, dump_json(self.converter, msg, max_bytes=self.max_body_bytes,
                                              unstructure=hook))

    def decode(self, type_name: str, body: bytes, expected: type[T]) -> T:
        """Decode a message the receiver expects to be of class ``expected``.

        Raises :class:`RemoteProtocolError` if ``type_name`` is malformed or
        ``body`` does not decode as ``expected`` (see :func:`load_json`);
        :class:`TypeMismatch` if ``type_name`` is well formed but names another
        class; :class:`InvalidOperation` if ``expected`` itself is not a
        decodable attrs class (a local bug).
        """
        want = self._name_of(expected)
        if type_name != want:  # (the expected name is well formed: no check when equal)
            _check_wire_name(type_name)
            raise TypeMismatch(
                f"expected a message of type {want!r}, got {type_name!r}; the sender and "
                "the receiver disagree on the message or reply type"
            )
        hooks = self._structure.get(expected)
        if hooks is None:
            hooks = self._structure[expected] = (self.converter.get_structure_hook(expected),
                                                 attrs.has(expected))
        structure = cast("Callable[[object, type[T]], T]", hooks[0])
        return load_json(self.converter, body, expected, max_bytes=self.max_body_bytes,
                         structure=structure, is_attrs=hooks[1])

    def isolated(self, value: T, encoded: EncodedMessage | None = None) -> T:
        """``value`` for a receiver on this node that must not share it with the sender.

        ``value`` itself when its class is deeply immutable (see the module
        docstring); otherwise a new object decoded from ``encoded`` -- the encoding
        of ``value`` the caller already holds, so isolating costs one decode -- or,
        when ``encoded`` is ``None``, from ``value`` encoded now. ``None`` stays
        ``None``. Raises what :meth:`encode` raises when ``value`` cannot be sent.
        """
        if value is None:
            return value
        cl = type(value)
        immutable = self._immutable.get(cl)
        if immutable is None:
            self._name_of(cl)  # (an attrs class the codec can decode, else InvalidOperation)
            immutable = self._immutable[cl] = deeply_immutable(cl)
        if immutable:
            return value
        if encoded is None:
            encoded = self.encode(value)
        return self.decode(encoded.type_name, encoded.body, cl)

    def to_json(self, value: object) -> bytes:
        """The JSON body of the attrs value ``value`` alone, without a type name.

        For bodies whose type the context names: an HTTP route's request and
        reply, a stored record whose envelope names its type. The same bytes
        as ``encode(value).body``, with the same refusals
        (:class:`InvalidOperation`).
        """
        self._name_of(type(value))
        return dump_json(self.converter, value, max_bytes=self.max_body_bytes)

    def from_json(self, body: bytes, expected: type[T]) -> T:
        """Decode a JSON body the context says is an ``expected``; the inverse of :meth:`to_json`.

        Raises :class:`RemoteProtocolError` if ``body`` does not decode as
        ``expected`` (as :meth:`decode`), :class:`InvalidOperation` if
        ``expected`` is not a decodable attrs class.
        """
        self._name_of(expected)
        return load_json(self.converter, body, expected, max_bytes=self.max_body_bytes)

    def decode_any(
        self, type_name: str, body: bytes, candidates: Mapping[str, type[object]]
    ) -> object:
        """Decode a message whose class is chosen by ``type_name`` from ``candidates``.

        ``candidates`` maps type names to classes, as built by
        :func:`message_table`. Raises :class:`TypeMismatch` if no candidate has
        that name, otherwise as :meth:`decode`.
        """
        _check_wire_name(type_name)
        cl = candidates.get(type_name)
        if cl is None:
            known = ", ".join(sorted(candidates)[:10]) or "none"
            raise TypeMismatch(
                f"no handler for message type {type_name!r} (handled: {known}); the "
                "Spot type does not accept this message"
            )
        return self.decode(type_name, body, cl)


#: Field types whose values nobody can change (besides deeply immutable attrs classes).
_IMMUTABLE_SCALARS: Final = frozenset({int, float, bool, str, bytes, type(None), dt.datetime,
                                       dt.date})


def deeply_immutable(cl: type[object]) -> bool:
    """Whether every instance of the attrs class ``cl`` is deeply immutable.

    True for a frozen attrs class whose field annotations name only the types the
    module docstring lists; False for anything else, and for annotations that cannot
    be resolved (a copy is always safe).
    """
    return _immutable_class(cl, set())


def _immutable_class(cl: type[object], seen: set[type[object]]) -> bool:
    if cl in seen:
        return True  # (a recursive class: decided by its other fields)
    if not attrs.has(cl) or not attrs.inspect(cl).is_frozen:
        return False
    seen.add(cl)
    try:
        hints = typing.get_type_hints(cl)
    except Exception:  # (unresolvable annotations: a copy is always safe)
        return False
    return all(_immutable_type(hints.get(field.name, object), seen)
               for field in attrs.fields(cl))


def _immutable_type(tp: object, seen: set[type[object]]) -> bool:
    if tp in _IMMUTABLE_SCALARS:
        return True
    origin = get_origin(tp)
    if origin is None:
        if isinstance(tp, type):
            return issubclass(tp, enum.Enum) or _immutable_class(tp, seen)
        return False
    if origin is typing.Literal:
        return True
    if origin in (tuple, frozenset, typing.Union, types.UnionType):
        return all(arg is Ellipsis or _immutable_type(arg, seen) for arg in get_args(tp))
    return False


def _check_wire_name(type_name: object) -> None:
    if not isinstance(type_name, str):
        raise RemoteProtocolError(f"message type name must be text, got {type_name!r}")
    try:
        size = len(type_name.encode("utf-8"))
    except UnicodeEncodeError:
        raise RemoteProtocolError("message type name is not valid UTF-8") from None
    if not 1 <= size <= MAX_ID_BYTES:
        raise RemoteProtocolError(
            f"message type name must be 1..{MAX_ID_BYTES} UTF-8 bytes, got {size}"
        )
