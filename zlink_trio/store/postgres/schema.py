"""PostgreSQL store: the URL's options and the versioned schema, created at open.

A ``postgresql://user@host:port/db?prefix=zlink&timeout=5&connections=4`` URL (also
``postgres://``) names the server and database as libpq does; the options this backend
reads are removed before the rest goes to psycopg:

- ``prefix`` (default ``zlink``): the PostgreSQL *schema* that holds the tables, so
  several stores share one database without seeing each other's rows (06: "may share a
  deployment, but not a keyspace"). 1-48 characters of ``a-z``, ``0-9`` and ``_``,
  not starting with a digit.
- ``timeout`` (seconds, default 5): how long a statement, or a wait for a lock another
  connection holds, may take before the transaction fails with ``StoreUnavailable``
  (``statement_timeout``, ``lock_timeout``), and the bound on connecting.
- ``connections`` (default 4): the read connections; writes use one more.

The tables are the SQLite backend's (``store.sqlite.schema``), in PostgreSQL's types:
``BIGINT`` for integers, ``DOUBLE PRECISION`` for times, ``BYTEA`` for payloads, so the
same statements serve both (``store.sqlite.session``). ``zlink_meta`` holds the schema
version and the *write counter* (key ``writes``); :func:`migrate` creates the schema
under an advisory lock (two processes opening a fresh database at once create it once),
brings an older version up to date, and refuses a version newer than
:data:`SCHEMA_VERSION` with :class:`InvalidConfiguration`.

**The write counter** tells a store's row cache (``store.sqlite.rowcache``) whether
anyone else wrote since its own last commit. Every write transaction of a store adds
one to it under the write lock (``connection``). A write by any other means -- an
operator's ``UPDATE`` by hand, a script -- adds one too: every table has a statement
trigger (:data:`_FOREIGN_WRITE`) that counts a write unless the session is a store's
(its connections set ``zlink_trio.writer``), so a row changed behind the stores' back
is never served from a cache.

Versions: 1, the tables; 2, the write counter and its triggers.
"""

from __future__ import annotations

import re
import zlib
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs

from zlink_trio.core.errors import InvalidConfiguration

if TYPE_CHECKING:
    import psycopg

__all__ = ("SCHEMA_VERSION", "WRITER_SETTING", "PostgresOptions", "migrate", "parse_url")

#: The schema version this code writes and reads.
SCHEMA_VERSION: Final = 2
#: The prefix (PostgreSQL schema) a URL without ``?prefix=`` gets.
DEFAULT_PREFIX: Final = "zlink"
_PREFIX: Final = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_SCHEMES: Final = frozenset({"postgresql", "postgres"})

