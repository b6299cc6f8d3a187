"""Bounded log waits: poll every 100 ms, at most 300 times, never a single read (§10.1).

:func:`wait_for_count` re-reads a log (``read``: a callable returning its
text so far) until :func:`~.evidence.count_lines` reaches ``at_least``, and
returns the count it saw; after ``attempts`` reads it raises
:class:`LogWaitTimeout` carrying the last count. ``sleep`` is injectable so
unit tests run without real time; ``alive`` (optional) lets a wait end early
with :class:`LogWaitTimeout` when the process writing the log has exited.
The same budget serves readiness and evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.samples.shoppingmall.runner.evidence import count_lines, placeholders, render

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from pathlib import Path

__all__ = ("POLL_ATTEMPTS", "POLL_INTERVAL", "LogWaitTimeout", "file_reader", "wait_for_count")

#: Seconds between two reads of a log.
POLL_INTERVAL: Final = 0.1
#: Reads of a log before a wait gives up (30 s in all).
POLL_ATTEMPTS: Final = 300


class LogWaitTimeout(Exception):
    """Raised when a log did not show a line often enough within the wait's budget."""

    def __init__(self, what: str, *, seen: int, wanted: int, attempts: int, why: str) -> None:
        super().__init__(f"{what}: seen {seen} time(s), wanted at least {wanted}, after "
                         f"{attempts} read(s) ({why})")
        self.what = what
        self.seen = seen
        self.wanted = wanted


def file_reader(path: Path) -> Callable[[], str]:
    """A ``read`` for :func:`wait_for_count`: the file's text so far ('' before it exists)."""
    def read() -> str:
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
    return read


async def wait_for_count(read: Callable[[], str], template: str, *, at_least: int = 1,
                         interval: float = POLL_INTERVAL, attempts: int = POLL_ATTEMPTS,
                         sleep: Callable[[float], Awaitable[object]] = trio.sleep,
                         alive: Callable[[], bool] | None = None,
                         values: Mapping[str, str] | None = None) -> int:
    """Poll ``read()`` until ``template`` (filled with ``values``) counts ``at_least``.

    ``values`` fill the template's placeholders (others match any token).
    Returns the count seen at that read. Raises :class:`LogWaitTimeout` after
    ``attempts`` reads, or as soon as ``alive()`` is false and the count is short.
    """
    if attempts < 1:
        raise ValueError("a log wait reads at least once")
    values = dict(values or {})
    what = render(template, **{k: values.get(k, f"<{k}>") for k in placeholders(template)})
    seen = 0
    for attempt in range(1, attempts + 1):
        seen = count_lines(read(), template, **values)
        if seen >= at_least:
            return seen
        if alive is not None and not alive():
            raise LogWaitTimeout(what, seen=seen, wanted=at_least, attempts=attempt,
                                 why="the process writing the log has exited")
        if attempt < attempts:
            await sleep(interval)
    raise LogWaitTimeout(what, seen=seen, wanted=at_least, attempts=attempts,
                         why=f"polled every {interval} s")
