"""The ``redis://host:port/db`` backend: both stores on one Redis server.

Every transaction is one Lua script (checks before the first write, no
rollback needed); keys are hash-tagged per Spot ID under ``<prefix>:loc:`` and
``<prefix>:rel:``. ``store`` tells the whole story; docs/stores.md ("Redis")
the guarantees, failures and options. The backend speaks RESP2 itself over Trio
sockets (``resp``, ``pipeline``; hiredis, when installed, only parses the replies): it
needs no Redis client library, and the
Redis Cluster backend (``store.redis_cluster``) runs on the same client.

Modules:

- ``store``       -- :class:`RedisConfig` (the URL), :class:`RedisStore` and
                     :func:`open_redis_store` (the theory of operation of the backend)
- ``location``    -- :class:`RedisLocationStore`: argument checks, one script per call
- ``reminders``   -- the reminder steps of the Location Store: one script per call, the
                     due index beside the reminders (Redis Cluster subclasses it)
- ``relocation``  -- :class:`RedisRelocationStore`: roots (SHA-256 in Python), inboxes
- ``combined``    -- :class:`RedisCombined`: the combined cold-activation transactions
- ``recovery``    -- the ``orphans`` read and ``adopt_orphan`` of startup recovery
- ``codec``       -- the key layout, argument encoding, reply decoding, refusal codes
- ``client``      -- :class:`ScriptRunner`: EVALSHA / NOSCRIPT, script SHAs, deadlines,
                     typed errors
- ``pipeline``    -- auto-pipelining: the calls of one scheduling tick share a round
                     trip; ``open_pipelines``, the nursery of a store's senders
- ``resp``        -- RESP2 framing (commands out, replies in) and the error replies
                     (``ReplyError``, ``NoScriptError``)
- ``admin``       -- one plain connection and a pattern's keys, for tools and tests
- ``lua``         -- the scripts: one prelude (shared with the Redis Cluster backend),
                     one module per script family
"""

from zlink_trio.store.redis.combined import RedisCombined as RedisCombined
from zlink_trio.store.redis.location import RedisLocationStore as RedisLocationStore
from zlink_trio.store.redis.relocation import RedisRelocationStore as RedisRelocationStore
from zlink_trio.store.redis.store import RedisConfig as RedisConfig
from zlink_trio.store.redis.store import RedisStore as RedisStore
from zlink_trio.store.redis.store import open_redis_store as open_redis_store
from zlink_trio.store.redis.store import parse_redis_url as parse_redis_url

__all__ = (
    "RedisCombined",
    "RedisConfig",
    "RedisLocationStore",
    "RedisRelocationStore",
    "RedisStore",
    "open_redis_store",
    "parse_redis_url",
)
