"""The ``sqlite:///path.db`` backend: both stores in one SQLite file on one host.

WAL mode, every write a ``BEGIN IMMEDIATE`` transaction that runs the memory
oracle (``store.rules``) over lazy views of the tables; never blocks the Trio
loop on another process's lock. ``store`` tells the whole story; docs/stores.md
("SQLite") the guarantees and options.

Modules:

- ``store``       -- :class:`SqliteStore` and :func:`open_sqlite_store` (the theory of
                     operation of the backend)
- ``location``    -- :class:`SqliteLocationStore`: the oracle over the ``loc_*`` tables
                     (durable state in ``loc_state``, reminders in ``loc_reminders``,
                     taken through its wake index)
- ``relocation``  -- :class:`SqliteRelocationStore`: roots, inboxes and statistics in the
                     ``rel_*`` tables, and the inbox bodies the combined transactions reuse
- ``combined``    -- :class:`SqliteCombined`: the combined cold-activation transactions
- ``view``        -- the ``loc_*`` tables seen as a ``LocationState`` (lazy :class:`Rows`)
- ``members``     -- a container's Actor members: two index ranges of ``loc_records``
- ``group_rows``  -- the sequence, claim and capacity rows a group commit shares (both
                     SQL backends)
- ``rowcache``    -- rows kept between a connection's write transactions (both SQL
                     backends), and the rows a PostgreSQL group loads ahead
- ``codec``       -- the stored JSON of records and claims, and the rows of reminders
- ``session``     -- ``SqlSession`` / ``SqlDatabase``: what the transaction bodies ask of a
                     connection (a ``sqlite3.Connection``, or ``store.postgres``' session:
                     the bodies above serve the PostgreSQL backend too), and
                     ``Prefetch``, the rows a body names before it runs
- ``connection``  -- one connection: transactions, dispatch (inline / thread), group
                     commit
- ``errors``      -- SQLite errors mapped to typed ones
- ``checkpoint``  -- WAL checkpoints in a worker thread (inline dispatch)
- ``schema``      -- URL options and the versioned schema, created or migrated at open
"""

from zlink_trio.store.sqlite.combined import SqliteCombined as SqliteCombined
from zlink_trio.store.sqlite.location import SqliteLocationStore as SqliteLocationStore
from zlink_trio.store.sqlite.relocation import SqliteRelocationStore as SqliteRelocationStore
from zlink_trio.store.sqlite.store import SqliteStore as SqliteStore
from zlink_trio.store.sqlite.store import open_sqlite_store as open_sqlite_store

__all__ = (
    "SqliteCombined",
    "SqliteLocationStore",
    "SqliteRelocationStore",
    "SqliteStore",
    "open_sqlite_store",
)
