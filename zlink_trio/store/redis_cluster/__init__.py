"""The ``redis+cluster://host:port[,host:port...]`` backend: both stores on a Redis Cluster.

A Spot's keys and its bucket's counters share one hash slot, node claims and capacity
units another; each Spot transaction is the single-Redis backend's Lua script run in
the Spot's bucket with facts from the nodes slot (``store`` tells the whole story;
docs/stores.md, "Redis Cluster", the guarantees). It runs on the single-Redis backend's
own client (``store.redis.pipeline``, ``store.redis.resp``) and its Lua prelude
(``store.redis.lua.prelude``, on the bucket layout).

Modules:

- ``store``       -- :class:`ClusterConfig` (the URL), :class:`RedisClusterStore`,
                     :func:`open_redis_cluster_store` (the theory of operation)
- ``keys``        -- the key layout: buckets, the nodes slot, reminder partitions'
                     slots, ``hash_slot``
- ``lua``         -- bucket scripts (the single-Redis bodies on the prelude's bucket
                     layout), node scripts and hint scripts
- ``runner``      -- :class:`ClusterRunner`: facts, capacity units, load shifts, deadlines
- ``router``      -- the slot map (``CLUSTER SHARDS``), per-master auto-pipelines,
                     MOVED / ASK / TRYAGAIN
- ``location``    -- :class:`ClusterLocationStore`: split claims, reads over buckets
- ``membership``  -- Actor membership across two buckets: member marks, their protocol
- ``reminders``   -- durable reminders: in the Spot's bucket, their due index as hints in
                     each reminder partition's slot, the take by hints and its fixes
- ``carry``       -- SpotWide moves: the Spot's record decides, its members follow
- ``sweep``       -- reads over every bucket: one script per master, per bucket if not
- ``relocation``  -- the Relocation Store and the combined transactions
"""

from zlink_trio.store.redis_cluster.store import ClusterConfig as ClusterConfig
from zlink_trio.store.redis_cluster.store import RedisClusterStore as RedisClusterStore
from zlink_trio.store.redis_cluster.store import (
    open_redis_cluster_store as open_redis_cluster_store,
)
from zlink_trio.store.redis_cluster.store import parse_cluster_url as parse_cluster_url

__all__ = ("ClusterConfig", "RedisClusterStore", "open_redis_cluster_store",
           "parse_cluster_url")
