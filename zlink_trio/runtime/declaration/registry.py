"""The registry of Spot types one node serves.

Theory of operation
-------------------
``open_node(spots=[...])`` names the Spot classes a node serves.
:meth:`SpotTypeRegistry.build` turns that list into one immutable mapping
from stable type to :class:`~zlink_trio.runtime.declaration.spot_types.SpotType`,
once, at startup. A stable type registered twice — two classes declaring the
same name, or one class listed twice — is a startup error, never
"last one wins". Lookups by kind separate "this node does not serve that
type" (:class:`NotFound`) from "it serves it as another kind"
(:class:`TypeMismatch`), the same split placement makes.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

import attrs

from zlink_trio.core.errors import InvalidConfiguration, NotFound, TypeMismatch
from zlink_trio.runtime.declaration.spot_types import (
    InstanceSpotType,
    SpotType,
    UserSpotType,
    spot_type_of,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

    from zlink_trio.core.identity import SpotKind

__all__ = ("SpotTypeRegistry",)


def _frozen_types(value: Mapping[str, SpotType]) -> Mapping[str, SpotType]:
    return types.MappingProxyType(dict(value))


@attrs.frozen
class SpotTypeRegistry:
    """The immutable set of Spot types one node serves, by stable type.

    Build it with :meth:`build`. Iterating yields the types sorted by stable type.
    """

    by_stable_type: Mapping[str, SpotType] = attrs.field(converter=_frozen_types)

    @classmethod
    def build(cls, spots: Iterable[object]) -> SpotTypeRegistry:
        """Register decorated Spot classes (or :class:`SpotType` values).

        Raises :class:`InvalidConfiguration` for an undecorated class or when a
        stable type is registered twice — also the same class listed twice —
        which is a startup error.
        """
        found: dict[str, SpotType] = {}
        for spot in spots:
            definition = spot_type_of(spot)
            other = found.get(definition.stable_type)
            if other is not None:
                raise InvalidConfiguration(
                    f"stable type {definition.stable_type!r} is registered twice (by "
                    f"{other.cls.__qualname__} and {definition.cls.__qualname__}); each stable "
                    "type may be registered once per node, so list each Spot class once and "
                    "give different classes different stable types"
                )
            found[definition.stable_type] = definition
        return cls(found)

    def __len__(self) -> int:
        return len(self.by_stable_type)

    def __contains__(self, stable_type: object) -> bool:
        return stable_type in self.by_stable_type

    def __iter__(self) -> Iterator[SpotType]:
        return iter([self.by_stable_type[name] for name in sorted(self.by_stable_type)])

    def get(self, stable_type: str) -> SpotType | None:
        """Return the type registered as ``stable_type``, or ``None``. Never raises."""
        return self.by_stable_type.get(stable_type)

    def lookup(self, stable_type: str, kind: SpotKind) -> SpotType:
        """Return the type ``stable_type``, which must be of ``kind``.

        Raises :class:`NotFound` when this node does not serve the stable
        type, and :class:`TypeMismatch` when it serves it as another kind.
        """
        definition = self.by_stable_type.get(stable_type)
        if definition is None:
            raise NotFound(
                f"this node serves no Spot type {stable_type!r} (it serves "
                f"{', '.join(map(repr, sorted(self.by_stable_type))) or 'none'}); register "
                "the class in open_node(spots=[...]) or address a node that serves it"
            )
        if definition.kind is not kind:
            raise TypeMismatch(
                f"Spot type {stable_type!r} has kind {definition.kind.name.title()}, but "
                f"this operation needs kind {kind.name.title()}; use the operation for its "
                "kind (User Spots are created through the SpotManager, Instance Spots by a "
                "call with Instance intent, Actors through node.actors)"
            )
        return definition

    def instance_types(self) -> tuple[InstanceSpotType, ...]:
        """The registered Instance Spot types, sorted by stable type."""
        return tuple(t for t in self if isinstance(t, InstanceSpotType))

    def user_types(self) -> tuple[UserSpotType, ...]:
        """The registered User Spot types, sorted by stable type."""
        return tuple(t for t in self if isinstance(t, UserSpotType))
