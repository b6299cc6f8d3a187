"""Sans-IO values and decisions: identities, errors, records, lanes, placement, route cache.

Nothing in this package imports trio, reads a clock or does I/O; time is an
argument (``now``) and randomness is injected. A test enforces the rule.

Modules:

- ``errors``      -- the typed error hierarchy (``docs/errors.md``)
- ``identity``    -- Spot IDs, stable types, Entry Spot IDs, uuid4s, NodeIds and NodeRids
- ``records``     -- authority records, fences and SpotRef (what the Location Store keeps)
- ``_fences``     -- owner, authority and reservation fences (re-exported by ``records``)
- ``_spot_ref``   -- SpotRef, the public snapshot of a location (re-exported by ``records``)
- ``_roots``      -- pointers into the Relocation Store: root receipts, creation
                     intents, recovery pointers (re-exported by ``records``)
- ``descriptor``  -- node descriptors and the store's claim on them
- ``_checks``, ``_json_fields`` -- field checks, attrs validators and ``from_json``
                     decoders the values share
- ``deadline``    -- an operation's one end, on this process's clock and the shared one
- ``lanes``       -- a Spot's two bounded FIFO lanes
- ``_lane_values`` -- lane kinds, bounds, tickets, lane statistics (re-exported by ``lanes``)
- ``timers``      -- one incarnation's timer schedule
- ``idle``        -- which Instance Spots an idle sweep examines, and what counts as idle
- ``placement``   -- choosing the Mesh, the stable type and the node for a new Spot
- ``placement_candidate`` -- :class:`PlacementCandidate`: one node as placement sees it
- ``route_cache`` -- recently resolved Ready routes by Spot ID
"""
