"""The Redis backend's Lua scripts: one prelude, one module per script family.

Every script is the prelude (``prelude``) followed by its body
(:func:`prelude.script`), so each helper is defined once and every script gets
the same arguments first (``ARGV[1]`` / ``ARGV[2]``: the Location and Relocation
key prefixes). Each script is one store transaction: every check before the
first write (Redis has no rollback), a status table back. The Redis Cluster backend
runs the same bodies on the prelude's bucket layout (``store.redis_cluster.lua``).

Modules:

- ``authority``   -- the SpotAuthority chart as Lua, built from the compiled chart:
                     state and event names, tags, ``step`` (part of the prelude)
- ``prelude``     -- the shared helpers: records and claims, counters, owner checks,
                     the ObjectGeneration sequence, and the bodies several scripts run;
                     the helpers that depend on where keys live, per layout
- ``location``    -- the Location Store's transactions (claims, authority, moves,
                     Query, statistics)
- ``operator``    -- the operator's ReleaseExpired
- ``recovery``    -- startup recovery: AdoptOrphan and the orphans page script
- ``relocation``  -- the Relocation Store's transactions (roots, inboxes, statistics)
- ``combined``    -- the combined cold-activation transactions over both key spaces
- ``state``       -- a Spot's durable state, written under its authority's fence
- ``reminders``   -- a Spot's durable reminders, written under its authority's fence, and
                     their take (one Redis; Redis Cluster takes through due hints)

:data:`BODIES` is every script's body and :data:`SCRIPTS` every full script, by the
name the backend calls it.
"""

from typing import Final

from zlink_trio.store.redis.lua.combined import COMBINED_BODIES
from zlink_trio.store.redis.lua.location import LOCATION_BODIES
from zlink_trio.store.redis.lua.operator import OPERATOR_BODIES
from zlink_trio.store.redis.lua.prelude import script
from zlink_trio.store.redis.lua.recovery import RECOVERY_BODIES
from zlink_trio.store.redis.lua.relocation import RELOCATION_BODIES
from zlink_trio.store.redis.lua.reminders import REMINDER_BODIES
from zlink_trio.store.redis.lua.state import STATE_BODIES

__all__ = ("BODIES", "SCRIPTS")

#: Name -> Lua body (without the prelude) of every script the Redis backend registers.
BODIES: Final = {**LOCATION_BODIES, **OPERATOR_BODIES, **RECOVERY_BODIES,
                 **RELOCATION_BODIES, **COMBINED_BODIES, **STATE_BODIES,
                 **REMINDER_BODIES}

#: Name -> full Lua source (the prelude, then the body) of every script.
SCRIPTS: Final = {name: script(body) for name, body in BODIES.items()}
