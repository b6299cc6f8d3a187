"""Authority records, fences and SpotRef: the values the Location Store keeps.

Theory of operation
-------------------
The Location Store holds at most one :class:`AuthorityRecord` per Spot ID (one
ID, one Spot, across every Mesh). :class:`AuthorityState` is the state set of
the Spot-authority statechart (``statecharts.spot_authority``), generated from
it into ``statecharts.names`` -- one definition, re-exported here. "Missing"
is its initial state but never a stored one: it is the absence of a record, so
no record holds ``MISSING`` (the constructor refuses it) and a transition to
Missing deletes the record. The stored states follow the chart::

    (missing) --reserve--> CREATING --commit_ready--> READY --begin_close--> CLOSING
        ^                      |                      |  ^                      |
        +----abort_creating----+                      |  |                      |
        +---------------------------------------------|--|-------release--------+
                                                      |  +--abort (Relocating or Sealed)--+
                                              begin_relocation                            |
                                                      v                                   |
                                                 RELOCATING --seal--> SEALED -------------+
                                                                        |
                                                               accept_relay_ready
                                                                        v
                               READY at the target <--commit_relocation-- RELAY_READY

A move is Relocating, Sealed or RelayReady (:data:`MOVING_STATES`, the chart's
``moving`` tag); abort returns Relocating and Sealed to Ready at the source,
commit takes RelayReady to Ready at the target, and nothing ever takes RelayReady
back to the source. The operator's ``release_expired`` takes a Ready record whose
owner's lease expired to Missing. Which transitions exist is the chart's to say:
the store's transactions step it (``store.rules.authority``).

Four counters order what happens to a Spot ID:

- **ObjectGeneration** names one incarnation (non-zero, below 2**63). Every
  new incarnation of the same ID gets a strictly larger one; the store issues
  it from one store-wide sequence, so no tombstone is needed.
- **AuthorityOwnerGeneration** starts at 1 and grows by one at every owner
  change inside one incarnation (a relocation commit).
- **StoreVersion** starts at 1 and grows by one at every mutation of the
  record: it is the record's compare-and-set token.
- **Lifecycle generation** (in :class:`OwnerFence`) names one process
  lifecycle of a NodeId; it comes from the node's descriptor claim.

A *fence* is the set of these values a caller read; a store transaction that
receives one refuses (``StaleFence``) when the record no longer has them.
:class:`SpotRef` is the public snapshot of a location. Both live one layer
down -- the fences (:class:`OwnerFence`, :class:`AuthorityFence`,
:class:`ReservationFence`) in :mod:`zlink_trio.core._fences`, SpotRef in
:mod:`zlink_trio.core._spot_ref` -- and so do the pointers into the Relocation
Store a record carries (:class:`RootReceipt`, :class:`CreationIntent`,
:class:`RecoveryPointer`, in :mod:`zlink_trio.core._roots`). Each of those
modules explains its values; all are re-exported here.

All values are frozen attrs classes whose validators (shared with the lower
modules, in :mod:`zlink_trio.core._checks`) raise :class:`InvalidOperation`;
nothing here does I/O or reads a clock.

The store's transactions build most records from parts that were validated already:
the arguments Reserve checked, a stored record (valid when it was built) with a new
state and StoreVersion. For them :func:`record_of` and :func:`reservation_fence` set
the fields without running the validators again -- the validators are most of a
record's cost, and a cold activation builds three records and a fence. They are
trusted constructors: their callers (``store.rules``) guarantee every field passes
the validator it skips and the record keeps the class invariants; anything built
from outside input goes through the checking constructor.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import attrs

from statecharts.names import SPOT_AUTHORITY, AuthorityState
from zlink_trio.core._checks import (
    MAX_GENERATION,
    generation_field,
    mesh_field,
    spot_id_field,
    stable_type_field,
    validate_mesh_name,
)
from zlink_trio.core._fences import AuthorityFence, OwnerFence, ReservationFence
from zlink_trio.core._json_fields import (
    decode_kind,
    encode_kind,
    json_generation,
    json_object,
    json_str,
)
from zlink_trio.core._roots import (
    MAX_CREATION_REQUEST_BYTES,
    MAX_ROOT_BYTES,
    CreationIntent,
    RecoveryPointer,
    RootReceipt,
)
from zlink_trio.core._spot_ref import ActorRef, SpotRef
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import SpotKind, validate_spot_id, validate_stable_type

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = (
    "ENTRY_STABLE_TYPE",
    "MAX_CREATION_REQUEST_BYTES",
    "MAX_GENERATION",
    "MAX_ROOT_BYTES",
    "MOVING_STATES",
    "ActorRef",
    "AuthorityFence",
    "AuthorityRecord",
    "AuthorityState",
    "CreationIntent",
    "OwnerFence",
    "RecoveryPointer",
    "ReservationFence",
    "RootReceipt",
    "SpotRef",
    "record_of",
    "reservation_fence",
    "validate_mesh_name",
)

#: The stable type recorded on Entry Spot claims; never registrable by users.
ENTRY_STABLE_TYPE: Final = "zlink.entry"

_KINDS: Final = frozenset({SpotKind.ENTRY, SpotKind.USER, SpotKind.INSTANCE, SpotKind.ACTOR})
_RECORD_KEYS: Final = frozenset({
    "spotId", "kind", "stableType", "mesh", "state", "objectGeneration", "ownerGeneration",
    "storeVersion", "owner", "creationIntent", "recoveryPointer", "relocationTarget",
    "relocationPayload"})
#: An Actor's record has one more key, ``container``, and a moving one ``nextContainer``
#: (absent from every other record, so a Spot's stored form is the same as before Actors
#: existed).
_ACTOR_RECORD_KEYS: Final = _RECORD_KEYS | {"container"}
_MOVING_ACTOR_RECORD_KEYS: Final = _ACTOR_RECORD_KEYS | {"nextContainer"}
#: The states in which a record may name its move's payload root: from the capture
#: (Sealed) to the end of the move.
_PAYLOAD_STATES: Final = frozenset({AuthorityState.SEALED, AuthorityState.RELAY_READY})


#: The states of a move in progress (the chart's ``moving`` tag): the record names a
#: ``relocation_target``, the source holds an active capacity unit and the target a
#: pending one.
MOVING_STATES: Final = frozenset(AuthorityState(s) for s in SPOT_AUTHORITY.tags.moving)


@attrs.frozen(kw_only=True)
class AuthorityRecord:
    """The Location Store's authority over one Spot ID.

    Invariants (checked at construction, :class:`InvalidOperation`): never
    MISSING (that is the absence of a record); ``creation_intent`` only while
    CREATING; ``relocation_target`` exactly while moving (RELOCATING, SEALED or
    RELAY_READY); ``relocation_payload`` (the receipt of the move's payload root in the
    Relocation Store, recorded before the root is written) only while SEALED or
    RELAY_READY; an ENTRY record is READY with owner generation 1 and no intent,
    pointer or relocation target; ``container`` is set exactly on an ACTOR record
    (docs/actors.md: the Spot ID of the Entry or User Spot the Actor belongs to), and
    ``next_container`` exactly on a moving one (its container at the target).
    """

    spot_id: str = attrs.field(validator=spot_id_field)
    kind: SpotKind = attrs.field()
    stable_type: str = attrs.field(validator=stable_type_field)
    mesh: str = attrs.field(validator=mesh_field)
    state: AuthorityState = attrs.field(validator=attrs.validators.instance_of(AuthorityState))
    object_generation: int = attrs.field(validator=generation_field)
    owner_generation: int = attrs.field(validator=generation_field)
    store_version: int = attrs.field(validator=generation_field)
    owner: OwnerFence = attrs.field(validator=attrs.validators.instance_of(OwnerFence))
    creation_intent: CreationIntent | None = None
    recovery_pointer: RecoveryPointer | None = None
    relocation_target: OwnerFence | None = None
    relocation_payload: RootReceipt | None = None
    #: The Spot ID of the Entry or User Spot an Actor belongs to (ACTOR records only).
    container: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(spot_id_field))
    #: The container at the target while an Actor moves to another node (its move's
    #: container there: that node's Entry Spot, or the User Spot it joins).
    next_container: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(spot_id_field))

    @kind.validator
    def _kind(self, attribute: attrs.Attribute[SpotKind], value: SpotKind) -> None:
        if value not in _KINDS:
            raise InvalidOperation(f"an authority record's kind is ENTRY, USER, INSTANCE or ACTOR, "
                                   f"got {value!r}")

    def __attrs_post_init__(self) -> None:
        state = self.state
        if state is AuthorityState.MISSING:
            raise InvalidOperation("an authority record is never Missing: Missing is the "
                                   "absence of a record, delete the record instead")
        if self.creation_intent is not None and state is not AuthorityState.CREATING:
            raise InvalidOperation("a creation intent is kept only while the record is Creating")
        if (state in MOVING_STATES) != (self.relocation_target is not None):
            raise InvalidOperation("relocation_target is set exactly while the record moves "
                                   "(Relocating, Sealed or RelayReady)")
        if self.relocation_payload is not None and state not in _PAYLOAD_STATES:
            raise InvalidOperation("relocation_payload is kept only while the record is Sealed "
                                   "or RelayReady (a move past its capture)")
        if self.kind is SpotKind.ENTRY and (
            state is not AuthorityState.READY
            or self.owner_generation != 1
            or self.recovery_pointer is not None
        ):
            raise InvalidOperation("an Entry claim is Ready, owner generation 1, no pointer")
        if (self.kind is SpotKind.ACTOR) != (self.container is not None):
            raise InvalidOperation("an Actor's record names its container, and only an "
                                   "Actor's record does")
        if self.next_container is not None and not (self.kind is SpotKind.ACTOR
                                                    and state in MOVING_STATES):
            # (A moving Actor without one is carried by its container's SpotWide move.)
            raise InvalidOperation("an Actor's record names a next container only while "
                                   "it moves")

    def ref(self) -> SpotRef:
        """The public SpotRef of this incarnation at its current owner."""
        return SpotRef(spot_id=self.spot_id, generation=self.object_generation,
                       mesh=self.mesh, node_rid=self.owner.node_rid)

    def actor_ref(self) -> ActorRef:
        """The public ActorRef of this Actor incarnation (an ACTOR record only)."""
        if self.container is None:
            raise InvalidOperation(f"{self.spot_id!r} is a {self.kind.name} Spot, not an Actor")
        return ActorRef(actor_id=self.spot_id, generation=self.object_generation,
                        mesh=self.mesh, node_rid=self.owner.node_rid, container=self.container)

    def fence(self) -> AuthorityFence:
        """The owner/generation fence to close, release or relocate this incarnation."""
        return AuthorityFence(spot_id=self.spot_id, object_generation=self.object_generation,
                              owner_generation=self.owner_generation, owner=self.owner)

    def matches(self, kind: SpotKind, stable_type: str) -> bool:
        """Whether this authority has exactly ``kind`` and ``stable_type``.

        GetOrCreate / cold activation meeting an existing record: a match that
        is Creating or Closing means wait for the authority to change; a
        match otherwise is Existing; no match is TypeMismatch.
        """
        return self.kind is kind and self.stable_type == stable_type

    def to_json(self) -> dict[str, object]:
        """A JSON-ready object; 63-bit counters are decimal strings."""
        intent = self.creation_intent
        pointer = self.recovery_pointer
        target = self.relocation_target
        payload = self.relocation_payload
        body: dict[str, object] = {
            "spotId": self.spot_id,
            "kind": encode_kind(self.kind),
            "stableType": self.stable_type,
            "mesh": self.mesh,
            "state": self.state.value,
            "objectGeneration": str(self.object_generation),
            "ownerGeneration": str(self.owner_generation),
            "storeVersion": str(self.store_version),
            "owner": self.owner.to_json(),
            "creationIntent": None if intent is None else intent.to_json(),
            "recoveryPointer": None if pointer is None else pointer.to_json(),
            "relocationTarget": None if target is None else target.to_json(),
            "relocationPayload": None if payload is None else payload.to_json(),
        }
        if self.container is not None:
            body["container"] = self.container
        if self.next_container is not None:
            body["nextContainer"] = self.next_container
        return body

    @classmethod
    def from_json(cls, value: object) -> AuthorityRecord:
        """Decode :meth:`to_json`'s object (already parsed from JSON).

        Raises :class:`InvalidOperation` when ``value`` is not an object with
        exactly :meth:`to_json`'s keys, a field is invalid, or the record
        breaks an invariant (the constructor checks them all).
        """
        keys = _RECORD_KEYS
        if isinstance(value, dict) and "container" in value:
            keys = _MOVING_ACTOR_RECORD_KEYS if "nextContainer" in value else _ACTOR_RECORD_KEYS
        obj = json_object(value, keys, "AuthorityRecord")
        intent = (None if obj["creationIntent"] is None
                  else CreationIntent.from_json(obj["creationIntent"]))
        pointer = (None if obj["recoveryPointer"] is None
                   else RecoveryPointer.from_json(obj["recoveryPointer"]))
        target = obj["relocationTarget"]
        payload = obj["relocationPayload"]
        try:
            state = AuthorityState(json_str(obj["state"], "state"))
        except ValueError:
            raise InvalidOperation(f"unknown authority state {obj['state']!r}") from None
        return cls(
            spot_id=validate_spot_id(obj["spotId"]), kind=decode_kind(obj["kind"]),
            stable_type=validate_stable_type(obj["stableType"]),
            mesh=validate_mesh_name(obj["mesh"]), state=state,
            object_generation=json_generation(obj["objectGeneration"], "objectGeneration"),
            owner_generation=json_generation(obj["ownerGeneration"], "ownerGeneration"),
            store_version=json_generation(obj["storeVersion"], "storeVersion"),
            owner=OwnerFence.from_json(obj["owner"]),
            creation_intent=intent, recovery_pointer=pointer,
            relocation_target=None if target is None else OwnerFence.from_json(target),
            relocation_payload=None if payload is None else RootReceipt.from_json(payload),
            container=(None if "container" not in obj
                       else validate_spot_id(json_str(obj["container"], "container"))),
            next_container=(None if "nextContainer" not in obj else validate_spot_id(
                json_str(obj["nextContainer"], "nextContainer"))),
        )

    def encoded_size(self) -> int:
        """Bytes of :meth:`to_json` as compact UTF-8 JSON (Query's page budget unit)."""
        text = json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"))
        return len(text.encode("utf-8"))


# -- trusted constructors (see the module docstring) --------------------------------------

_new: Final = object.__new__


def _setters(cls: type, *names: str) -> tuple[Callable[[object, object], None], ...]:
    # The slots' own setters: they bypass the frozen ``__setattr__`` and the validators.
    return tuple(cls.__dict__[name].__set__ for name in names)


(_R_ID, _R_KIND, _R_TYPE, _R_MESH, _R_STATE, _R_GEN, _R_OWNER_GEN, _R_VERSION, _R_OWNER,
 _R_INTENT, _R_POINTER, _R_TARGET, _R_PAYLOAD, _R_CONTAINER, _R_NEXT) = _setters(
    AuthorityRecord, "spot_id", "kind", "stable_type", "mesh", "state", "object_generation",
    "owner_generation", "store_version", "owner", "creation_intent", "recovery_pointer",
    "relocation_target", "relocation_payload", "container", "next_container")
(_F_ID, _F_VERSION, _F_GEN, _F_OWNER_GEN, _F_OWNER, _F_LEASE, _F_PENDING) = _setters(
    ReservationFence, "spot_id", "store_version", "object_generation", "owner_generation",
    "owner", "owner_lease_expires_at", "pending_capacity")


def record_of(spot_id: str, kind: SpotKind, stable_type: str, mesh: str,
              state: AuthorityState, object_generation: int, owner_generation: int,
              store_version: int, owner: OwnerFence,
              creation_intent: CreationIntent | None = None,
              recovery_pointer: RecoveryPointer | None = None,
              relocation_target: OwnerFence | None = None,
              relocation_payload: RootReceipt | None = None,
              container: str | None = None) -> AuthorityRecord:
    """An :class:`AuthorityRecord` of fields that are valid already (trusted).

    The caller guarantees what the constructor would check: every field passes its
    validator (taken from a valid record, or checked by the transaction) and the
    invariants hold (an intent only while Creating, a relocation target exactly
    while moving, a payload only while Sealed or RelayReady, the Entry rules, a
    container exactly on an Actor's record). It builds no moving Actor's record (its
    next container is left unset): those come from ``attrs.evolve``.
    Equal to ``AuthorityRecord(...)`` of the same fields, at a third of the cost.
    """
    record: AuthorityRecord = _new(AuthorityRecord)
    _R_ID(record, spot_id)
    _R_KIND(record, kind)
    _R_TYPE(record, stable_type)
    _R_MESH(record, mesh)
    _R_STATE(record, state)
    _R_GEN(record, object_generation)
    _R_OWNER_GEN(record, owner_generation)
    _R_VERSION(record, store_version)
    _R_OWNER(record, owner)
    _R_INTENT(record, creation_intent)
    _R_POINTER(record, recovery_pointer)
    _R_TARGET(record, relocation_target)
    _R_PAYLOAD(record, relocation_payload)
    _R_CONTAINER(record, container)
    _R_NEXT(record, None)
    return record


def reservation_fence(record: AuthorityRecord, owner_lease_expires_at: float
                      ) -> ReservationFence:
    """The :class:`ReservationFence` of a Creating ``record`` Reserve just built (trusted).

    ``record`` is valid (built by the transaction from checked fields) and
    ``owner_lease_expires_at`` a finite float (a stored claim's lease); the fence's
    fields are the record's, so nothing is checked again.
    """
    fence: ReservationFence = _new(ReservationFence)
    _F_ID(fence, record.spot_id)
    _F_VERSION(fence, record.store_version)
    _F_GEN(fence, record.object_generation)
    _F_OWNER_GEN(fence, record.owner_generation)
    _F_OWNER(fence, record.owner)
    _F_LEASE(fence, owner_lease_expires_at)
    _F_PENDING(fence, 1)
    return fence

