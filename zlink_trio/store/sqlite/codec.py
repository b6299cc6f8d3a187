"""SQLite store: the stored text of authority records and claims (compact JSON), and the
rows of reminders.

Theory of operation
-------------------
A record or claim is stored as the compact JSON of its ``to_json()``
(``separators=(",", ":")``, ``ensure_ascii=False``): :func:`dumps`. Records and
claims are immutable values fully determined by that text, so decoded values are
cached by their text (bounded; cleared when full): a row written by one
transaction is read back by the next without decoding.

:func:`encode_record` is the hot one (every record write of a cold activation). It
builds the same text as ``dumps(record.to_json())`` without the intermediate dict:
the fields in ``to_json``'s order, strings escaped by the JSON module's own C
escaper, and each nested value (owner, intent, pointer, relocation target) encoded
once per object -- an activation's records share one owner and one pointer object
-- by :func:`dumps` itself; an Actor's record ends with its ``container`` and a moving
one's with its ``nextContainer`` after it, the keys only their bodies have.
``tests/store/test_sqlite_fast_paths.py`` holds it to
``dumps(record.to_json())`` over records of every state and shape, and the import
below refuses a ``to_json`` whose keys changed.

A reminder is no JSON but a row of ``loc_reminders``, one column per field
(:data:`REMINDER_COLUMNS`): :func:`reminder_row` writes it, with its partition and
its ``wake`` (the columns a take's index range reads), and :func:`decode_reminder`
reads it back as the very :class:`StoredReminder` written.
"""

from __future__ import annotations

import json
from json.encoder import (  # type: ignore[attr-defined]
    c_make_encoder,
    encode_basestring,
)
from typing import TYPE_CHECKING, Any, Final, TypeVar

from zlink_trio.core._json_fields import decode_kind, encode_kind
from zlink_trio.core.descriptor import NodeClaim
from zlink_trio.core.identity import NodeRid
from zlink_trio.core.placement import reminder_partition
from zlink_trio.core.records import (
    _ACTOR_RECORD_KEYS,
    _MOVING_ACTOR_RECORD_KEYS,
    _RECORD_KEYS,
    AuthorityRecord,
    OwnerFence,
)
from zlink_trio.store.values import StoredReminder

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import AuthorityState

__all__ = ("REMINDER_COLUMNS", "decode_claim", "decode_record", "decode_reminder", "dumps",
           "encode_claim", "encode_record", "reminder_row")

V = TypeVar("V")

_CACHE_SIZE: Final = 512

# One encoder for every call: json.dumps with options builds a new encoder each time,
# and JSONEncoder.encode builds its C encoder on every call too; this one is built once
# (the same options, so the same text).
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_C_ENCODE: Final[Any] = (
    None if c_make_encoder is None else c_make_encoder(
        {}, _ENCODER.default, encode_basestring, None, ":", ",", False, False, True))


def dumps(value: object) -> str:
    """Compact JSON text, the stored form of records and claims."""
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


_records: dict[str, AuthorityRecord] = {}
_claims: dict[str, NodeClaim] = {}


def _remember(cache: dict[str, V], body: str, value: V) -> V:
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[body] = value
    return value


def decode_record(body: str) -> AuthorityRecord:
    """An authority record from its stored JSON."""
    record = _records.get(body)
    if record is None:
        record = _remember(_records, body, AuthorityRecord.from_json(json.loads(body)))
    return record


# -- encode_record -------------------------------------------------------------------

#: ``to_json``'s keys in its order: the text below is built in this order.
_KEYS: Final = ("spotId", "kind", "stableType", "mesh", "state", "objectGeneration",
                "ownerGeneration", "storeVersion", "owner", "creationIntent",
                "recoveryPointer", "relocationTarget", "relocationPayload")
# An Actor's record has one key more, "container", written after all of these, and a
# moving Actor's another, "nextContainer", written after that.
if (frozenset(_KEYS) != _RECORD_KEYS
        or _RECORD_KEYS | {"container"} != _ACTOR_RECORD_KEYS
        or _ACTOR_RECORD_KEYS | {"nextContainer"}
        != _MOVING_ACTOR_RECORD_KEYS):  # pragma: no cover
    raise ImportError("AuthorityRecord.to_json changed its keys: update "
                      "zlink_trio.store.sqlite.codec.encode_record to match")

