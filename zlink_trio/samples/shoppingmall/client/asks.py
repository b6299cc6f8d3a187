"""How the Client asks the runner for a fixture mid-scenario, without ever calling a hook.

Some §9 items need the runner between two Client steps: delete a projection
(§9.2-4), wait until an explicit close released an order (§9.2-5), run the
planned relocation (§9.2-6), terminate a Ready owner (§9.3-2). The Client
never calls a ``/self-check/*`` hook; it writes one line to standard output
and waits for the runner's answer on standard input:

``shoppingmall-client ask=<name> order=<OrderId>``
    e.g. ``ask=delete-projection``, ``ask=await-released``, ``ask=relocate``,
    ``ask=kill-owner`` -- always an OrderId this run produced.
``{"answer": "<name>", "ok": true, ...}`` (one JSON line on stdin)
    ``ok`` false carries ``"reason"``.

The same format is the report line the runner reads after the run:
``shoppingmall-client passed item=<§9 item> order=<OrderId> ...``.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Final

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ("ASK_PREFIX", "PASSED_PREFIX", "AskRefused", "Asks", "ask_line", "parse_fields",
           "stdin_line", "stdout_line")

ASK_PREFIX: Final = "shoppingmall-client ask="
PASSED_PREFIX: Final = "shoppingmall-client passed "


class AskRefused(Exception):
    """The runner answered an ask with ``ok`` false (or not at all)."""


def ask_line(name: str, **values: str) -> str:
    """The ask line for ``name`` (module docstring)."""
    return " ".join([f"{ASK_PREFIX}{name}", *(f"{k}={v}" for k, v in values.items())])


def parse_fields(line: str) -> dict[str, str]:
    """The ``key=value`` words of a Client line (``ask`` included for an ask)."""
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


async def stdin_line() -> str:
    """Read one line from standard input ('' at its end)."""
    return await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)


class Asks:
    """Sends asks and reads answers (``write``/``read`` injectable for tests)."""

    def __init__(self, write: Callable[[str], None] = stdout_line,
                 read: Callable[[], Awaitable[str]] = stdin_line, *,
                 timeout: float = 60.0) -> None:
        self._write = write
        self._read = read
        self._timeout = timeout

    async def ask(self, name: str, **values: str) -> dict[str, Any]:
        """Ask the runner for ``name``; its answer. :class:`AskRefused` if refused or silent."""
        self._write(ask_line(name, **values))
        with trio.move_on_after(self._timeout):
            text = await self._read()
            if not text:
                raise AskRefused(f"ask {name}: the runner closed standard input")
            answer = json.loads(text)
            if not isinstance(answer, dict) or answer.get("answer") != name:
                raise AskRefused(f"ask {name}: unexpected answer {text.strip()!r}")
            if not answer.get("ok"):
                raise AskRefused(f"ask {name}: refused: {answer.get('reason')}")
            return answer
        raise AskRefused(f"ask {name}: no answer within {self._timeout} s")
