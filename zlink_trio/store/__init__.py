"""Location and Relocation Stores: the protocols, the memory backend, ``open_store``.

Every store method is one atomic transaction; see ``protocol`` for the
contracts and ``memory`` for the in-process backend. SQLite and Redis
backends plug in behind the same protocols and conformance suite.
"""

from zlink_trio.store.memory import MemoryStore as MemoryStore
from zlink_trio.store.open import SCHEMES as SCHEMES
from zlink_trio.store.open import open_store as open_store
from zlink_trio.store.protocol import LocationStore as LocationStore
from zlink_trio.store.protocol import RelocationStore as RelocationStore
from zlink_trio.store.protocol import Store as Store
from zlink_trio.store.values import MAX_INBOX_READ as MAX_INBOX_READ
from zlink_trio.store.values import MAX_PAGE_BYTES as MAX_PAGE_BYTES
from zlink_trio.store.values import MAX_PAGE_SIZE as MAX_PAGE_SIZE
from zlink_trio.store.values import AuthorityExists as AuthorityExists
from zlink_trio.store.values import InboxRecord as InboxRecord
from zlink_trio.store.values import LocationStatistics as LocationStatistics
from zlink_trio.store.values import OwnerAlive as OwnerAlive
from zlink_trio.store.values import Page as Page
from zlink_trio.store.values import RelocationStatistics as RelocationStatistics
from zlink_trio.store.values import RootIntegrityError as RootIntegrityError

__all__ = (
    "MAX_INBOX_READ",
    "MAX_PAGE_BYTES",
    "MAX_PAGE_SIZE",
    "SCHEMES",
    "AuthorityExists",
    "InboxRecord",
    "LocationStatistics",
    "LocationStore",
    "MemoryStore",
    "OwnerAlive",
    "Page",
    "RelocationStatistics",
    "RelocationStore",
    "RootIntegrityError",
    "Store",
    "open_store",
)
