"""One node as placement sees it: :class:`PlacementCandidate`, its roles and served types.

A candidate is a snapshot of a node descriptor and the node's load, validated on
construction (``core.placement`` decides over a list of them). The converters
:func:`roles_from` and :func:`served_types_from` are shared with the node descriptor.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

import attrs

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import (
    NodeRid,
    SpotKind,
    validate_mesh_name,
    validate_stable_type,
)

__all__ = (
    "PLACEABLE_KINDS",
    "SERVABLE_KINDS",
    "PlacementCandidate",
    "Role",
    "check_non_negative",
    "roles_from",
    "served_types_from",
)

#: The kinds placement puts on a node (Entry Spots are issued, never placed).
PLACEABLE_KINDS: Final = frozenset({SpotKind.USER, SpotKind.INSTANCE})
#: The kinds a node's descriptor can serve: the placeable Spots, and Actor types (an
#: Actor is created where its container is, and moves only to a node serving its type).
SERVABLE_KINDS: Final = PLACEABLE_KINDS | {SpotKind.ACTOR}


class Role(StrEnum):
    """The object roles a node can have in a Mesh."""

    #: Sends calls to Spots (can start Create and cold activation).
    OBJECT_CLIENT = "object_client"
    #: Hosts Spots (can be chosen by placement).
    OBJECT_SERVER = "object_server"


def _mesh_name(value: object) -> str:
    return validate_mesh_name(value)


def roles_from(value: Iterable[str] | str) -> frozenset[Role]:
    """Convert role names (or one name) to a frozenset of :class:`Role`.

    Raises :class:`InvalidOperation` naming the valid roles otherwise. Used by
    :class:`PlacementCandidate` and the node descriptor alike.
    """
    if isinstance(value, str):
        value = (value,)
    try:
        return frozenset(Role(role) for role in value)
    except (TypeError, ValueError):
        raise InvalidOperation(
            f"roles must be an iterable of Role values {[r.value for r in Role]}, got {value!r}"
        ) from None


def served_types_from(value: Mapping[str, SpotKind]) -> Mapping[str, SpotKind]:
    """Validate stable type -> kind and return a read-only copy sorted by type.

    Only USER, INSTANCE and ACTOR kinds can be served (Entry Spots are issued by the
    framework, never placed). Raises :class:`InvalidOperation` otherwise.
    """
    if not isinstance(value, Mapping):
        raise InvalidOperation(
            f"served_types must map stable type -> SpotKind, got {type(value).__name__}"
        )
    types: dict[str, SpotKind] = {}
    for stable_type in sorted(value):
        kind = value[stable_type]
        try:
            validate_stable_type(stable_type)
        except InvalidOperation as error:
            raise InvalidOperation(f"served_types: {error.message}") from None
        if kind not in SERVABLE_KINDS:
            raise InvalidOperation(
                f"served_types maps {stable_type!r} to {kind!r}; a node serves only USER, "
                "INSTANCE or ACTOR types (Entry Spots are never placed)"
            )
        types[stable_type] = SpotKind(kind)
    return MappingProxyType(types)


def check_non_negative(name: str, value: object) -> None:
    """Raise :class:`InvalidOperation` unless ``value`` is an int >= 0 (``name`` says which)."""
    if type(value) is not int or value < 0:
        raise InvalidOperation(f"{name} must be a non-negative int, got {value!r}")


def _count(instance: PlacementCandidate, attribute: attrs.Attribute[int], value: int) -> None:
    check_non_negative(attribute.name, value)


def _ceiling(
    instance: PlacementCandidate, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None:
        check_non_negative(attribute.name, value)


def _weight(instance: PlacementCandidate, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        math.isfinite(value) and value >= 0
    ):
        raise InvalidOperation(f"weight must be a finite float >= 0, got {value!r}")


def _bool(instance: PlacementCandidate, attribute: attrs.Attribute[bool], value: bool) -> None:
    if not isinstance(value, bool):
        raise InvalidOperation(f"{attribute.name} must be a bool, got {value!r}")


def _check_rid(instance: PlacementCandidate, attribute: attrs.Attribute[NodeRid], value: NodeRid
               ) -> None:
    if not isinstance(value, NodeRid):
        raise InvalidOperation(f"node_rid must be a NodeRid, got {type(value).__name__}")


def _check_node_id(instance: PlacementCandidate, attribute: attrs.Attribute[str | None],
                   value: str | None) -> None:
    if value is not None and not isinstance(value, str):
        raise InvalidOperation(f"node_id must be a str or None, got {type(value).__name__}")


@attrs.frozen(kw_only=True)
class PlacementCandidate:
    """One node as placement sees it: a snapshot of its descriptor and load.

    Raises :class:`InvalidOperation` for malformed fields (bad MeshName or
    stable type, a served kind other than USER/INSTANCE/ACTOR, negative counts, a
    negative or non-finite weight).
    """

    mesh: str = attrs.field(converter=_mesh_name)
    node_rid: NodeRid = attrs.field(validator=_check_rid)
    roles: frozenset[Role] = attrs.field(converter=roles_from)
    #: stable type -> USER or INSTANCE; copied into a read-only mapping.
    served_types: Mapping[str, SpotKind] = attrs.field(converter=served_types_from, hash=False)
    #: Spots active on the node.
    active: int = attrs.field(validator=_count)
    #: Creations in flight on the node (reserved, not yet Ready).
    pending: int = attrs.field(validator=_count)
    #: Most Spots (active + pending) placement may put on the node.
    capacity: int = attrs.field(validator=_count)
    #: The node's active-object ceiling; ``None`` when it configures none.
    active_object_ceiling: int | None = attrs.field(default=None, validator=_ceiling)
    #: Node-wide placement weight; 0 means "place no new Spots here".
    weight: float = attrs.field(default=1.0, validator=_weight)
    #: ``False`` while the node is draining or not yet open for new Spots.
    serving: bool = attrs.field(default=True, validator=_bool)
    #: The node's NodeId (from its descriptor), for messages; ``None`` when unknown.
    node_id: str | None = attrs.field(default=None, validator=_check_node_id)

    @property
    def has_room(self) -> bool:
        """Whether one more Spot fits under capacity and the ceiling."""
        load = self.active + self.pending
        ceiling = self.active_object_ceiling
        return load < self.capacity and (ceiling is None or load < ceiling)