_TABLES: Final = (
    # -- Location Store ------------------------------------------------------------------
    """CREATE TABLE loc_claims (
        mesh TEXT NOT NULL, node_rid TEXT NOT NULL, lifecycle BIGINT NOT NULL,
        lease_expires_at DOUBLE PRECISION NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (mesh, node_rid))""",
    """CREATE TABLE loc_lifecycles (
        node_id TEXT PRIMARY KEY, generation BIGINT NOT NULL)""",
    """CREATE TABLE loc_records (
        spot_id TEXT PRIMARY KEY, state TEXT NOT NULL, mesh TEXT NOT NULL,
        owner_rid TEXT NOT NULL, owner_lifecycle BIGINT NOT NULL,
        object_generation BIGINT NOT NULL, body TEXT NOT NULL,
        container TEXT, next_container TEXT)""",
    "CREATE INDEX loc_records_state ON loc_records (state, spot_id)",
    "CREATE INDEX loc_records_owner ON loc_records (mesh, owner_rid, owner_lifecycle)",
    """CREATE INDEX loc_records_container ON loc_records (container)
        WHERE container IS NOT NULL""",
    """CREATE INDEX loc_records_next_container ON loc_records (next_container)
        WHERE next_container IS NOT NULL""",
    """CREATE TABLE loc_sequence (
        name TEXT PRIMARY KEY, value BIGINT NOT NULL)""",
    """CREATE TABLE loc_capacity (
        mesh TEXT NOT NULL, node_rid TEXT NOT NULL, lifecycle BIGINT NOT NULL,
        pending BIGINT NOT NULL, active BIGINT NOT NULL,
        PRIMARY KEY (mesh, node_rid, lifecycle))""",
    """CREATE TABLE loc_state (
        spot_id TEXT PRIMARY KEY, version BIGINT NOT NULL,
        object_generation BIGINT NOT NULL, data BYTEA NOT NULL)""",
    """CREATE TABLE loc_reminders (
        spot_id TEXT NOT NULL, name TEXT NOT NULL, mesh TEXT NOT NULL,
        part BIGINT NOT NULL, kind TEXT NOT NULL, stable_type TEXT NOT NULL,
        due DOUBLE PRECISION NOT NULL, period DOUBLE PRECISION, version BIGINT NOT NULL,
        taker_rid TEXT, taker_lifecycle BIGINT, taken_until DOUBLE PRECISION NOT NULL,
        wake DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (spot_id, name))""",
    "CREATE INDEX loc_reminders_wake ON loc_reminders (mesh, part, wake, spot_id, name)",
    # -- Relocation Store ----------------------------------------------------------------
    "CREATE TABLE rel_roots (ref TEXT PRIMARY KEY, data BYTEA NOT NULL)",
    """CREATE TABLE rel_inboxes (
        spot_id TEXT NOT NULL, object_generation BIGINT NOT NULL,
        last_seq BIGINT NOT NULL, cursor BIGINT NOT NULL,
        PRIMARY KEY (spot_id, object_generation))""",
    """CREATE TABLE rel_inbox_records (
        spot_id TEXT NOT NULL, object_generation BIGINT NOT NULL, seq BIGINT NOT NULL,
        data BYTEA NOT NULL, PRIMARY KEY (spot_id, object_generation, seq))""",
)


#: The tables whose writes by other sessions the write counter counts.
_COUNTED: Final = ("loc_claims", "loc_lifecycles", "loc_records", "loc_sequence",
                   "loc_capacity", "loc_state", "loc_reminders", "rel_roots", "rel_inboxes",
                   "rel_inbox_records")
#: The session setting a store's own connections carry (``connection.connect``).
WRITER_SETTING: Final = "zlink_trio.writer"
#: Counts a write of another session (see the module docstring); ``{schema}`` is the
#: prefix: the function runs in the writer's session, whatever its ``search_path``.
_FOREIGN_WRITE: Final = (
    """CREATE FUNCTION "{schema}".zlink_foreign_write() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN
        UPDATE "{schema}".zlink_meta SET value = value + 1 WHERE key = 'writes';
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER zlink_foreign_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON "{schema}".{table} FOR EACH STATEMENT
    WHEN (current_setting('""" + WRITER_SETTING + """', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION "{schema}".zlink_foreign_write()""",
)


