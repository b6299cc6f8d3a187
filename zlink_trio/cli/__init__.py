"""The ``zlink-trio`` command: one entry point for the tools that ship with the runtime.

``zlink-trio COMMAND ...`` (the console script calls :func:`main`; ``python -m
zlink_trio.cli`` is the same). Modules, one concept each:

- ``main``          -- the argparse dispatcher: ``demo`` and ``bench`` run their own
  programs, ``inspect`` and ``release`` are parsed here; exit statuses 0 / 1 / 2;
- ``inspect``       -- ``zlink-trio inspect``: list authority records page by page, or
  show one Spot's record and whether its owner's lease is live (read-only);
- ``release``       -- ``zlink-trio release``: the operator's fenced release of a Ready
  Spot whose owner's lease expired;
- ``store_command`` -- what the store subcommands share: opening a shared store (and
  refusing URLs no command can use), one readable line per typed error, exit codes,
  the record line format;
- ``__main__``      -- ``python -m zlink_trio.cli``.

This layer sits above the public API (it may import it and the layers below);
the samples sit above it, so it runs them as programs and never imports them.
"""

from zlink_trio.cli.main import main as main

__all__ = ("main",)
