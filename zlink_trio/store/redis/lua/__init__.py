"""The Redis backend's Lua scripts: one prelude, one module per script family.

Every script is :data:`prelude.PRELUDE` followed by its body
(:func:`prelude.script`), so each helper is defined once and every script gets
the same arguments first (``ARGV[1]`` / ``ARGV[2]``: the Location and Relocation
key prefixes). Each script is one store transaction: every check before the
first write (Redis has no rollback), a status table back.

Modules:

- ``authority``   -- the SpotAuthority chart as Lua, built from the compiled chart:
                     state and event names, tags, ``step`` (part of the prelude)
- ``prelude``     -- the shared helpers: records and claims, counters, owner checks,
                     the ObjectGeneration sequence, and the bodies several scripts run
- ``location``    -- the Location Store's transactions (claims, authority, moves,
                     Query, statistics)
- ``operator``    -- the operator's ReleaseExpired
- ``recovery``    -- startup recovery: AdoptOrphan and the orphans page script
- ``relocation``  -- the Relocation Store's transactions (roots, inboxes, statistics)
- ``combined``    -- the combined cold-activation transactions over both key spaces

:data:`SCRIPTS` is every script by the name the backend calls it.
"""

from typing import Final

from zlink_trio.store.redis.lua.combined import COMBINED_SCRIPTS
from zlink_trio.store.redis.lua.location import LOCATION_SCRIPTS
from zlink_trio.store.redis.lua.operator import OPERATOR_SCRIPTS
from zlink_trio.store.redis.lua.recovery import RECOVERY_SCRIPTS
from zlink_trio.store.redis.lua.relocation import RELOCATION_SCRIPTS

__all__ = ("SCRIPTS",)

#: Name -> full Lua source of every script the Redis backend registers.
SCRIPTS: Final = {**LOCATION_SCRIPTS, **OPERATOR_SCRIPTS, **RECOVERY_SCRIPTS,
                  **RELOCATION_SCRIPTS, **COMBINED_SCRIPTS}
