"""``AuthorityRecord.from_json``: decode a stored or received authority record.

Kept apart from ``records.py`` (which imports it lazily) so that module stays
small; every field goes through the same validators as the constructor, and
the constructor checks the record's invariants, so a malformed object never
becomes a half-valid record.
"""

from __future__ import annotations

from typing import Final

from zlink_trio.core._checks import validate_mesh_name
from zlink_trio.core._json_fields import (
    decode_kind,
    json_generation,
    json_int,
    json_object,
    json_str,
)
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import validate_spot_id, validate_stable_type
from zlink_trio.core.records import (
    MAX_CREATION_REQUEST_BYTES,
    MAX_GENERATION,
    MAX_ROOT_BYTES,
    AuthorityRecord,
    AuthorityState,
    CreationIntent,
    OwnerFence,
    RecoveryPointer,
)

__all__ = ("authority_record_from_json",)

_INTENT_KEYS: Final = frozenset({"contentRef", "sha256", "size"})
_POINTER_KEYS: Final = frozenset({"rootRef", "sha256", "size", "version"})
_RECORD_KEYS: Final = frozenset({
    "spotId", "kind", "stableType", "mesh", "state", "objectGeneration", "ownerGeneration",
    "storeVersion", "owner", "creationIntent", "recoveryPointer", "relocationTarget"})


def authority_record_from_json(value: object) -> AuthorityRecord:
    """Decode ``AuthorityRecord.to_json``'s object; see ``AuthorityRecord.from_json``."""
    obj = json_object(value, _RECORD_KEYS, "AuthorityRecord")
    intent = pointer = None
    if obj["creationIntent"] is not None:
        raw = json_object(obj["creationIntent"], _INTENT_KEYS, "creation intent")
        intent = CreationIntent(
            content_ref=json_str(raw["contentRef"], "contentRef"),
            sha256=json_str(raw["sha256"], "sha256"),
            size=json_int(raw["size"], "size", 0, MAX_CREATION_REQUEST_BYTES))
    if obj["recoveryPointer"] is not None:
        raw = json_object(obj["recoveryPointer"], _POINTER_KEYS, "recovery pointer")
        pointer = RecoveryPointer(
            root_ref=json_str(raw["rootRef"], "rootRef"),
            sha256=json_str(raw["sha256"], "sha256"),
            size=json_int(raw["size"], "size", 0, MAX_ROOT_BYTES),
            version=json_int(raw["version"], "version", 1, MAX_GENERATION))
    target = obj["relocationTarget"]
    try:
        state = AuthorityState(json_str(obj["state"], "state"))
    except ValueError:
        raise InvalidOperation(f"unknown authority state {obj['state']!r}") from None
    return AuthorityRecord(
        spot_id=validate_spot_id(obj["spotId"]), kind=decode_kind(obj["kind"]),
        stable_type=validate_stable_type(obj["stableType"]),
        mesh=validate_mesh_name(obj["mesh"]), state=state,
        object_generation=json_generation(obj["objectGeneration"], "objectGeneration"),
        owner_generation=json_generation(obj["ownerGeneration"], "ownerGeneration"),
        store_version=json_generation(obj["storeVersion"], "storeVersion"),
        owner=OwnerFence.from_json(obj["owner"]), creation_intent=intent,
        recovery_pointer=pointer,
        relocation_target=None if target is None else OwnerFence.from_json(target),
    )
