"""The Client (program and scenario): the 15-item self-check over the public API only.

The items are those of ``docs/shoppingmall.md``, "The Client's self-check".

- ``program`` -- the entry point: read the config, run the scenario, print the marker
- ``config`` -- what the Client is told: API base URLs, this run's carts and the orders
  the runner prepared before it started (no node names)
- ``api`` -- the public order API over httpx, and bounded status polling
- ``scenario`` -- the 15 items, 9.1-1 to 9.3-4, in order
- ``reports`` -- the ``passed item=...`` lines the runner reads afterwards
"""
