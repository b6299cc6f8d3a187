"""JSON key naming of attrs classes: the ``__zlink_json_names__`` opt-in.

Theory of operation
-------------------
By default a field's JSON key is its Python attribute name. A class whose
contract is spelled in another convention (the ShoppingMall contracts are
camelCase: ``orderId``, ``updatedAtUnixMs``) says so once, in the class::

    @attrs.frozen
    class OrderState:
        __zlink_json_names__: ClassVar[str] = "camelCase"
        order_id: str            # JSON key "orderId"
        updated_at_unix_ms: int  # JSON key "updatedAtUnixMs"

The converter reads the declaration when it first generates the class's
hooks (once per class and converter, never per message), and nothing is
registered per class. It is looked up like any class attribute, so a subclass
inherits it: a subclass inherits its parent's fields, and a field must not
change spelling because it was inherited. A subclass may set ``"attribute"``
to go back. (``__zlink_type__`` is the opposite: it names one class, so it is
never inherited.)

Styles (:data:`JSON_NAME_STYLES`):

- ``"attribute"`` (the default): the key is the attribute name as written.
- ``"camelCase"``: leading underscores are kept; the rest is split at
  underscores, empty pieces are dropped, and every piece after the first gets
  its first character upper-cased, the others kept as written:
  ``order_id`` -> ``orderId``, ``http_URL`` -> ``httpURL``, ``line_2`` ->
  ``line2``, ``from_`` -> ``from`` (a trailing underscore lets a key be a
  Python keyword).

Strictness. Two fields whose keys coincide (``order_id`` beside ``orderId``,
``line_2`` beside ``line2``) make the class unusable on the wire: building
its hooks raises :class:`InvalidOperation`, so the first encode fails before
any byte leaves; an unknown style is refused the same way. On decode, the
*Python* spelling of a renamed field (``order_id`` where the class spells
``orderId``) is refused with :class:`PythonSpelledKeyError`, which names the
right key: the sender missed the contract, and ignoring the key like any
unknown one (the forward-compatibility rule) would report a missing field or,
for a field with a default, silently take the default. Other unknown keys are
still ignored; duplicates, wrong types and missing fields are refused as for
every class.

Error paths name the JSON keys (``$.lines[0].skuCode``), as the sender spelled them.

Only attrs classes are renamed (messages must be attrs classes). Unions of
attrs classes are not a supported field type, so cattrs' union disambiguation,
which reads attribute names, never sees a renamed class.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final, cast, get_origin

import attrs
from cattrs.errors import AttributeValidationNote, ClassValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from zlink_trio.core.errors import InvalidOperation

if TYPE_CHECKING:
    import cattrs

__all__ = (
    "JSON_NAMES_ATTRIBUTE",
    "JSON_NAME_STYLES",
    "PythonSpelledKeyError",
    "camel_case",
    "configure_json_names",
    "json_keys",
)

#: The class attribute that chooses how a class's fields are spelled in JSON.
JSON_NAMES_ATTRIBUTE: Final = "__zlink_json_names__"

#: The styles ``__zlink_json_names__`` may name; ``"attribute"`` is the default.
JSON_NAME_STYLES: Final = ("attribute", "camelCase")

_Hook = Callable[[object, object], object]
_UnstructureHook = Callable[[object], object]


class PythonSpelledKeyError(ForbiddenExtraKeysError):
    """Raised (inside a structure hook) when a JSON object spells a renamed field the Python way.

    A :class:`cattrs.errors.ForbiddenExtraKeysError`, so cattrs' error tools
    treat it as an extra key; :func:`zlink_trio.wire._converter.load_json`
    reports :attr:`message`, which names the key the class expects.
    """


def camel_case(name: str) -> str:
    """Return the camelCase JSON key of the attribute ``name`` (rules in the module docstring)."""
    stripped = name.lstrip("_")
    lead = name[: len(name) - len(stripped)]
    pieces = [piece for piece in stripped.split("_") if piece]
    if not pieces:
        return name
    head, *rest = pieces
    return lead + head + "".join(piece[0].upper() + piece[1:] for piece in rest)


def _style_of(cl: type[object]) -> str:
    style: object = getattr(cl, JSON_NAMES_ATTRIBUTE, "attribute")
    if not isinstance(style, str) or style not in JSON_NAME_STYLES:
        raise InvalidOperation(
            f"{cl.__qualname__}.{JSON_NAMES_ATTRIBUTE} is {style!r}; it must be one of "
            f"{', '.join(map(repr, JSON_NAME_STYLES))}"
        )
    return style


def json_keys(cl: type[object]) -> dict[str, str]:
    """Map each init field of the attrs class ``cl`` to its JSON key, in field order.

    Raises :class:`InvalidOperation` if ``cl`` declares an unknown style or two
    of its fields would share one key. (Fields with ``init=False`` are never
    on the wire, so they are neither named nor checked.)
    """
    style = _style_of(cl)
    keys: dict[str, str] = {}
    owners: dict[str, str] = {}
    for field in attrs.fields(cast("type[attrs.AttrsInstance]", cl)):
        if not field.init:
            continue
        key = camel_case(field.name) if style == "camelCase" else field.name
        owner = owners.setdefault(key, field.name)
        if owner != field.name:
            raise InvalidOperation(
                f"fields {owner!r} and {field.name!r} of {cl.__qualname__} both have the "
                f"JSON key {key!r} under {JSON_NAMES_ATTRIBUTE} = {style!r}; rename one of them"
            )
        keys[field.name] = key
    return keys


def _declares_names(t: object) -> bool:
    cl = get_origin(t) or t
    return isinstance(cl, type) and attrs.has(cl) and hasattr(cl, JSON_NAMES_ATTRIBUTE)


def _renamed(t: object) -> dict[str, str]:
    """The fields of ``t`` (an attrs class or a generic alias of one) whose key is not its name."""
    cl = cast("type[attrs.AttrsInstance]", get_origin(t) or t)
    attrs.resolve_types(cl)  # PEP 563 string annotations, as cattrs' own attrs hooks do
    return {name: key for name, key in json_keys(cl).items() if name != key}


def _overrides(renamed: dict[str, str]) -> dict[str, object]:
    # Passed as ``**kwargs`` beside cattrs' own ``_cattrs_*`` options; mypy cannot tell
    # that no field name starts with ``_cattrs_``, hence the ignores at the calls.
    return {name: override(rename=key) for name, key in renamed.items()}


def _structure_factory(t: object, conv: cattrs.Converter) -> _Hook:
    renamed = _renamed(t)
    if not renamed:
        return cast("_Hook", conv.gen_structure_attrs_fromdict(cast("type", t)))
    # Every other setting (extra keys, detailed validation) comes from the converter.
    inner = cast(
        "_Hook",
        make_dict_structure_fn(cast("type", t), conv, **_overrides(renamed)),  # type: ignore[arg-type]
    )
    qualname = cast("type", get_origin(t) or t).__qualname__

    def structure_renamed(value: object, cl: object) -> object:
        if type(value) is dict:
            for name, key in renamed.items():
                if name in value:
                    raise PythonSpelledKeyError(
                        f"key {name!r} is the Python spelling; {qualname} spells it {key!r}",
                        cast("type", cl),
                        {name},
                    )
        try:
            return inner(value, cl)
        except ClassValidationError as exc:
            _name_paths_by_key(exc, renamed)
            raise

    return structure_renamed


def _name_paths_by_key(exc: ClassValidationError, renamed: dict[str, str]) -> None:
    # cattrs notes the attribute name; an error path for the peer must read ``$.orderId``,
    # the key it sent, not ``$.order_id``. Each field error carries this class's note only
    # (a nested class notes its own fields' errors), so renaming it here is exact.
    for sub in exc.exceptions:
        notes = getattr(sub, "__notes__", [])
        for i, note in enumerate(notes):
            if type(note) is AttributeValidationNote and note.name in renamed:
                notes[i] = AttributeValidationNote(str(note), renamed[note.name], note.type)


def _unstructure_factory(t: object, conv: cattrs.Converter) -> _UnstructureHook:
    renamed = _renamed(t)
    if not renamed:
        return cast("_UnstructureHook", conv.gen_unstructure_attrs_fromdict(cast("type", t)))
    return cast(
        "_UnstructureHook",
        make_dict_unstructure_fn(
            cast("type", t),
            conv,
            _cattrs_omit_if_default=conv.omit_if_default,
            **_overrides(renamed),  # type: ignore[arg-type]
        ),
    )


def configure_json_names(conv: cattrs.Converter) -> None:
    """Make ``conv`` spell the fields of classes that declare ``__zlink_json_names__``.

    Registers one structure and one unstructure hook factory; classes without
    the declaration keep cattrs' own attrs hooks, byte for byte.
    """
    conv.register_structure_hook_factory(_declares_names, _structure_factory)
    conv.register_unstructure_hook_factory(_declares_names, _unstructure_factory)