def _add_write_counter(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> None:
    """Version 2: the ``writes`` row and the triggers that count other sessions' writes."""
    conn.execute(_FOREIGN_WRITE[0].format(schema=schema))
    for table in _COUNTED:
        conn.execute(_FOREIGN_WRITE[1].format(schema=schema, table=table))
    conn.execute("INSERT INTO zlink_meta VALUES ('writes', 0) ON CONFLICT (key) DO NOTHING")


@attrs.frozen(kw_only=True)
class PostgresOptions:
    """What a ``postgresql://`` URL selects."""

    #: The libpq URL without this backend's options (and shown without its password).
    conninfo: str
    #: The PostgreSQL schema of the tables.
    prefix: str = DEFAULT_PREFIX
    timeout: float = 5.0
    connections: int = 4

    @property
    def where(self) -> str:
        """The URL without its password, and the prefix, for messages."""
        parts = urlsplit(self.conninfo)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hosts = netloc.rpartition("@")
            netloc = f"{userinfo.partition(':')[0]}@{hosts}"
        return f"{urlunsplit(parts._replace(netloc=netloc))} (prefix {self.prefix!r})"

    @property
    def server(self) -> str:
        """``host:port/database``, for messages about the server itself."""
        parts = urlsplit(self.conninfo)
        host = parts.hostname or "localhost"
        return f"{host}:{parts.port or 5432}{parts.path or '/'}"

    @property
    def lock_key(self) -> int:
        """The advisory lock every write transaction of this prefix takes (signed 64 bit)."""
        return zlib.crc32(f"zlink_trio:{self.prefix}".encode()) - (1 << 31)


def parse_url(url: str) -> PostgresOptions:
    """Parse a ``postgresql://`` URL; :class:`InvalidConfiguration` names what is wrong."""
    parts = urlsplit(url)
    example = "e.g. postgresql://user@127.0.0.1:5432/db?prefix=zlink"
    if parts.scheme.lower() not in _SCHEMES or parts.fragment:
        raise InvalidConfiguration(f"store URL {url!r}: expected postgresql://... ({example})")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    prefix = options.pop("prefix", DEFAULT_PREFIX)
    if _PREFIX.fullmatch(prefix) is None:
        raise InvalidConfiguration(
            f"store URL {url!r}: prefix {prefix!r} must be 1-48 characters of a-z, 0-9 and "
            "'_', not starting with a digit (it names a PostgreSQL schema)")
    try:
        timeout = float(options.pop("timeout", "5"))
        connections = int(options.pop("connections", "4"))
    except ValueError:
        raise InvalidConfiguration(
            f"store URL {url!r}: timeout (seconds) and connections must be numbers, "
            f"{example}&timeout=5&connections=4") from None
    if not 0 < timeout <= 3600:
        raise InvalidConfiguration(f"store URL {url!r}: timeout must be in (0, 3600] seconds")
    if not 1 <= connections <= 64:
        raise InvalidConfiguration(f"store URL {url!r}: connections must be in 1..64")
    conninfo = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(options)))
    return PostgresOptions(conninfo=conninfo, prefix=prefix, timeout=timeout,
                           connections=connections)


def migrate(conn: psycopg.Connection[tuple[object, ...]], options: PostgresOptions) -> int:
    """Create the prefix's schema and tables if absent; the version found before.

    Runs in one transaction under the prefix's advisory lock. Raises
    :class:`InvalidConfiguration` for a schema this code does not know (newer, or
    tables of another application).
    """
    prefix = options.prefix
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (options.lock_key,))
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{prefix}"')
        conn.execute(f'SET LOCAL search_path TO "{prefix}"')
        found = conn.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND "
            "table_name = 'zlink_meta'", (prefix,)).fetchone()
        if found is None:
            others = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s",
                (prefix,)).fetchone()
            if others is not None and int(str(others[0])) > 0:
                raise InvalidConfiguration(
                    f"PostgreSQL store {options.where}: schema {prefix!r} holds tables of "
                    "another application; use another ?prefix=")
            conn.execute("CREATE TABLE zlink_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL)")
            for statement in _TABLES:
                conn.execute(statement)
            _add_write_counter(conn, prefix)
            conn.execute("INSERT INTO zlink_meta VALUES ('schema_version', %s)",
                         (SCHEMA_VERSION,))
            return 0
        row = conn.execute(
            "SELECT value FROM zlink_meta WHERE key = 'schema_version'").fetchone()
        version = 0 if row is None else int(str(row[0]))
        if version > SCHEMA_VERSION:
            raise InvalidConfiguration(
                f"PostgreSQL store {options.where} has schema version {version}, newer than "
                f"this zlink_trio knows ({SCHEMA_VERSION}); upgrade zlink_trio, or use "
                "another ?prefix=")
        if version < 1:
            raise InvalidConfiguration(
                f"PostgreSQL store {options.where}: zlink_meta has no schema version; the "
                "schema is damaged or not ours, use another ?prefix=")
        if version < 2:
            _add_write_counter(conn, prefix)
        if version < SCHEMA_VERSION:
            conn.execute("UPDATE zlink_meta SET value = %s WHERE key = 'schema_version'",
                         (SCHEMA_VERSION,))
        return version
