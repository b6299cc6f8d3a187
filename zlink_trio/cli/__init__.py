"""The ``zlink-trio`` command: the console script and ``python -m zlink_trio.cli`` call main().

Modules, one concept each:

- ``main``          -- the argparse dispatcher: every subcommand, exit statuses 0 / 1 / 2
- ``inspect``       -- ``zlink-trio inspect``: read a shared store's authority records
- ``release``       -- ``zlink-trio release``: fenced release of a Spot whose owner's lease expired
- ``charts``        -- ``zlink-trio statecharts``: list the charts, render one (md / svg), trace
- ``nodes``         -- ``zlink-trio nodes``: the live nodes, their leases and Spot counts
- ``operators``     -- ``zlink-trio relocate`` / ``drain``: through a client-only node
- ``dashboard``     -- ``zlink-trio dashboard``: the command serving the live web page
- ``dashboard_app`` -- its Starlette app: the page (``dashboard_page/``) and the JSON it polls
- ``doctor``        -- ``zlink-trio doctor``: is a store fit for nodes (reachable, schema,
                       clock, durability)
- ``store_command`` -- what store subcommands share: opening a store, one line per error, formats
- ``__main__``      -- ``python -m zlink_trio.cli``

``demo`` and ``bench`` run ``python -m zlink_trio.samples.demo`` and ``python -m
zlink_trio.bench`` as child programs. This layer sits above the public API (it may import
it and the layers below); the samples sit above it, so it never imports them.
"""

from zlink_trio.cli.main import main as main

__all__ = ("main",)
