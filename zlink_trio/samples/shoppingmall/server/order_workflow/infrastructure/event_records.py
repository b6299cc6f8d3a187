"""The OrderEventStore's values: what an append takes and returns, and its conflict error.

The store is generic over payloads: an event is its type name (``"OrderStartedEvent"``)
and its JSON text, as the domain's typed codec made it; the store never parses the
payload. The storage envelope is the sample's own: eventId, orderId, eventType,
version, sourceCommandId?, createdAtUnixMs -- plus the payload.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import attrs

import zlink_trio as zl

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = (
    "AppendResult",
    "ExpectedVersionConflict",
    "NewEvent",
    "StoredEvent",
    "check_after_version",
    "check_append",
    "check_order_id",
)


def _new_event_id() -> str:
    return str(uuid.uuid4())


@attrs.frozen(kw_only=True)
class NewEvent:
    """One event to append: its type name and JSON payload.

    ``event_id`` defaults to a fresh uuid4 (pass the domain event's own
    ``eventId`` to keep them equal); ``created_at_unix_ms`` defaults to the
    wall clock at construction.
    """

    event_type: str
    payload: str
    event_id: str = attrs.field(factory=_new_event_id)
    created_at_unix_ms: int = attrs.field(factory=lambda: time.time_ns() // 1_000_000)


@attrs.frozen(kw_only=True)
class StoredEvent:
    """One recorded event: the storage envelope and the payload."""

    order_id: str
    #: 1 for the stream's first event, +1 for each later one.
    version: int
    event_id: str
    event_type: str
    payload: str
    source_command_id: str | None
    created_at_unix_ms: int

    def to_json(self) -> str:
        """The envelope as JSON text (camelCase, the payload as a string field)."""
        return json.dumps({
            "eventId": self.event_id, "orderId": self.order_id,
            "eventType": self.event_type, "version": self.version,
            "sourceCommandId": self.source_command_id,
            "createdAtUnixMs": self.created_at_unix_ms, "payload": self.payload,
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> StoredEvent:
        """Parse :meth:`to_json`'s output."""
        data: dict[str, Any] = json.loads(text)
        return cls(order_id=data["orderId"], version=int(data["version"]),
                   event_id=data["eventId"], event_type=data["eventType"],
                   payload=data["payload"], source_command_id=data["sourceCommandId"],
                   created_at_unix_ms=int(data["createdAtUnixMs"]))


@attrs.frozen(kw_only=True)
class AppendResult:
    """What an append did.

    ``events`` are the events of this append, or -- when ``deduplicated`` -- the
    events the earlier append with the same SourceCommandId recorded (nothing
    was written this time). ``version`` is the stream's version after the
    append (for a deduplicated one: the stream's current version).
    """

    order_id: str
    version: int
    events: tuple[StoredEvent, ...]
    deduplicated: bool


class ExpectedVersionConflict(zl.StaleFence):
    """Raised by ``append`` when the stream's version is not the expected one.

    Someone else appended first (or the caller's fold is stale). Nothing was
    written; replay the stream and decide again. A subclass of
    :class:`zlink_trio.StaleFence` -- "the expected version differs from the
    stored one; nothing was written; re-read before deciding again" -- so code
    that handles the framework's stale fences handles this one too.
    """

    def __init__(self, order_id: str, expected: int, current: int) -> None:
        super().__init__(
            f"order {order_id!r}: expected stream version {expected}, but it is at {current}; "
            "nothing was appended, replay the stream and decide again")
        self.order_id = order_id
        self.expected = expected
        self.current = current


def check_order_id(order_id: object) -> str:
    """``order_id`` if it is a non-empty string of at most 255 UTF-8 bytes."""
    if not isinstance(order_id, str) or not 1 <= len(order_id.encode()) <= 255:
        raise zl.InvalidOperation(
            f"order id {order_id!r} must be a string of 1..255 UTF-8 bytes; nothing was read "
            "or written")
    return order_id


def check_after_version(order_id: object, after_version: object) -> int:
    """``after_version`` of a read if it is an int >= 0 (and ``order_id`` valid)."""
    check_order_id(order_id)
    if isinstance(after_version, bool) or not isinstance(after_version, int) or \
            after_version < 0:
        raise zl.InvalidOperation(f"after_version {after_version!r} must be an int >= 0")
    return after_version


def check_append(order_id: object, expected_version: object, events: Sequence[NewEvent],
                 source_command_id: object) -> None:
    """Refuse a malformed append with :class:`zlink_trio.InvalidOperation` (nothing written)."""
    check_order_id(order_id)
    if isinstance(expected_version, bool) or not isinstance(expected_version, int) or \
            expected_version < 0:
        raise zl.InvalidOperation(
            f"expected_version {expected_version!r} must be an int >= 0 (0: a new stream)")
    if not events or not all(isinstance(event, NewEvent) for event in events):
        raise zl.InvalidOperation("append needs one or more NewEvent values")
    for event in events:
        if not event.event_type or not isinstance(event.payload, str):
            raise zl.InvalidOperation(
                f"event {event.event_id!r}: event_type must be non-empty and payload JSON text")
    if source_command_id is not None and (
            not isinstance(source_command_id, str) or not source_command_id):
        raise zl.InvalidOperation(
            f"source_command_id {source_command_id!r} must be a non-empty string or None")
