"""Values and errors the store protocols return or raise.

These are plain frozen values so every backend (memory, SQLite, Redis)
returns the same things and the conformance suite can compare them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

import attrs

from zlink_trio.core.errors import AlreadyExists, InvalidOperation, Unavailable

if TYPE_CHECKING:
    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import AuthorityRecord, OwnerFence

__all__ = (
    "MAX_INBOX_READ",
    "MAX_PAGE_BYTES",
    "MAX_PAGE_SIZE",
    "MAX_REMINDERS_PER_SPOT",
    "MAX_REMINDER_NAME",
    "MAX_STATE_BYTES",
    "MIN_REMINDER_PERIOD",
    "AuthorityExists",
    "FirstRecordCleanup",
    "InboxRecord",
    "LocationStatistics",
    "MembersRemain",
    "NodeIdInUse",
    "OwnerAlive",
    "Page",
    "RelocationStatistics",
    "RootIntegrityError",
    "SavedState",
    "StoredReminder",
    "TargetAlive",
)

#: Largest Query page size.
MAX_PAGE_SIZE: Final = 1000
#: Largest encoded Query page: the JSON array of the records' ``to_json()``.
MAX_PAGE_BYTES: Final = 4 * 1024 * 1024
#: Largest ``limit`` of one inbox read.
MAX_INBOX_READ: Final = 1000
#: Largest durable state of one Spot, bytes (``save_state``).
MAX_STATE_BYTES: Final = 4 * 1024 * 1024
#: Most reminders one Spot keeps (``set_reminder``).
MAX_REMINDERS_PER_SPOT: Final = 100
#: Longest reminder name, characters.
MAX_REMINDER_NAME: Final = 200
#: Shortest period of a repeating reminder, seconds (a shorter wake is a timer's job).
MIN_REMINDER_PERIOD: Final = 1.0


class AuthorityExists(AlreadyExists):
    """Raised by Reserve when the Spot ID already has authority; nothing was written.

    ``current`` is the record found, so the caller decides without a second
    read: Create reports :class:`AlreadyExists` (this error as is);
    GetOrCreate and cold activation use ``current.matches(kind, type)``:
    no match is TypeMismatch, a match that is Creating or Closing means wait
    for the authority to change, any other match is Existing.
    """

    def __init__(self, current: AuthorityRecord) -> None:
        super().__init__(
            f"Spot ID {current.spot_id!r} already has {current.state.value} authority "
            f"(kind {current.kind.name}, stable type {current.stable_type!r}, generation "
            f"{current.object_generation}); use the existing Spot, wait for it to change, "
            "or choose another ID"
        )
        self.current: Final = current


class MembersRemain(InvalidOperation):
    """Raised by BeginClose of a User Spot that still has a member; nothing was written.

    A Spot with a current Actor member does not close (docs/actors.md, "Rules the
    runtime holds"): the framework never moves or destroys a member on its own, so the
    application makes its members leave (or closes them) first. ``record`` is the
    Spot's record, unchanged, and ``members`` how many Actors belong to it.
    """

    def __init__(self, record: AuthorityRecord, members: int) -> None:
        super().__init__(
            f"User Spot {record.spot_id!r} still has {members} Actor member(s); it keeps "
            "its authority -- make them leave or close them, then close it"
        )
        self.record: Final = record
        self.members: Final = members


class OwnerAlive(InvalidOperation):
    """Raised by ReleaseExpired when the Spot's owner still holds a live lease.

    Nothing was written. A live owner serves the Spot and must end it itself
    (BeginClose, then Release); an operator frees a Spot only once its owner's
    lease has expired. ``record`` is the record found and ``lease_expires_at``
    the owner's lease expiry (store time, as the node stamped it).
    """

    def __init__(self, record: AuthorityRecord, lease_expires_at: float, now: float) -> None:
        super().__init__(
            f"{record.spot_id!r} (generation {record.object_generation}) is owned by node "
            f"{record.owner.node_rid} lifecycle {record.owner.lifecycle_generation}, whose lease "
            f"is live until {lease_expires_at!r} (now {now!r}, {lease_expires_at - now:.3f} s "
            "left); a live owner must close the Spot itself, and an operator may release it "
            "only after that lease has expired"
        )
        self.record: Final = record
        self.lease_expires_at: Final = lease_expires_at


class TargetAlive(InvalidOperation):
    """Raised by ReleaseRelayReady when the move's target still holds a live lease.

    Nothing was written. Past relay-ready a live target finishes the move itself
    (CommitRelocation); a move is released only once its target's lifecycle is
    over. ``record`` is the RelayReady record found and ``lease_expires_at`` the
    target's lease expiry (store time, as the node stamped it).
    """

    def __init__(self, record: AuthorityRecord, lease_expires_at: float, now: float) -> None:
        super().__init__(
            f"{record.spot_id!r} (generation {record.object_generation}) is past relay-ready "
            f"toward node {record.relocation_target}, whose lease is live until "
            f"{lease_expires_at!r} (now {now!r}, {lease_expires_at - now:.3f} s left); a live "
            "target commits the move itself, and the move may be released only after that "
            "lease has expired"
        )
        self.record: Final = record
        self.lease_expires_at: Final = lease_expires_at


class NodeIdInUse(AlreadyExists):
    """Raised by NewClaim when a live claim of another process holds the same NodeId.

    Nothing was written. A NodeId names one process at a time: two live lifecycles
    would each believe they own the other's Spots. ``holder`` is the live claim found
    (its NodeRid, lifecycle generation and lease expiry). A restarted process meets its
    dead predecessor's claim here until that lease runs out; ``open_node`` waits for
    that, and refuses to start when the claim is renewed (a second live process).
    """

    def __init__(self, holder: NodeClaim, now: float) -> None:
        left = holder.lease_expires_at - now
        super().__init__(
            f"NodeId {holder.descriptor.node_id!r} is held by a live process: node "
            f"{holder.descriptor.node_rid} lifecycle {holder.lifecycle_generation} in mesh "
            f"{holder.descriptor.mesh!r}, endpoint {holder.descriptor.endpoint!r}, lease "
            f"until {holder.lease_expires_at!r} ({left:.3f} s left); stop that process or "
            "give this one another node_id (a restarted process may claim the NodeId once "
            "its predecessor's lease has expired)"
        )
        self.holder: Final = holder


class RootIntegrityError(Unavailable):
    """Raised when a root's stored bytes do not match the receipt's SHA-256 and size.

    The receipt names another root, or the stored bytes were damaged. Nothing
    is returned or deleted; do not trust the receipt, and treat the root as
    lost.
    """


@attrs.frozen
class Page:
    """One Query page: records in Spot ID order and the cursor of the next page.

    ``next_cursor`` is ``None`` on the last page; otherwise pass it to the
    next ``query`` call. The cursor is opaque text.
    """

    records: tuple[AuthorityRecord, ...]
    next_cursor: str | None


@attrs.frozen
class SavedState:
    """A Spot's durable state as the Location Store keeps it (``save_state``)."""

    spot_id: str
    data: bytes
    #: 1 for the first save of this Spot ID, one more for each save after it (a
    #: ``clear_state`` starts again at 1).
    version: int
    #: The ObjectGeneration of the incarnation that saved it.
    object_generation: int


@attrs.frozen(kw_only=True)
class StoredReminder:
    """A durable reminder as the Location Store keeps it (``store.reminder_steps``)."""

    spot_id: str
    name: str
    #: The Mesh, kind and stable type of the Spot that set it (its authority record's).
    mesh: str
    kind: SpotKind
    stable_type: str
    #: When it is due next, on the store's clock.
    due: float
    #: Seconds between two dues of a repeating reminder; ``None``: it fires once.
    period: float | None
    #: 1 when first set under this name, one more at each set after it.
    version: int
    #: The lifecycle delivering it now (``take_due_reminders``), and until when its take
    #: holds; ``None`` and 0.0 while nobody holds it.
    taker: OwnerFence | None = None
    taken_until: float = 0.0

    @property
    def wake(self) -> float:
        """When a scan may take it next: its due time, or the end of a take that holds
        past it."""
        return self.due if self.taker is None else max(self.due, self.taken_until)


@attrs.frozen
class InboxRecord:
    """One durable activation-inbox record: its 1-based sequence and bytes."""

    seq: int
    data: bytes


@attrs.frozen(kw_only=True)
class LocationStatistics:
    """A snapshot of a Location Store's contents (counts, not a consistent audit)."""

    #: Descriptor claims kept, live or expired.
    claims: int
    creating: int
    ready: int
    closing: int
    relocating: int
    sealed: int
    #: Moves past relay-ready (only a commit at the target ends them).
    relay_ready: int
    #: The last ObjectGeneration issued (0 before the first; on Redis Cluster the
    #: largest any bucket issued).
    last_object_generation: int


@attrs.frozen(kw_only=True)
class RelocationStatistics:
    """A snapshot of a Relocation Store's contents."""

    roots: int
    root_bytes: int
    inboxes: int
    inbox_records: int


class FirstRecordCleanup(NamedTuple):
    """What :meth:`CombinedTransactions.finish_first_record` changed."""

    #: The inbox cursor moved to the first record (``False``: it was already there).
    cursor_moved: bool
    #: The recovery pointer was removed (``False``: gone, other generation, no pointer).
    pointer_removed: bool
    #: The root was deleted (``False``: it was already gone).
    root_deleted: bool
