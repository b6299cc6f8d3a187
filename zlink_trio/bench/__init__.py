"""The benchmark: ``python -m zlink_trio.bench`` (also ``zlink-trio bench``).

Every figure beside its physical baseline, in one run; the keys are a contract
(``docs/performance.md`` names each one). Modules, one concept each:

- ``suite``    -- the whole run: every figure (``run``), printed as a table or one JSON line
- ``local``    -- local requests beside a raw memory channel, convergence, memory; the Spots
- ``footprint`` -- resident memory per idle Spot (RSS delta / N), in a fresh process
- ``growth``   -- how cost grows: one node at 10k / 100k / 1M resident Spots (its own command)
- ``scale``    -- cold activations with 1, 2 and 4 node processes on one store (its own command)
- ``many_nodes`` -- 2 / 20 / 200 nodes on one store: at rest (store calls and CPU per
                  node), and linked (cold activations, warm calls, a join and a leave
                  seen by every node) (its own command)
- ``cold``     -- cold activations per store backend, with their store calls and transactions
- ``reminders`` -- durable reminders per backend: delivered per second, lag at 10,000
- ``stores``   -- private stores per backend, store-call counting, Reserve/CommitReady timing
- ``remote``   -- Spot requests between two processes beside raw websocket and TCP echoes
- ``peer``     -- the other process of the remote figures (started by ``remote``)
- ``relocation`` -- planned moves per backend, idle and under load; lost/duplicated messages
- ``follow``   -- the Message Follow relay rate beside direct remote requests
- ``moving``   -- the relocation figures' recording Spot, three nodes on one store, the tally
- ``raw_ws``   -- the raw websocket echo, the only user of trio-websocket (the ``bench`` extra)
- ``raw_tcp``  -- the raw Trio TCP echo of length-prefixed frames (the remote figures' floor)
- ``raw_spawn`` -- the raw Trio spawn of a task with its own channel (the cold activations' floor)
- ``output``   -- how every benchmark program prints its figures
- ``child``    -- a benchmark program run in a fresh process, and the figures it prints
- ``__main__`` -- ``python -m zlink_trio.bench``

This layer sits above the public API: it may import it and the layers below, never the
command line or the samples. Nothing here is a test: no figure is asserted.
"""
