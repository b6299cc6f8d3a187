"""Key layout of the Redis Cluster backend: buckets, each one hash slot, and the nodes slot.

Theory of operation
-------------------
A Redis Cluster script may touch the keys of **one** hash slot only, so the layout
groups keys by what one transaction touches. Every Spot ID and every root ref maps to
one of ``B`` **buckets** (``crc16(text) % B``; ``B`` from the URL's ``?buckets=``,
default 1024, fixed for the life of a deployment); a bucket's keys share the hash
tag ``{b<k>}``, so they live in one slot. ``P`` = ``<prefix>:loc:``, ``R`` =
``<prefix>:rel:``::

    P {b<k>}:spot:<spot_id>          hash: one authority record (codec's fields)
    P {b<k>}:ids                     zset (score 0): the bucket's Spot IDs, for Query
    P {b<k>}:counts                  hash: the bucket's records per state
    P {b<k>}:gen                     the bucket's last issued ObjectGeneration
    P {b<k>}:members:<container>     set: member marks ``<token>:<actor_id>`` (a superset
                                     of the Actors whose records name the container)
    P {b<k>}:mtok                    the bucket's last issued mark token number
    P {b<k>}:bans:<actor_id>         set: mark tokens no join of the Actor may use
    P {b<k>}:state:<spot_id>         hash: a Spot's durable state (``v g d``)
    P {b<k>}:reminders:<spot_id>     hash: a Spot's reminders (``store.redis.reminders``)
    P {b<k>}:rwm                     hash: reminder partition -> the bucket's watermark,
                                     the last hint token a take swept (``reminders``)
    R {b<k>}:inbox:<spot_id>:<gen>   one incarnation's inbox (``[:log]``: its records)
    R {b<k>}:root:<ref>              one root's bytes (bucket of the ref; a creation's
                                     root is in its Spot's, ``<ref>@b<k>``)
    R {b<k>}:stats                   hash: the bucket's Relocation Store counts
    P {nodes}:claims                 hash: ``<rid>|<mesh>`` -> one claim as JSON
    P {nodes}:lifecycles             hash: NodeId -> last lifecycle generation
    P {nodes}:load:<lc>:<mesh>:<rid> hash: pending / active capacity units
    P {nodes}:config                 hash: ``buckets`` (checked at every open)
    P {rp<p>}:due:<mesh>             zset: due hints of one Mesh's reminders in reminder
                                     partition ``p`` (score at most the wake)
    P {rp<p>}:tok:<mesh>             hash: hint member -> token of its last hint write
    P {rp<p>}:seq                    the partition's last issued hint token

So a Spot's record, its inboxes, its state and reminders and the counters its
transactions change share a slot; node claims, lifecycles and loads share another (low
rate: claims, renewals, capacity units); each reminder partition's due hints a third
(``reminders`` has the protocol that keeps them sound across the two). ObjectGeneration
is per bucket -- see ``lua`` and docs/decisions.md. A container's member marks and tokens
live in its bucket, an Actor's bans in the Actor's: ``membership`` has the protocol that
keeps them sound across the two.
"""

from __future__ import annotations

from binascii import crc_hqx
from typing import TYPE_CHECKING, Final

from zlink_trio.store.redis.codec import Keys

if TYPE_CHECKING:
    from zlink_trio.core.identity import NodeRid

__all__ = ("NODES_TAG", "SLOTS", "ClusterKeys", "hash_slot")

#: Hash slots of a Redis Cluster.
SLOTS: Final = 16384
NODES_TAG: Final = "nodes"
#: Spot IDs and refs whose bucket a ``ClusterKeys`` remembers.
_RECENT_BUCKETS: Final = 4096


def hash_slot(key: str | bytes) -> int:
    """The hash slot of ``key`` (Redis Cluster's CRC16 of the hash tag, or the whole key)."""
    raw = key.encode("utf-8") if isinstance(key, str) else key
    start = raw.find(b"{")
    if start > -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1:end]
    return crc_hqx(raw, 0) % SLOTS


def tag_of(key: str) -> str:
    """The hash tag (text between the first braces) of one of this layout's keys."""
    start = key.index("{")
    return key[start + 1:key.index("}", start)]


