"""Startup recovery on Redis: the ``orphans`` read and the ``adopt_orphan`` transaction.

Theory of operation
-------------------
The scripts are ``lua.recovery``'s; the oracle is ``store.rules.recovery``, whose
argument checks run here before any round trip.

- ``adopt_orphan`` is one script, ``recovery_adopt_orphan``; its refusals map to the
  oracle's typed errors.
- ``orphans`` pages through ``recovery_orphans``, a read-only script that walks the
  store-wide sorted set of Spot IDs (``meta:{m}:ids``) from ``after`` for at most
  ``budget`` IDs and returns the orphans of the given dead lifecycles. Python finds those
  lifecycles first (the ``descriptors`` script lists every claim, live or not)
  and calls the page script until it has ``limit`` orphans or the IDs are
  exhausted. Cost: O(all Spot IDs in the store) per full listing, in pages of
  :data:`SCAN_BUDGET` IDs, each page one short atomic script (the server is not
  blocked for long); the listing as a whole is not one snapshot, which is fine
  for a startup scan because an orphan of a dead lifecycle only ever changes by
  this node's own adoption or abort. A per-node index would make it O(orphans)
  but would have to be kept by Reserve, CommitReady and every state change --
  left for later (docs/stores.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.store.redis.codec import decode_claim, decode_record, raise_status, text
from zlink_trio.store.rules.recovery import check_adopt_args, check_orphans_args

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zlink_trio.core.records import AuthorityRecord, OwnerFence
    from zlink_trio.store.redis.client import ScriptRunner
    from zlink_trio.store.redis.codec import Keys

__all__ = ("SCAN_BUDGET", "redis_adopt_orphan", "redis_orphans")

#: Spot IDs one ``recovery_orphans`` page script examines at most.
SCAN_BUDGET: Final = 1000

_ADOPT_REFUSALS: Final = {
    "not_orphan": "it is not an incomplete activation (Creating, or Ready with a recovery "
                  "pointer); a steady Ready owner is released by an operator, never taken over",
    "same_owner": "the new owner is the old owner",
    "old_claim_gone": "the claim of its previous owner is gone, so its NodeId cannot be "
                      "proved; an operator must release the Spot",
    "other_node": "it belongs to another NodeId (no takeover by another node)",
}


def _seq(value: object) -> Sequence[Any]:
    assert isinstance(value, list), value
    return value


async def redis_orphans(runner: ScriptRunner, keys: Keys, node_id: str, *, now: float,
                        after: str | None, limit: int,
                        every_state: bool = False) -> list[AuthorityRecord]:
    """``LocationStore.orphans`` on Redis (see the module docstring for the cost).

    ``every_state``: ``LocationStore.dead_owned`` instead (every non-Entry record).
    """
    check_orphans_args(node_id, now=now, after=after, limit=limit)
    claims = [decode_claim(values) for values in _seq(await runner.script(
        "orphans (claims)", "descriptors", [keys.meta("claims")], [], write=False))]
    owners: list[str | int] = []
    for claim in claims:
        if claim.descriptor.node_id == node_id and not claim.is_live(now):
            owners += [str(claim.descriptor.node_rid), str(claim.lifecycle_generation)]
    if not owners:
        return []
    found: list[AuthorityRecord] = []
    cursor = after or ""
    while len(found) < limit:
        reply = _seq(await runner.script(
            f"orphans of NodeId {node_id!r}", "recovery_orphans", [keys.meta("ids")],
            [cursor, SCAN_BUDGET, limit - len(found), "owned" if every_state else "orphans",
             *owners], write=False))
        found += [decode_record(flat) for flat in reply[2:]]
        cursor = text(reply[0])
        if int(reply[1]) == 1 or not cursor:
            break
    return found


async def redis_adopt_orphan(runner: ScriptRunner, keys: Keys, spot_id: str, *,
                             object_generation: int, owner_generation: int,
                             old_owner: OwnerFence, new_owner: OwnerFence,
                             now: float) -> AuthorityRecord:
    """``LocationStore.adopt_orphan`` on Redis: one script."""
    check_adopt_args(spot_id, object_generation=object_generation,
                     owner_generation=owner_generation, old_owner=old_owner,
                     new_owner=new_owner, now=now)
    what = f"adopt_orphan of {spot_id!r}"
    reply = _seq(await runner.script(
        what, "recovery_adopt_orphan", [keys.spot(spot_id)],
        [object_generation, owner_generation, str(old_owner.node_rid),
         old_owner.lifecycle_generation, str(new_owner.node_rid),
         new_owner.lifecycle_generation, repr(float(now)), str(owner_generation + 1)]))
    code = text(reply[0])
    if code == "GONE":
        raise StaleFence(f"{what}: generation {object_generation} is gone (now "
                         f"{text(reply[1]) or 'Missing'}); nothing to adopt")
    if code == "ADOPT":
        raise InvalidOperation(f"{what}: {_ADOPT_REFUSALS.get(text(reply[1]), text(reply[1]))}")
    if code == "OLD_LIVE":
        raise Unavailable(f"{what}: the previous owner {text(reply[1])} lifecycle "
                          f"{text(reply[2])} still holds a live lease (until "
                          f"{text(reply[3])}); retry after it expires")
    raise_status(reply, what)
    return decode_record(reply[1])
