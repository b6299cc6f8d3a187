"""Finding the attrs class of a message that arrived from another node by its wire name.

A Spot message is decoded with the handler's own class (``HandlerTable.find_wire``),
so it needs nothing here.  Three values arrive without a handler to name their class:
a handler's reply (the requester knows it: ``reply=``), a creation request read back
from the store by a remote target, and the optional reply of ``on_create``.  For those,
:func:`message_class` looks, in order, at

1. the classes the node's registered Spot types name -- handler messages and replies,
   the ``request`` annotation of a User Spot's ``__init__`` and ``on_create``'s return
   annotation -- and
2. a ``"<module>:<qualname>"`` name of an attrs class in a module **already imported**
   in this process (nothing is imported on a peer's say-so, and only attrs classes are
   accepted, so a name can never make this node run arbitrary code).

A class pinned with ``__zlink_type__`` is found by the first rule only, so pin names
only on classes a Spot type names.  Nothing found is :class:`TypeMismatch`.
"""

from __future__ import annotations

import sys
import typing
from typing import TYPE_CHECKING

import attrs

from zlink_trio.core.errors import TypeMismatch
from zlink_trio.wire.codec import type_name_of

if TYPE_CHECKING:
    from zlink_trio.runtime.declaration.registry import SpotTypeRegistry

__all__ = ("message_class", "registry_classes")


def _attrs_classes(annotation: object) -> list[type[object]]:
    found: list[type[object]] = []
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and attrs.has(candidate):
            found.append(candidate)
    return found


def _hint(fn: object, name: str) -> object:
    try:
        return typing.get_type_hints(fn).get(name)
    except Exception:  # unresolvable annotations name nothing we can use
        return None


def registry_classes(registry: SpotTypeRegistry) -> dict[str, type[object]]:
    """Wire name -> class for every attrs class the registered Spot types name."""
    table: dict[str, type[object]] = {}
    for spot_type in registry:
        classes: list[type[object]] = []
        for info in spot_type.handlers.by_type.values():
            classes.append(info.message_type)
            if info.reply_type is not None:
                classes.append(info.reply_type)
        cls = spot_type.cls
        classes += _attrs_classes(_hint(cls.__init__, "request"))
        on_create = getattr(cls, "on_create", None)
        if on_create is not None:
            classes += _attrs_classes(_hint(on_create, "return"))
        for cl in classes:
            table.setdefault(type_name_of(cl), cl)
    return table


def message_class(table: dict[str, type[object]], type_name: str) -> type[object]:
    """The class of ``type_name`` (see the module docstring); TypeMismatch if none."""
    found = table.get(type_name)
    if found is not None:
        return found
    module_name, _, qualname = type_name.partition(":")
    target: object = sys.modules.get(module_name) if qualname else None
    for part in qualname.split(".") if target is not None else ():
        target = getattr(target, part, None)
    if isinstance(target, type) and attrs.has(target) and type_name_of(target) == type_name:
        return target
    raise TypeMismatch(
        f"message type {type_name!r} is not known on this node: no registered Spot type "
        "names it and no imported module defines it. Import the module that defines it "
        "(or register the Spot type) on this node"
    )
