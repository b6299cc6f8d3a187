"""The Client's report lines: how the runner learns which order each self-check item used.

After each item the Client writes one line to standard output::

    shoppingmall-client passed item=<item, e.g. 9.2-4> order=<OrderId> ...

and the runner, once the Client has finished, reads the event stream and
external-module calls of exactly that order (``runner.verify``). The Client
never calls a ``/self-check/*`` hook and never waits for the runner: every
fixture it uses was prepared before it started (``runner.prepare``), and its
configuration names the orders (``config``).
"""

from __future__ import annotations

import sys
from typing import Final

__all__ = ("PASSED_PREFIX", "parse_fields", "stdout_line")

PASSED_PREFIX: Final = "shoppingmall-client passed "


def parse_fields(line: str) -> dict[str, str]:
    """The ``key=value`` words of a Client line."""
    fields: dict[str, str] = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value
    return fields


def stdout_line(line: str) -> None:
    """Write one line to standard output and flush."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
