"""Bounded log waits: poll every 100 ms, at most 300 times, never a single read.

The rule and the rows it serves are ``docs/shoppingmall.md``, "Evidence rows".

:func:`wait_for_count` re-reads one log (``read``: a callable returning its
text so far) until :func:`~.evidence.count_lines` reaches ``at_least``, and
returns the count it saw; after ``attempts`` reads it raises
:class:`LogWaitTimeout` carrying the last count. ``alive`` (optional) lets a
wait end early when the process writing the log has exited.

:func:`wait_for_counts` does the same over several logs, each read and counted
on its own at every attempt (never joined into one text), until ``done``
accepts the counts of one attempt. A row whose count must be *exact* (0 or 1)
cannot be confirmed by waiting for the line alone -- a count that is right at
the first read may only mean the line is not written yet -- so it names
``marks``: per log, a token the runner asked that node to print
(:data:`MARK`, through the ``mark`` hook) after everything it had written
before. Such a wait ends only at an attempt whose every log shows its mark, so
the counts it returns cover everything those nodes wrote before the runner
asked; it never settles on a single early read.

``sleep`` is injectable so unit tests run without real time. The same budget
serves readiness and evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.samples.shoppingmall.runner.evidence import count_lines, placeholders, render

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from pathlib import Path

__all__ = ("MARK", "POLL_ATTEMPTS", "POLL_INTERVAL", "LogWaitTimeout", "file_reader",
           "wait_for_count", "wait_for_counts")

#: Seconds between two reads of a log.
POLL_INTERVAL: Final = 0.1
#: Reads of a log before a wait gives up (30 s in all).
POLL_ATTEMPTS: Final = 300
#: The line a Workflow node prints when the runner asks it to (``mark`` hook): a
#: runner line, not an evidence row (its prefix differs from every row's).
MARK: Final = "shoppingmall-runner mark node=<NodeId> token=<Token>"


class LogWaitTimeout(Exception):
    """Raised when a log did not show a line often enough within the wait's budget."""

    def __init__(self, what: str, *, seen: int, wanted: int | str, attempts: int, why: str,
                 counts: Mapping[str, int] | None = None) -> None:
        shown = dict(counts) if counts is not None else seen
        wants = f"at least {wanted}" if isinstance(wanted, int) else wanted
        super().__init__(f"{what}: seen {shown} time(s), wanted {wants}, after "
                         f"{attempts} read(s) ({why})")
        self.what = what
        self.seen = seen
        self.wanted = wanted
        #: The last count per log (:func:`wait_for_counts`); ``{}`` for one log.
        self.counts: dict[str, int] = dict(counts or {})


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


async def wait_for_counts(reads: Mapping[str, Callable[[], str]], template: str, *,
                          done: Callable[[Mapping[str, int]], bool], wanted: str,
                          values: Mapping[str, str] | None = None,
                          marks: Mapping[str, str] | None = None,
                          interval: float = POLL_INTERVAL, attempts: int = POLL_ATTEMPTS,
                          sleep: Callable[[float], Awaitable[object]] = trio.sleep,
                          ) -> dict[str, int]:
    """Poll every log of ``reads`` until one attempt's counts satisfy ``done``.

    Each attempt reads each log once and counts ``template`` (filled with
    ``values``) in it alone. With ``marks`` (NodeId -> token) an attempt counts
    only when each of those logs also shows its :data:`MARK` line. Returns the
    counts per log of that attempt. Raises :class:`LogWaitTimeout` (``counts``:
    the last attempt's) after ``attempts`` attempts; ``wanted`` says what
    ``done`` waits for, for that message.
    """
    if attempts < 1:
        raise ValueError("a log wait reads at least once")
    values = dict(values or {})
    what = render(template, **{k: values.get(k, f"<{k}>") for k in placeholders(template)})
    counts: dict[str, int] = {}
    missing: list[str] = []
    for attempt in range(1, attempts + 1):
        counts, missing = {}, []
        for node_id, read in reads.items():
            text = read()
            counts[node_id] = count_lines(text, template, **values)
            token = (marks or {}).get(node_id)
            if token is not None and not count_lines(text, MARK, NodeId=node_id, Token=token):
                missing.append(node_id)
        if not missing and done(counts):
            return counts
        if attempt < attempts:
            await sleep(interval)
    why = f"polled every {interval} s"
    if missing:
        why += f"; no mark yet from {missing}"
    raise LogWaitTimeout(what, seen=sum(counts.values()), wanted=wanted, attempts=attempts,
                         why=why, counts=counts)
