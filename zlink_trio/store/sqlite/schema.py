"""SQLite store: URL options and the versioned schema, created or migrated at open.

Theory of operation
-------------------
``sqlite:///abs/path.db?synchronous=normal&busy_timeout=5&dispatch=thread``
names one database file on this host (no host part: WAL needs shared memory,
so network filesystems are refused by design). :func:`parse_url` turns the URL
into :class:`SqliteOptions` or raises :class:`InvalidConfiguration` before
anything is opened.

The schema version lives in ``PRAGMA user_version`` and the file is marked as
ours with ``PRAGMA application_id``. :func:`migrate` runs inside one
``BEGIN IMMEDIATE`` transaction at open: version 0 (a new, empty file) gets
every migration in order; a known older version gets the missing ones; a
*newer* version than this code knows is refused with
:class:`InvalidConfiguration` (an older release must never write a layout it
does not understand). Either the whole migration commits with the new
version, or nothing does.

Tables: the Location Store's carry the prefix ``loc_``, the Relocation
Store's ``rel_``; both may live in one file and never share a table.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs

from zlink_trio.core.errors import InvalidConfiguration

if TYPE_CHECKING:
    import sqlite3

__all__ = (
    "APPLICATION_ID",
    "DEFAULT_DISPATCH",
    "SCHEMA_VERSION",
    "SqliteOptions",
    "migrate",
    "parse_url",
)

#: The newest schema this code reads and writes.
SCHEMA_VERSION: Final = 5
#: ``PRAGMA application_id`` of a zlink store file ("ZLNK").
APPLICATION_ID: Final = 0x5A4C4E4B
#: Largest accepted busy timeout, seconds (a bound on how long a cancel may wait).
MAX_BUSY_TIMEOUT: Final = 600.0

Dispatch = Literal["thread", "inline"]
#: The dispatch a URL gets without ``?dispatch=`` (the faster one measured here).
DEFAULT_DISPATCH: Final[Dispatch] = "inline"

_V1: Final = (
    # -- Location Store ------------------------------------------------------------------
    """CREATE TABLE loc_claims (
        mesh TEXT NOT NULL, node_rid TEXT NOT NULL, lifecycle INTEGER NOT NULL,
        lease_expires_at REAL NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (mesh, node_rid)) WITHOUT ROWID""",
    """CREATE TABLE loc_lifecycles (
        node_id TEXT PRIMARY KEY, generation INTEGER NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE loc_records (
        spot_id TEXT PRIMARY KEY, state TEXT NOT NULL, mesh TEXT NOT NULL,
        owner_rid TEXT NOT NULL, owner_lifecycle INTEGER NOT NULL,
        object_generation INTEGER NOT NULL, body TEXT NOT NULL) WITHOUT ROWID""",
    "CREATE INDEX loc_records_state ON loc_records (state)",
    "CREATE INDEX loc_records_owner ON loc_records (mesh, owner_rid, owner_lifecycle)",
    """CREATE TABLE loc_sequence (
        name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE loc_capacity (
        mesh TEXT NOT NULL, node_rid TEXT NOT NULL, lifecycle INTEGER NOT NULL,
        pending INTEGER NOT NULL, active INTEGER NOT NULL,
        PRIMARY KEY (mesh, node_rid, lifecycle)) WITHOUT ROWID""",
    # -- Relocation Store ----------------------------------------------------------------
    "CREATE TABLE rel_roots (ref TEXT PRIMARY KEY, data BLOB NOT NULL)",
    """CREATE TABLE rel_inboxes (
        spot_id TEXT NOT NULL, object_generation INTEGER NOT NULL,
        last_seq INTEGER NOT NULL, cursor INTEGER NOT NULL,
        PRIMARY KEY (spot_id, object_generation)) WITHOUT ROWID""",
    """CREATE TABLE rel_inbox_records (
        spot_id TEXT NOT NULL, object_generation INTEGER NOT NULL, seq INTEGER NOT NULL,
        data BLOB NOT NULL, PRIMARY KEY (spot_id, object_generation, seq))""",
)

_V2: Final = (
    # A moving record names its payload root (``relocationPayload``, the last key of
    # ``AuthorityRecord.to_json``): every stored body gets the key, null -- no record
    # was past a capture in a version-1 file's format -- so bodies stay exactly
    # ``to_json``'s text and a version-1 release refuses the file instead of meeting a
    # key it does not know.
    """UPDATE loc_records SET body = json_insert(body, '$.relocationPayload', json('null'))
        WHERE json_type(body, '$.relocationPayload') IS NULL""",
)

_V3: Final = (
    # An Actor's record names its container (``container``, a key only an Actor's body
    # has, docs/actors.md), and while it moves to another node its container there too
    # (``nextContainer``): it is a member of both until the move ends. Two columns hold
    # them, NULL on every other row, so a container's members are one range of each
    # index (``members``; ``view.LocationView.members``, BeginClose's check). A
    # version-2 file holds no Actor record, so every existing row is NULL in both.
    "ALTER TABLE loc_records ADD COLUMN container TEXT",
    "ALTER TABLE loc_records ADD COLUMN next_container TEXT",
    # Partial: only Actor rows are indexed (and only moving ones in the second), so a
    # Spot's record writes never touch them.
    """CREATE INDEX loc_records_container ON loc_records (container)
        WHERE container IS NOT NULL""",
    """CREATE INDEX loc_records_next_container ON loc_records (next_container)
        WHERE next_container IS NOT NULL""",
)

_V4: Final = (
    # A Spot's durable state (``store.state_steps``), keyed by Spot ID alone: it outlives
    # the records, so it is a table of its own, written only in a transaction that
    # checks the writer's record (``view.LocationView.saved``).
    """CREATE TABLE loc_state (
        spot_id TEXT PRIMARY KEY, version INTEGER NOT NULL,
        object_generation INTEGER NOT NULL, data BLOB NOT NULL) WITHOUT ROWID""",
)

_V5: Final = (
    # A Spot's durable reminders (``store.reminder_steps``): one row per (Spot ID, name),
    # written only through ``view.LocationView.reminders`` (the oracle decides, the rows
    # follow). ``part`` is ``core.placement.reminder_partition(spot_id)``; ``kind`` is the
    # record's (``encode_kind``); ``period`` is NULL for a one-shot reminder; the taker
    # (``taker_rid``, ``taker_lifecycle``) is NULL while nobody holds it, ``taken_until``
    # then 0. ``wake`` is ``StoredReminder.wake`` (its due, or the end of a take that holds
    # past it): a take reads one range of ``loc_reminders_wake`` per partition, the rows
    # due at its ``now`` and no other.
    """CREATE TABLE loc_reminders (
        spot_id TEXT NOT NULL, name TEXT NOT NULL, mesh TEXT NOT NULL,
        part INTEGER NOT NULL, kind TEXT NOT NULL, stable_type TEXT NOT NULL,
        due REAL NOT NULL, period REAL, version INTEGER NOT NULL,
        taker_rid TEXT, taker_lifecycle INTEGER, taken_until REAL NOT NULL,
        wake REAL NOT NULL,
        PRIMARY KEY (spot_id, name)) WITHOUT ROWID""",
    """CREATE INDEX loc_reminders_wake ON loc_reminders (mesh, part, wake, spot_id, name)""",
)

#: Migration ``n`` takes a file from version ``n - 1`` to ``n``.
MIGRATIONS: Final[dict[int, tuple[str, ...]]] = {1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5}


@attrs.frozen(kw_only=True)
class SqliteOptions:
    """What a ``sqlite://`` URL selects."""

    path: str
    #: ``normal`` (default: survives application crashes) or ``full`` (also power loss).
    synchronous: Literal["normal", "full"] = "normal"
    #: How long a transaction waits for another connection's write lock, seconds.
    busy_timeout: float = 5.0
    #: ``thread``: every transaction in a worker thread; ``inline``: on the Trio
    #: thread with busy timeout 0, falling back to the worker thread on SQLITE_BUSY.
    dispatch: Dispatch = DEFAULT_DISPATCH


def _refuse(url: str, why: str) -> InvalidConfiguration:
    return InvalidConfiguration(
        f"store URL {url!r}: {why}; use 'sqlite:///absolute/path.db' with optional "
        "?synchronous=normal|full&busy_timeout=SECONDS&dispatch=inline|thread"
    )


def parse_url(url: str) -> SqliteOptions:
    """Parse ``sqlite:///path.db?...``; :class:`InvalidConfiguration` when malformed."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        raise _refuse(url, "not a sqlite URL")
    if parts.netloc:
        raise _refuse(url, "a SQLite store is a file on this host; a host part is not allowed")
    path = unquote(parts.path)
    if not path.startswith("/") or path.endswith("/") or parts.fragment:
        raise _refuse(url, "the path must be an absolute file path")
    values: dict[str, str] = {}
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise _refuse(url, "malformed query string") from None
    for key, value in pairs:
        if key not in ("synchronous", "busy_timeout", "dispatch") or key in values:
            raise _refuse(url, f"unknown or repeated option {key!r}")
        values[key] = value.lower()
    sync = values.get("synchronous", "normal")
    dispatch = values.get("dispatch", DEFAULT_DISPATCH)
    if sync not in ("normal", "full"):
        raise _refuse(url, f"synchronous must be normal or full, got {sync!r}")
    if dispatch not in ("thread", "inline"):
        raise _refuse(url, f"dispatch must be inline or thread, got {dispatch!r}")
    try:
        timeout = float(values.get("busy_timeout", "5"))
    except ValueError:
        timeout = math.nan
    if not 0 <= timeout <= MAX_BUSY_TIMEOUT:
        raise _refuse(url, f"busy_timeout must be seconds in 0..{MAX_BUSY_TIMEOUT:g}")
    return SqliteOptions(path=path, synchronous="full" if sync == "full" else "normal",
                         busy_timeout=timeout,
                         dispatch="thread" if dispatch == "thread" else "inline")


def migrate(conn: sqlite3.Connection, path: str) -> int:
    """Create or migrate the schema; call inside ``BEGIN IMMEDIATE``. Returns the old version.

    Raises :class:`InvalidConfiguration` when the file belongs to another
    application or has a newer schema than :data:`SCHEMA_VERSION`.
    """
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    app = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise InvalidConfiguration(
            f"SQLite store {path!r} has schema version {version}, newer than this zlink_trio "
            f"knows ({SCHEMA_VERSION}); upgrade zlink_trio, or open another file"
        )
    if version == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
        if tables:
            raise InvalidConfiguration(
                f"{path!r} is a SQLite database of another application (it has tables but no "
                "zlink schema version); choose a new file for the store"
            )
    elif app != APPLICATION_ID:
        raise InvalidConfiguration(
            f"{path!r} is a SQLite database of another application (application_id {app:#x});"
            " choose a new file for the store"
        )
    for step in range(version + 1, SCHEMA_VERSION + 1):
        for statement in MIGRATIONS[step]:
            conn.execute(statement)
    if version < SCHEMA_VERSION:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return version
