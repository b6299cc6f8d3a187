"""SpotRef and ActorRef: the public, immutable snapshots of where a Spot or Actor was.

Theory of operation
-------------------
:class:`SpotRef` is what a lookup returns: the Spot ID, the ObjectGeneration
of the incarnation, its Mesh and its owner's NodeRid at lookup time. It is
not a messaging target and not an owner capability. Its JSON form writes the
generation as a decimal string, because 63-bit integers do not survive
JavaScript number parsing.

It sits below :mod:`zlink_trio.core.records`, which re-exports it (an
authority record builds its SpotRef with ``AuthorityRecord.ref``); the public
name is ``zlink_trio.SpotRef``. :class:`ActorRef` is the same snapshot of an
Actor (docs/actors.md): its ActorId and ObjectGeneration name one incarnation, which
is what a control (join, leave, close) is checked against. Frozen attrs classes whose
validators raise :class:`InvalidOperation`; nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import attrs

from zlink_trio.core._checks import (
    generation_field,
    mesh_field,
    node_rid_field,
    parse_decimal,
    spot_id_field,
    validate_mesh_name,
)
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import NodeRid, validate_spot_id

__all__ = ("ActorRef", "SpotRef")


@attrs.frozen(kw_only=True)
class SpotRef:
    """An immutable snapshot of where a Spot was at lookup time.

    Not a messaging target and not an owner capability: if the owner moved,
    ``mesh`` and ``node_rid`` may be out of date; re-query by Spot ID.
    """

    spot_id: str = attrs.field(validator=spot_id_field)
    generation: int = attrs.field(validator=generation_field)
    mesh: str = attrs.field(validator=mesh_field)
    node_rid: NodeRid = attrs.field(validator=node_rid_field)

    def to_json(self) -> dict[str, str]:
        """Encode as a JSON object; the generation is a decimal string."""
        return {
            "spotId": self.spot_id,
            "generation": str(self.generation),
            "mesh": self.mesh,
            "nodeRid": str(self.node_rid),
        }

    @classmethod
    def from_json(cls, value: object) -> SpotRef:
        """Decode :meth:`to_json`'s object (already parsed from JSON).

        Raises :class:`InvalidOperation` when ``value`` is not an object with
        exactly the keys ``spotId``, ``generation``, ``mesh``, ``nodeRid``, or
        any field is invalid (generation not a decimal string in 1..2**63-1,
        NodeRid not 32 hex digits, ...).
        """
        keys = {"spotId", "generation", "mesh", "nodeRid"}
        if not isinstance(value, dict) or set(value) != keys:
            raise InvalidOperation(
                f"a SpotRef is a JSON object with exactly the keys {sorted(keys)}, got {value!r}"
            )
        return cls(
            spot_id=validate_spot_id(value["spotId"]),
            generation=parse_decimal(value["generation"], "SpotRef generation"),
            mesh=validate_mesh_name(value["mesh"]),
            node_rid=NodeRid.parse(value["nodeRid"]),
        )


@attrs.frozen(kw_only=True)
class ActorRef:
    """An immutable snapshot of one Actor incarnation and where it was (docs/actors.md).

    ``generation`` names the incarnation: a control (join, leave, close) whose ref names
    another generation than the current one is :class:`InvalidOperation`. Calls
    (``client.request_actor``) go by ActorId and never compare generations.
    ``container`` is the Spot ID of the Entry or User Spot it belonged to, and
    ``node_rid`` its owner, at the time the ref was made.
    """

    actor_id: str = attrs.field(validator=spot_id_field)
    generation: int = attrs.field(validator=generation_field)
    mesh: str = attrs.field(validator=mesh_field)
    node_rid: NodeRid = attrs.field(validator=node_rid_field)
    container: str = attrs.field(validator=spot_id_field)
