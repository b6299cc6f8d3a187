"""Location and Relocation Stores: the protocols, their backends, ``open_store``.

Every store method is one atomic transaction that checks every precondition
before its first write; ``open_store(url)`` chooses the backend by URL scheme,
and every backend passes one conformance suite (``tests/store/``).

Modules:

- ``protocol``  -- the contracts: :class:`LocationStore`, :class:`RelocationStore`
                   and :class:`Store` (the two with their combined transactions)
- ``combined_protocol`` -- :class:`CombinedTransactions`: a cold activation's three
                   groups of steps, one transaction each, with the merged steps' guarantees;
                   ``ImmediateTransactions``: the same (and ``find``) never suspending, on a
                   store with nothing to wait for (``memory://``), asked with ``immediate_of``
- ``relocation_steps`` -- :class:`RelocationSteps`: the planned-move part of the
                   Location Store contract (begin, seal, accept relay-ready, commit, abort)
- ``state_steps`` -- :class:`StateSteps`: a Spot's durable state, the part of the
                   Location Store contract that only the current owner writes
- ``reminder_steps`` -- :class:`ReminderSteps`: durable reminders, set by the owner and
                   delivered by the nodes that take them when due
- ``values``    -- the frozen values and errors the protocols return or raise
                   (:class:`Page`, :class:`InboxRecord`, statistics, :class:`AuthorityExists`, ...)
- ``open``      -- :func:`open_store` and the URL schemes (:data:`SCHEMES`); with
                   ``relocation=URL`` the Relocation Store comes from a second backend
- ``memory``    -- the ``memory://`` backend: the rules over in-process dicts (and their
                   immediate transactions, ``MemoryStore.immediate``)
- ``dead_lifecycle`` -- :func:`release_dead_node`: end what the expired lifecycles of a
                   NodeId still own (restart recovery, ``zlink-trio release --node``)
- ``separate``  -- :class:`SeparateSteps` and :func:`with_combined`: the combined
                   transactions as separate calls, for a store without its own;
                   :class:`SplitStore`: the two halves in two backends
- ``timed``     -- :func:`~zlink_trio.store.timed.timed_store`: every call timed by
                   backend, part and method (``open_node(metrics=...)`` only)
- ``rules/``    -- the pure transaction functions every backend matches (the oracle)
- ``sqlite/``   -- the ``sqlite:///path.db`` backend (one file, processes of one host);
                   its transactions are written against ``sqlite/session.py``'s protocols
                   and serve ``postgres/`` too
- ``postgres/`` -- the ``postgresql://user@host/db`` backend: ``sqlite/``'s transactions on
                   PostgreSQL, writes under the prefix's advisory lock (any number of hosts)
- ``redis/``    -- the ``redis://host:port/db`` backend (its own RESP2 client)
- ``redis_cluster/`` -- the ``redis+cluster://host:port,...`` backend: ``redis/``'s scripts
                   per bucket (one hash slot each) on Redis Cluster
"""

from zlink_trio.store.combined_protocol import CombinedTransactions as CombinedTransactions
from zlink_trio.store.memory import MemoryStore as MemoryStore
from zlink_trio.store.open import SCHEMES as SCHEMES
from zlink_trio.store.open import open_store as open_store
from zlink_trio.store.protocol import LocationStore as LocationStore
from zlink_trio.store.protocol import RelocationStore as RelocationStore
from zlink_trio.store.protocol import Store as Store
from zlink_trio.store.protocol import StorePair as StorePair
from zlink_trio.store.relocation_steps import RelocationSteps as RelocationSteps
from zlink_trio.store.separate import SeparateSteps as SeparateSteps
from zlink_trio.store.separate import SplitStore as SplitStore
from zlink_trio.store.separate import with_combined as with_combined
from zlink_trio.store.values import MAX_INBOX_READ as MAX_INBOX_READ
from zlink_trio.store.values import MAX_PAGE_BYTES as MAX_PAGE_BYTES
from zlink_trio.store.values import MAX_PAGE_SIZE as MAX_PAGE_SIZE
from zlink_trio.store.values import AuthorityExists as AuthorityExists
from zlink_trio.store.values import FirstRecordCleanup as FirstRecordCleanup
from zlink_trio.store.values import InboxRecord as InboxRecord
from zlink_trio.store.values import LocationStatistics as LocationStatistics
from zlink_trio.store.values import MembersRemain as MembersRemain
from zlink_trio.store.values import NodeIdInUse as NodeIdInUse
from zlink_trio.store.values import OwnerAlive as OwnerAlive
from zlink_trio.store.values import Page as Page
from zlink_trio.store.values import RelocationStatistics as RelocationStatistics
from zlink_trio.store.values import RootIntegrityError as RootIntegrityError
from zlink_trio.store.values import TargetAlive as TargetAlive

__all__ = (
    "MAX_INBOX_READ",
    "MAX_PAGE_BYTES",
    "MAX_PAGE_SIZE",
    "SCHEMES",
    "AuthorityExists",
    "CombinedTransactions",
    "FirstRecordCleanup",
    "InboxRecord",
    "LocationStatistics",
    "LocationStore",
    "MembersRemain",
    "MemoryStore",
    "NodeIdInUse",
    "OwnerAlive",
    "Page",
    "RelocationStatistics",
    "RelocationSteps",
    "RelocationStore",
    "RootIntegrityError",
    "SeparateSteps",
    "SplitStore",
    "Store",
    "StorePair",
    "TargetAlive",
    "open_store",
    "with_combined",
)
