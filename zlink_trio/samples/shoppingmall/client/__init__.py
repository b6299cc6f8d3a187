"""The Client (§8 Client/Program, Client/Scenario): the §9 self-check over the public API only.

- ``program`` -- the entry point: read the config, run the scenario, print the marker
- ``config`` -- what the Client is told: API base URLs, this run's carts and the orders
  the runner prepared before it started (no node names)
- ``api`` -- the public order API over httpx, and bounded status polling
- ``scenario`` -- the 15 items of §9.1-§9.3, in order
- ``reports`` -- the ``passed item=...`` lines the runner reads afterwards
"""
