"""Node descriptors: what a MeshNode publishes, and the store's claim on it.

Theory of operation
-------------------
A node publishes one :class:`NodeDescriptor` per Mesh it joins: who it is
(MeshName, NodeRid, NodeId), where it listens, which roles it has, which
stable types it serves as which kind, how many Spots it may host, its
placement weight, and the Entry Spot ID the framework issued for this
lifecycle. **Every field of a descriptor is immutable for the
lifecycle**: to change one, the process ends its claim and makes a new one
(with a fresh NodeRid). :attr:`NodeDescriptor.digest` is a SHA-256 over a
canonical encoding of all of them, EntrySpotId included, so peers can check
two descriptors are the same byte for byte.

The mutable part is issued and kept by the Location Store, not the node: a
:class:`NodeClaim` wraps the descriptor with the lifecycle generation the
store issued at NewClaim (strictly increasing per NodeId), the lease expiry
(extended only by Renew), the claim's StoreVersion and whether the lifecycle
still *accepts placements*. A claim is *live* while ``now <
lease_expires_at``; an expired claim is not active, so a new claim may
replace it, and nothing may be done on its behalf.

Placement weight stays immutable: the descriptor (and its digest) never
changes, and Renew may not change it. Draining a node is the one mutable
mark on the claim -- ``ClosePlacement`` sets ``accepts_placements`` to
``False``, so other nodes stop placing new Spots there, until
``OpenPlacement`` (an undrain) clears it or the claim is removed -- or a new
lifecycle with weight 0. In JSON the mark is the
optional key ``acceptsPlacements`` (written only when ``False``), so a claim
stored by an earlier version, which has no such key, accepts placements.

Messages and operator output name a node by its NodeId, never by its NodeRid: an
authority record names its owner only by ``(node_rid, lifecycle_generation)``, so the
NodeId is read from that lifecycle's claim (live, or dead but not yet removed), and
:func:`describe_owner` is the one wording of both cases, with and without it.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Final

import attrs

from zlink_trio.core._checks import (
    check_finite,
    check_generation,
    check_int,
    check_text,
    validate_mesh_name,
)
from zlink_trio.core._json_fields import (
    decode_kind,
    encode_kind,
    json_generation,
    json_int,
    json_number,
    json_object,
    json_str,
)
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import (
    NodeRid,
    SpotKind,
    is_entry_spot_id,
    validate_node_id,
)
from zlink_trio.core.placement import Role, roles_from, served_types_from
from zlink_trio.core.records import OwnerFence

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = (
    "DESCRIPTOR_DIGEST_TAG",
    "MAX_CAPACITY",
    "MAX_ENDPOINT_BYTES",
    "NodeClaim",
    "NodeDescriptor",
    "describe_owner",
)

#: Prefix hashed before the canonical JSON, so a future layout hashes differently.
DESCRIPTOR_DIGEST_TAG: Final = b"zlink-descriptor-v1\n"
#: Bound of an endpoint address in UTF-8 bytes.
MAX_ENDPOINT_BYTES: Final = 2048
#: Largest capacity a descriptor may declare.
MAX_CAPACITY: Final = 2**31 - 1

_DESCRIPTOR_KEYS: Final = frozenset({
    "mesh", "nodeRid", "nodeId", "endpoint", "roles", "servedTypes", "capacity",
    "placementWeight", "entrySpotId", "digest"})
_CLAIM_KEYS: Final = frozenset({"descriptor", "lifecycleGeneration", "leaseExpiresAt",
                                "storeVersion"})
#: The optional key of a claim's JSON: present (``false``) only on a drained claim.
_CLOSED_KEY: Final = "acceptsPlacements"



def _mesh(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    validate_mesh_name(value)


def _node_id(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    validate_node_id(value)


def _endpoint(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    check_text(value, "endpoint", MAX_ENDPOINT_BYTES)


def _capacity(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    check_int(value, "capacity", 0, MAX_CAPACITY)


def _finite(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    check_finite(value, attribute.name)


def _generation(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    check_generation(value, attribute.name)


def _flag(instance: object, attribute: attrs.Attribute[bool], value: bool) -> None:
    if not isinstance(value, bool):
        raise InvalidOperation(f"{attribute.name} must be a bool, got {value!r}")


@attrs.frozen(kw_only=True)
class NodeDescriptor:
    """The immutable registration a MeshNode publishes for one lifecycle.

    Raises :class:`InvalidOperation` for a malformed field: bad MeshName,
    NodeId, endpoint or stable type; an ``entry_spot_id`` not of the reserved
    ``<prefix>-entry-<uuid4>`` form; served types without the object-server
    role; a negative or non-finite weight; capacity outside 0..2**31-1.
    """

    mesh: str = attrs.field(validator=_mesh)
    node_rid: NodeRid = attrs.field(validator=attrs.validators.instance_of(NodeRid))
    node_id: str = attrs.field(validator=_node_id)
    endpoint: str = attrs.field(
        validator=_endpoint
    )
    roles: frozenset[Role] = attrs.field(converter=roles_from)
    #: stable type -> USER or INSTANCE, as a read-only mapping sorted by type.
    served_types: Mapping[str, SpotKind] = attrs.field(converter=served_types_from, hash=False)
    #: Most Spots (Creating + active) this lifecycle may own; 0 hosts nothing.
    capacity: int = attrs.field(validator=_capacity)
    #: Node-wide placement weight; 0 means "place no new Spots here".
    placement_weight: float = attrs.field(
        default=1.0, validator=_finite
    )
    entry_spot_id: str = attrs.field()
    #: SHA-256 hex of the canonical encoding of every field above.
    digest: str = attrs.field(init=False)

    @entry_spot_id.validator
    def _entry(self, attribute: attrs.Attribute[str], value: str) -> None:
        if not isinstance(value, str) or not is_entry_spot_id(value):
            raise InvalidOperation(
                f"entry_spot_id must have the reserved '<prefix>-entry-<uuid4>' form, got "
                f"{value!r}; issue one with identity.new_entry_spot_id"
            )

    @digest.default
    def _digest(self) -> str:
        return hashlib.sha256(DESCRIPTOR_DIGEST_TAG + self.canonical_bytes()).hexdigest()

    def __attrs_post_init__(self) -> None:
        if self.placement_weight < 0:
            raise InvalidOperation(f"placement_weight must be >= 0, got {self.placement_weight}")
        if self.served_types and Role.OBJECT_SERVER not in self.roles:
            raise InvalidOperation(
                "a node that serves stable types needs the object_server role; add it or "
                "serve no types"
            )

    def canonical_bytes(self) -> bytes:
        """The canonical encoding the digest covers: compact, key-sorted UTF-8 JSON."""
        body = {
            "capacity": self.capacity,
            "endpoint": self.endpoint,
            "entrySpotId": self.entry_spot_id,
            "mesh": self.mesh,
            "nodeId": self.node_id,
            "nodeRid": str(self.node_rid),
            "placementWeight": float(self.placement_weight).hex(),
            "roles": sorted(role.value for role in self.roles),
            "servedTypes": [[t, int(k)] for t, k in sorted(self.served_types.items())],
        }
        text = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return text.encode("utf-8")

    def to_json(self) -> dict[str, object]:
        """A JSON-ready object of every field, the digest included."""
        return {
            "mesh": self.mesh, "nodeRid": str(self.node_rid), "nodeId": self.node_id,
            "endpoint": self.endpoint, "roles": sorted(role.value for role in self.roles),
            "servedTypes": {t: encode_kind(k) for t, k in self.served_types.items()},
            "capacity": self.capacity, "placementWeight": self.placement_weight,
            "entrySpotId": self.entry_spot_id, "digest": self.digest,
        }

    @classmethod
    def from_json(cls, value: object) -> NodeDescriptor:
        """Decode :meth:`to_json`'s object (already parsed from JSON).

        Raises :class:`InvalidOperation` when a key is missing or extra, a
        field is invalid, or the recomputed digest differs from ``digest``
        (the object was altered).
        """
        obj = json_object(value, _DESCRIPTOR_KEYS, "NodeDescriptor")
        served = obj["servedTypes"]
        if not isinstance(served, dict):
            raise InvalidOperation(f"servedTypes must be a JSON object, got {served!r}")
        roles = obj["roles"]
        if not isinstance(roles, list):
            raise InvalidOperation(f"roles must be a JSON array, got {roles!r}")
        descriptor = cls(
            mesh=json_str(obj["mesh"], "mesh"),
            node_rid=NodeRid.parse(json_str(obj["nodeRid"], "nodeRid")),
            node_id=json_str(obj["nodeId"], "nodeId"),
            endpoint=json_str(obj["endpoint"], "endpoint"), roles=roles,
            served_types={t: decode_kind(k, "served kind") for t, k in served.items()},
            capacity=json_int(obj["capacity"], "capacity", 0, MAX_CAPACITY),
            placement_weight=json_number(obj["placementWeight"], "placementWeight"),
            entry_spot_id=json_str(obj["entrySpotId"], "entrySpotId"),
        )
        if obj["digest"] != descriptor.digest:
            raise InvalidOperation("the descriptor's digest does not match its fields")
        return descriptor

    def serves(self, stable_type: str, kind: SpotKind) -> bool:
        """Whether this node hosts ``stable_type`` as ``kind`` (role included)."""
        return (Role.OBJECT_SERVER in self.roles
                and self.served_types.get(stable_type) is kind)


@attrs.frozen(kw_only=True)
class NodeClaim:
    """A descriptor as the Location Store holds it: immutable part plus store-issued state.

    ``lifecycle_generation`` is issued by NewClaim and never changes;
    ``lease_expires_at`` changes only through Renew, ``store_version`` through
    Renew, ClosePlacement and OpenPlacement. ``accepts_placements`` is ``True``
    from NewClaim until ClosePlacement marks the lifecycle as draining; then it
    stays ``False`` (Renew keeps it) until OpenPlacement clears the mark or the
    claim is removed.
    """

    descriptor: NodeDescriptor = attrs.field(
        validator=attrs.validators.instance_of(NodeDescriptor)
    )
    lifecycle_generation: int = attrs.field(
        validator=_generation
    )
    lease_expires_at: float = attrs.field(
        validator=_finite
    )
    store_version: int = attrs.field(
        default=1, validator=_generation
    )
    #: ``False`` once the node drains: other nodes place no new Spots on it.
    accepts_placements: bool = attrs.field(
        default=True, validator=_flag
    )

    def is_live(self, now: float) -> bool:
        """Whether the lease still runs at ``now`` (``now < lease_expires_at``)."""
        return now < self.lease_expires_at

    def owner(self) -> OwnerFence:
        """The owner fence records owned by this lifecycle carry."""
        return OwnerFence(self.descriptor.node_rid, self.lifecycle_generation)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready object; generations are decimal strings.

        ``acceptsPlacements`` appears only when it is ``False``, so the JSON of a
        claim that accepts placements is the one earlier versions wrote and read.
        """
        out: dict[str, object] = {"descriptor": self.descriptor.to_json(),
                                  "lifecycleGeneration": str(self.lifecycle_generation),
                                  "leaseExpiresAt": self.lease_expires_at,
                                  "storeVersion": str(self.store_version)}
        if not self.accepts_placements:
            out[_CLOSED_KEY] = False
        return out

    @classmethod
    def from_json(cls, value: object) -> NodeClaim:
        """Decode :meth:`to_json`'s object; :class:`InvalidOperation` when malformed.

        A missing ``acceptsPlacements`` (a claim an earlier version stored) means
        ``True``; when present it must be the JSON boolean ``false``.
        """
        keys = _CLAIM_KEYS | {_CLOSED_KEY} if (
            isinstance(value, dict) and _CLOSED_KEY in value) else _CLAIM_KEYS
        obj = json_object(value, keys, "NodeClaim")
        accepts = obj.get(_CLOSED_KEY, True)
        if _CLOSED_KEY in obj and accepts is not False:
            raise InvalidOperation(
                f"a NodeClaim's {_CLOSED_KEY!r} is present only as false (a drained claim), "
                f"got {accepts!r}; the stored claim is corrupt: remove it or restart the node"
            )
        return cls(
            descriptor=NodeDescriptor.from_json(obj["descriptor"]),
            lifecycle_generation=json_generation(obj["lifecycleGeneration"],
                                                 "lifecycleGeneration"),
            lease_expires_at=json_number(obj["leaseExpiresAt"], "leaseExpiresAt"),
            store_version=json_generation(obj["storeVersion"], "storeVersion"),
            accepts_placements=accepts is not False,
        )

    @property
    def key(self) -> tuple[str, NodeRid]:
        """The descriptor identity ``(MeshName, NodeRid)``."""
        return (self.descriptor.mesh, self.descriptor.node_rid)


def describe_owner(owner: OwnerFence, node_id: str | None) -> str:
    """How a message names the lifecycle ``owner`` of a record: ``node 'a' (lifecycle 3)``.

    ``node_id`` is the NodeId of the claim of ``owner.node_rid`` -- live, or dead but not
    removed yet -- or ``None`` when no such claim was found (a dead lifecycle whose claim
    is gone): then only its NodeRid names it, ``an unnamed lifecycle (lifecycle 3, rid
    ...: no claim of it was found to name its NodeId)``.
    """
    if node_id is not None:
        return f"node {node_id!r} (lifecycle {owner.lifecycle_generation})"
    return (f"an unnamed lifecycle (lifecycle {owner.lifecycle_generation}, rid "
            f"{owner.node_rid}: no claim of it was found to name its NodeId)")