class ClusterKeys(Keys):
    """The key names of one deployment ``prefix`` with ``buckets`` buckets."""

    def __init__(self, prefix: str, buckets: int) -> None:
        super().__init__(prefix)
        self.buckets: Final = buckets
        self.prefix: Final = prefix
        self._meta: dict[int, tuple[str, ...]] = {}
        #: Recent Spot IDs and refs -> their bucket: a cold activation names its Spot's
        #: keys in every call (bounded: cleared when full).
        self._recent: dict[str, int] = {}

    def bucket(self, text: str) -> int:
        """The bucket of a Spot ID or a root ref."""
        bucket = self._recent.get(text)
        if bucket is None:
            if len(self._recent) >= _RECENT_BUCKETS:
                self._recent.clear()
            bucket = self._recent[text] = crc_hqx(text.encode("utf-8"), 0) % self.buckets
        return bucket

    def bucket_tag(self, bucket: int) -> str:
        return f"b{bucket}"

    def _b(self, text: str) -> str:
        return f"{{b{self.bucket(text)}}}"

    def spot(self, spot_id: str) -> str:
        return f"{self.location}{self._b(spot_id)}:spot:{spot_id}"

    def root(self, ref: str) -> str:
        return f"{self.relocation}{{b{self.root_bucket(ref)}}}:root:{ref}"

    def root_bucket(self, ref: str) -> int:
        """The bucket of root ``ref``: the one it names (``<ref>@b<k>``, a creation's root
        kept beside its Spot's record: :meth:`root_ref_beside`), else the ref's own."""
        _, at, index = ref.rpartition("@b")
        if at and index.isascii() and index.isdigit() and int(index) < self.buckets:
            return int(index)
        return self.bucket(ref)

    def root_ref_beside(self, ref: str, spot_id: str) -> str:
        """The ref of content ref ``ref`` kept in ``spot_id``'s bucket, so that one bucket
        script reserves the Spot with its root and one deletes it with the cursor move."""
        return f"{ref}@b{self.bucket(spot_id)}"

    def inbox(self, spot_id: str, object_generation: int) -> tuple[str, str]:
        base = f"{self.relocation}{self._b(spot_id)}:inbox:{spot_id}:{object_generation}"
        return base, f"{base}:log"

    def bucket_meta(self, bucket: int) -> tuple[str, ...]:
        """The keys every script of ``bucket`` declares besides its own: ids, counts,
        gen, owners (the units each lifecycle holds here) and dead (the lifecycles
        RemoveDeadClaims marked, last: :meth:`dead`) of the Location Store, stats of the
        Relocation Store -- so a resharding migration of the slot answers TRYAGAIN rather
        than running a script on half of a bucket (built once per bucket)."""
        meta = self._meta.get(bucket)
        if meta is None:
            tag = f"{{b{bucket}}}"
            meta = self._meta[bucket] = (
                f"{self.location}{tag}:ids", f"{self.location}{tag}:counts",
                f"{self.location}{tag}:gen", f"{self.relocation}{tag}:stats",
                f"{self.location}{tag}:owners", f"{self.location}{tag}:dead")
        return meta

    def dead(self, bucket: int) -> str:
        """The hash of ``bucket``'s dead marks: NodeId -> the newest lifecycle of it that
        RemoveDeadClaims marked dead there (every older one is dead too)."""
        return self.bucket_meta(bucket)[-1]

    def members(self, container: str) -> str:
        """The member marks of ``container`` (in its bucket)."""
        return f"{self.location}{self._b(container)}:members:{container}"

    def tokens(self, container: str) -> str:
        """The mark token counter of ``container``'s bucket."""
        return f"{self.location}{self._b(container)}:mtok"

    def state(self, spot_id: str) -> str:
        """The durable state of ``spot_id`` (in its bucket)."""
        return f"{self.location}{self._b(spot_id)}:state:{spot_id}"

    def reminders(self, spot_id: str) -> str:
        """The reminders of ``spot_id`` (in its bucket)."""
        return f"{self.location}{self._b(spot_id)}:reminders:{spot_id}"

    def watermarks(self, spot_id: str) -> str:
        """The reminder hint watermarks of ``spot_id``'s bucket (``reminders``)."""
        return f"{self.location}{self._b(spot_id)}:rwm"

    def partition_tag(self, partition: int) -> str:
        """The hash tag of reminder ``partition``'s keys."""
        return f"rp{partition}"

    def reminder_index(self, mesh: str, partition: int) -> str:
        """The due hints of ``mesh`` in reminder ``partition`` (the partition's slot)."""
        return f"{self.location}{{{self.partition_tag(partition)}}}:due:{mesh}"

    def reminder_tokens(self, mesh: str, partition: int) -> str:
        """The token of each hint's last write (beside :meth:`reminder_index`)."""
        return f"{self.location}{{{self.partition_tag(partition)}}}:tok:{mesh}"

    def reminder_tokens_issued(self, partition: int) -> str:
        """The last hint token issued in reminder ``partition`` (every Mesh's)."""
        return f"{self.location}{{{self.partition_tag(partition)}}}:seq"

    def bans(self, actor_id: str) -> str:
        """The banned mark tokens of ``actor_id`` (in its bucket)."""
        return f"{self.location}{self._b(actor_id)}:bans:{actor_id}"

    def ids(self, bucket: int) -> str:
        return f"{self.location}{{b{bucket}}}:ids"

    def nodes(self, name: str) -> str:
        """A key of the nodes slot: ``claims``, ``lifecycles``, ``config``."""
        return f"{self.location}{{{NODES_TAG}}}:{name}"

    def claim(self, mesh: str, node_rid: NodeRid) -> str:
        """The claims hash (one field per claim: :meth:`claim_field`)."""
        return self.nodes("claims")

    def load(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int) -> str:
        return f"{self.location}{{{NODES_TAG}}}:load:{lifecycle_generation}:{mesh}:{node_rid}"

    def meta(self, name: str) -> str:
        return self.nodes(name)

    def patterns(self) -> tuple[str, str]:
        return f"{self.prefix}:loc:*", f"{self.prefix}:rel:*"


def claim_field(mesh: str, node_rid: NodeRid | str) -> str:
    """The field of one claim in the claims hash."""
    return f"{node_rid}|{mesh}"
