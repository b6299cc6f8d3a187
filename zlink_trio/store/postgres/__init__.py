"""The ``postgresql://`` backend: both stores in one PostgreSQL schema, any number of hosts.

The transactions are the SQLite backend's (the memory oracle run over views of the
tables, ``store.sqlite.session``), run on psycopg connections under the prefix's
advisory lock: group-committed by the store's writer task, in the Trio loop when every
body named its reads, else in a worker thread. ``store`` tells the whole story; docs/stores.md
("PostgreSQL") the guarantees and options. Needs the ``postgres`` extra (psycopg 3).

Modules:

- ``store``       -- :class:`PostgresStore` and :func:`open_postgres_store`
- ``connection``  -- the connections: the writer task's group-committed, pipelined,
                     chained writes under the advisory lock, the row cache and its write
                     counter, pooled and batched reads, errors as ``StoreUnavailable``
- ``session``     -- a psycopg connection as a ``SqlSession`` (``?`` placeholders,
                     libpq's pipeline waited for in a thread or the Trio loop, reused
                     cursors)
- ``schema``      -- the URL's options and the versioned schema, created or migrated at
                     open; the write counter's triggers
"""

from zlink_trio.store.postgres.store import PostgresStore as PostgresStore
from zlink_trio.store.postgres.store import open_postgres_store as open_postgres_store

__all__ = ("PostgresStore", "open_postgres_store")