_kinds: dict[SpotKind, str] = {}
_states: dict[AuthorityState, str] = {}
#: id(object) -> (object, its JSON text): nested values, encoded once per object. The
#: object itself is kept, so its id cannot be reused while the entry lives.
_nested: dict[int, tuple[object, str]] = {}


def _nested_text(value: Any) -> str:
    if value is None:
        return "null"
    entry = _nested.get(id(value))
    if entry is not None and entry[0] is value:
        return entry[1]
    text = dumps(value.to_json())
    if len(_nested) >= _CACHE_SIZE:
        _nested.clear()
    _nested[id(value)] = (value, text)
    return text


def _kind_text(kind: SpotKind) -> str:
    text = _kinds.get(kind)
    if text is None:
        text = _kinds[kind] = encode_basestring(encode_kind(kind))
    return text


def _state_text(state: AuthorityState) -> str:
    text = _states.get(state)
    if text is None:
        text = _states[state] = encode_basestring(state.value)
    return text


def encode_record(record: AuthorityRecord) -> str:
    """The stored JSON of ``record``, ``dumps(record.to_json())`` (remembered for reads)."""
    container = record.container
    # to_json adds the keys last, and only to an Actor's record (a Spot's text is what it
    # was before Actors existed): its container, then while it moves its next container.
    if container is None:
        end = "}"
    elif record.next_container is None:
        end = f',"container":{encode_basestring(container)}}}'
    else:
        end = (f',"container":{encode_basestring(container)},'
               f'"nextContainer":{encode_basestring(record.next_container)}}}')
    text = (
        f'{{"spotId":{encode_basestring(record.spot_id)},'
        f'"kind":{_kind_text(record.kind)},'
        f'"stableType":{encode_basestring(record.stable_type)},'
        f'"mesh":{encode_basestring(record.mesh)},'
        f'"state":{_state_text(record.state)},'
        f'"objectGeneration":"{record.object_generation!s}",'
        f'"ownerGeneration":"{record.owner_generation!s}",'
        f'"storeVersion":"{record.store_version!s}",'
        f'"owner":{_nested_text(record.owner)},'
        f'"creationIntent":{_nested_text(record.creation_intent)},'
        f'"recoveryPointer":{_nested_text(record.recovery_pointer)},'
        f'"relocationTarget":{_nested_text(record.relocation_target)},'
        f'"relocationPayload":{_nested_text(record.relocation_payload)}{end}')
    _remember(_records, text, record)
    return text


def encode_claim(claim: NodeClaim) -> str:
    """The stored JSON of ``claim`` (and remember the pair for the next read)."""
    body = dumps(claim.to_json())
    _remember(_claims, body, claim)
    return body


def decode_claim(body: str) -> NodeClaim:
    """A claim from its stored JSON."""
    claim = _claims.get(body)
    if claim is None:
        claim = _remember(_claims, body, NodeClaim.from_json(json.loads(body)))
    return claim


# -- reminders -----------------------------------------------------------------------

#: The columns of ``loc_reminders`` in table order: :func:`reminder_row` writes them,
#: :func:`decode_reminder` reads them.
REMINDER_COLUMNS: Final = ("spot_id, name, mesh, part, kind, stable_type, due, period, "
                           "version, taker_rid, taker_lifecycle, taken_until, wake")


def reminder_row(reminder: StoredReminder) -> tuple[object, ...]:
    """The ``loc_reminders`` row of ``reminder`` (:data:`REMINDER_COLUMNS`)."""
    taker = reminder.taker
    return (reminder.spot_id, reminder.name, reminder.mesh,
            reminder_partition(reminder.spot_id), encode_kind(reminder.kind),
            reminder.stable_type, reminder.due, reminder.period, reminder.version,
            None if taker is None else str(taker.node_rid),
            None if taker is None else taker.lifecycle_generation,
            reminder.taken_until, reminder.wake)


def decode_reminder(row: Any) -> StoredReminder:
    """The reminder a ``loc_reminders`` row (:data:`REMINDER_COLUMNS`) holds."""
    (spot_id, name, mesh, _part, kind, stable_type, due, period, version, taker_rid,
     taker_lifecycle, taken_until, _wake) = row
    return StoredReminder(
        spot_id=spot_id, name=name, mesh=mesh, kind=decode_kind(kind),
        stable_type=stable_type, due=float(due),
        period=None if period is None else float(period), version=int(version),
        taker=None if taker_rid is None else OwnerFence(NodeRid.parse(taker_rid),
                                                        int(taker_lifecycle)),
        taken_until=float(taken_until))
