"""Fences: the owner and generation values a caller read of an authority record.

Theory of operation
-------------------
A *fence* is the set of counters a caller read (the ObjectGeneration, the
AuthorityOwnerGeneration, the StoreVersion and the owner, see
:mod:`zlink_trio.core.records`); a store transaction that receives a fence
re-reads the record and refuses (``StaleFence``) when they differ, so a caller
acting on an old view never writes. :class:`OwnerFence` names one process
lifecycle of a NodeId, ``(node_rid, lifecycle_generation)``, the lifecycle
generation coming from the node's descriptor claim. :class:`ReservationFence`
is the fence Reserve issues for one creation attempt;
:class:`AuthorityFence` is the owner/generation fence of close, release and
relocation steps (docs/concepts.md, "Fences", tells why).

These values sit below :mod:`zlink_trio.core.records`, which re-exports them
(and builds a Reserve's fence without the validators, ``reservation_fence``):
the record imports them, never the other way round. All are frozen attrs
classes whose validators raise :class:`InvalidOperation`; nothing here does
I/O or reads a clock.
"""

from __future__ import annotations

from typing import Final

import attrs

from zlink_trio.core._checks import (
    check_finite,
    check_int,
    generation_field,
    node_rid_field,
    spot_id_field,
)
from zlink_trio.core._json_fields import json_generation, json_object, json_str
from zlink_trio.core.identity import NodeRid

__all__ = (
    "AuthorityFence",
    "OwnerFence",
    "ReservationFence",
)

_OWNER_KEYS: Final = frozenset({"nodeRid", "lifecycleGeneration"})


def _finite(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    check_finite(value, attribute.name)


@attrs.frozen
class OwnerFence:
    """Which process lifecycle owns something: ``(node_rid, lifecycle_generation)``."""

    node_rid: NodeRid = attrs.field(validator=node_rid_field)
    lifecycle_generation: int = attrs.field(validator=generation_field)

    def to_json(self) -> dict[str, str]:
        """Encode as ``{"nodeRid": hex, "lifecycleGeneration": decimal}``."""
        return {"nodeRid": str(self.node_rid),
                "lifecycleGeneration": str(self.lifecycle_generation)}

    @classmethod
    def from_json(cls, value: object) -> OwnerFence:
        """Decode :meth:`to_json`'s object; :class:`InvalidOperation` when malformed."""
        obj = json_object(value, _OWNER_KEYS, "OwnerFence")
        return cls(NodeRid.parse(json_str(obj["nodeRid"], "nodeRid")),
                   json_generation(obj["lifecycleGeneration"], "lifecycleGeneration"))


@attrs.frozen(kw_only=True)
class AuthorityFence:
    """The owner/generation fence of close, release and relocation steps."""

    spot_id: str = attrs.field(validator=spot_id_field)
    object_generation: int = attrs.field(validator=generation_field)
    owner_generation: int = attrs.field(validator=generation_field)
    owner: OwnerFence = attrs.field(validator=attrs.validators.instance_of(OwnerFence))


@attrs.frozen(kw_only=True)
class ReservationFence:
    """The provider-issued fence of one creation attempt.

    CommitReady and AbortCreating succeed only while the record still has
    exactly this StoreVersion, ObjectGeneration, owner generation and owner.
    ``owner_lease_expires_at`` is what the owner lease was at Reserve; it is
    informational (the lease is re-checked live at commit, never compared).
    """

    spot_id: str = attrs.field(validator=spot_id_field)
    store_version: int = attrs.field(validator=generation_field)
    object_generation: int = attrs.field(validator=generation_field)
    owner_generation: int = attrs.field(validator=generation_field)
    owner: OwnerFence = attrs.field(validator=attrs.validators.instance_of(OwnerFence))
    owner_lease_expires_at: float = attrs.field(validator=_finite)
    #: Capacity units the attempt holds as pending (one Spot = one unit).
    pending_capacity: int = attrs.field(default=1)

    @pending_capacity.validator
    def _pending(self, attribute: attrs.Attribute[int], value: int) -> None:
        check_int(value, "pending_capacity", 1, 1)
