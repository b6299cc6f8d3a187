"""The runner's own observation after the Client: the event streams, effects and evidence rows.

:func:`settle` first asks each sample Workflow node to print a mark line
(``log_wait.MARK``, through the ``mark`` hook) and polls (100 ms x 300) until
every mark is in its log; it returns the logs of that read, so the activation
lines the item checks use cover everything the nodes wrote before.
:func:`verify_items` reads, through the hooks, the event stream and external
module calls of each order the Client reported (``shoppingmall-client passed
item=<n> order=<id>``) and checks what the Client cannot see: the order's event
stream and external effects (the runner's column of ``docs/shoppingmall.md``,
"The Client's self-check").
:func:`verify_rebuilt` compares the rebuilt order's lookup with the state the
runner saw before it deleted the projection (item 9.2-4: the same OrderState).
:func:`verify_rows` counts the evidence rows in each node log separately, every
row with a bounded poll (``log_wait.wait_for_counts``), never a single read: an
at-least row until its count is reached, an exact row (``order-replayed`` 1,
``external-effect-repeated`` 0) until each Workflow log shows its mark. Each
returns a list of problems (empty: all passed) and says one
``shoppingmall-runner`` line per check.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any, Final

import attrs

from zlink_trio.samples.shoppingmall.client.api import ApiError
from zlink_trio.samples.shoppingmall.runner import evidence as ev
from zlink_trio.samples.shoppingmall.runner.log_wait import (
    MARK,
    LogWaitTimeout,
    wait_for_counts,
)
from zlink_trio.samples.shoppingmall.runner.topology import API_NODES, WORKFLOW_NODES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from zlink_trio.samples.shoppingmall.client.api import OrderApi
    from zlink_trio.samples.shoppingmall.runner.hooks_client import Hooks
    from zlink_trio.samples.shoppingmall.runner.prepare import Facts

__all__ = ("ACTIVATED", "FAILURE_INVENTORY", "FAILURE_PAYMENT", "SUCCESS", "settle",
           "verify_items", "verify_rebuilt", "verify_rows")

SUCCESS: Final = ["OrderStartedEvent", "InventoryReservedEvent", "PaymentAuthorizedEvent",
                  "OrderConfirmedEvent"]
FAILURE_INVENTORY: Final = ["OrderStartedEvent", "InventoryReservationFailedEvent",
                            "OrderFailedEvent"]
FAILURE_PAYMENT: Final = ["OrderStartedEvent", "InventoryReservedEvent", "PaymentFailedEvent",
                          "InventoryReleasedEvent", "OrderFailedEvent"]
#: The Workflow's factory-execution line (a relocation's evidence; not an evidence row).
ACTIVATED: Final = re.compile(
    r"shoppingmall-workflow activated order=(\S+) generation=(\S+) node=(\S+) version=\S+")
_EXPECTED_EVENTS: Final = {
    "9.1-2": SUCCESS, "9.1-3": FAILURE_INVENTORY, "9.1-4": FAILURE_PAYMENT, "9.1-5": SUCCESS,
    "9.2-1": SUCCESS, "9.2-2": SUCCESS, "9.2-3": SUCCESS, "9.2-4": SUCCESS, "9.2-6": SUCCESS,
    "9.3-1": SUCCESS, "9.3-2": SUCCESS[:2], "9.3-3": [],
}


def _effects(data: dict[str, Any], module: str, operation: str) -> list[dict[str, Any]]:
    return [c for c in data["calls"] if c["module"] == module and c["operation"] == operation
            and c["effect"]]


def activations(logs: Mapping[str, str], order_id: str) -> list[tuple[str, str]]:
    """(generation, NodeId) of every factory execution of ``order_id``, over the node logs."""
    found: list[tuple[str, str]] = []
    for text in logs.values():
        for line in text.splitlines():
            match = ACTIVATED.fullmatch(line.strip())
            if match and match.group(1) == order_id:
                found.append((match.group(2), match.group(3)))
    return found


def _check_item(item: str, order_id: str, data: dict[str, Any], facts: Facts,
                logs: Mapping[str, str]) -> list[str]:
    problems: list[str] = []
    events = data["events"]
    wanted = _EXPECTED_EVENTS.get(item)
    if wanted is not None and events != wanted:
        problems.append(f"events {events}, wanted {wanted}")
    if item in ("9.1-2", "9.2-1", "9.2-2", "9.2-6", "9.3-1") and \
            len(_effects(data, "inventory", "reserve")) != 1:
        problems.append("ReserveInventory took effect other than once")
    if item == "9.1-3" and [c for c in data["calls"] if c["module"] == "payment"]:
        problems.append("the Payment module was called for a no-stock order")
    if item == "9.2-5" and len({g for g, _ in activations(logs, order_id)}) < 2:
        problems.append(f"no new generation activated: {activations(logs, order_id)}")
    if item == "9.2-6":
        moved = facts.relocation
        reserves = _effects(data, "inventory", "reserve")
        pays = _effects(data, "payment", "authorize")
        if moved is None or moved.order_id != order_id:
            problems.append("the runner did not relocate this order")
        elif [c["caller"] for c in reserves] != [moved.source] or \
                [c["caller"] for c in pays] != [moved.target]:
            problems.append(f"reserve by {[c['caller'] for c in reserves]}, authorize by "
                            f"{[c['caller'] for c in pays]}; wanted {moved.source} then "
                            f"{moved.target}")
    if item == "9.3-2":
        kill = facts.kill
        found = activations(logs, order_id)
        if kill is None or kill.order_id != order_id:
            problems.append("the runner terminated no owner of this order")
        elif (kill.generation, kill.node) not in found or any(
                g != kill.generation or n not in (kill.source, kill.node) for g, n in found):
            # a re-creation anywhere would be a factory run under a larger generation
            problems.append(f"owner {kill.node} (generation {kill.generation}, placed at "
                            f"{kill.source}) terminated; activations {found}")
    return problems


async def verify_items(reports: list[dict[str, str]], hooks: Hooks, facts: Facts,
                       logs: Mapping[str, str], say: Callable[[str], None]) -> list[str]:
    """Check each reported item's stream and effects (module docstring); the problems."""
    problems: list[str] = []
    for report in reports:
        item, order_id = report.get("item", "?"), report.get("order")
        if not order_id:
            continue
        data = await hooks.evidence(order_id)
        found = _check_item(item, order_id, data, facts, logs)
        say(f"shoppingmall-runner observed item={item} order={order_id} "
            f"events={len(data['events'])} {'ok' if not found else 'FAILED'}")
        problems += [f"item {item} order {order_id}: {p}" for p in found]
    return problems


async def settle(hooks: Hooks, reads: Mapping[str, Callable[[], str]],
                 say: Callable[[str], None]) -> tuple[dict[str, str], dict[str, str]]:
    """Mark each sample Workflow log and wait until every mark is in (module docstring).

    Returns ``(marks, logs)``: the token per Workflow NodeId, and every log of
    ``reads`` as read once the marks were all in. Raises :class:`LogWaitTimeout`
    when a mark is missing after 100 ms x 300.
    """
    marks = {node_id: f"{uuid.uuid4().hex}" for node_id in WORKFLOW_NODES}
    for node_id, token in marks.items():
        await hooks.mark(node_id, token)
    marked = {n: reads[n] for n in WORKFLOW_NODES}
    await wait_for_counts(marked, MARK, done=lambda counts: True, wanted="its mark",
                          marks=marks)
    say(f"shoppingmall-runner marked nodes={sorted(marks)}")
    return marks, {node_id: read() for node_id, read in reads.items()}


async def verify_rebuilt(api: OrderApi, facts: Facts, say: Callable[[str], None]) -> list[str]:
    """The rebuilt order reads the state it had before its projection was deleted."""
    before = facts.rebuilt_before
    if before is None:
        return ["item 9.2-4: the runner deleted no projection"]
    try:
        now = await api.get(before.order_id)
    except ApiError as exc:
        now_text, ok = str(exc), False
    else:
        now_text = str(now)
        ok = attrs.evolve(now, updated_at_unix_ms=0) == attrs.evolve(before,
                                                                     updated_at_unix_ms=0)
    say(f"shoppingmall-runner observed item=9.2-4-same-state order={before.order_id} "
        f"{'ok' if ok else 'FAILED'}")
    return [] if ok else [f"item 9.2-4 order {before.order_id}: reads {now_text} after the "
                          f"rebuild, read {before} before its projection was deleted"]


async def _row(what: str, reads: Mapping[str, Callable[[], str]], template: str, *,
               at_least: int | None = None, exactly: int | None = None,
               marks: Mapping[str, str] | None = None, say: Callable[[str], None],
               **values: str) -> str | None:
    """Poll one row over some logs, each counted on its own; a problem or ``None``.

    ``at_least``: every log needs that many. ``exactly``: the total over the
    logs must be that, counted at a read where each log shows its ``marks``
    line (and, for a positive count, once the total reached it).
    """
    if at_least is not None:
        def done(counts: Mapping[str, int]) -> bool:
            return all(c >= at_least for c in counts.values())
        wanted = f"at least {at_least} in each log"
    else:
        assert exactly is not None
        def done(counts: Mapping[str, int]) -> bool:
            return sum(counts.values()) >= exactly
        wanted = f"exactly {exactly} over the logs, with each log's mark"
    try:
        counts = await wait_for_counts(reads, template, done=done, wanted=wanted,
                                       values=values, marks=marks)
        ok = exactly is None or sum(counts.values()) == exactly
    except LogWaitTimeout as exc:
        counts, ok = exc.counts, False
    say(f"shoppingmall-runner row={what} counts={counts} {'ok' if ok else 'FAILED'}")
    return None if ok else f"evidence row {what!r}: counts {counts}"


async def verify_rows(reads: Mapping[str, Callable[[], str]], facts: Facts,
                      say: Callable[[str], None], *, marks: Mapping[str, str]) -> list[str]:
    """The server's evidence rows (module docstring); the problems.

    ``marks``: the token each sample Workflow node printed (:func:`settle`).
    """
    workflow = {n: reads[n] for n in WORKFLOW_NODES}
    problems = [
        await _row("order-started", workflow, ev.ORDER_STARTED, at_least=1, say=say),
        await _api_row(reads, say),
    ]
    moved = facts.relocation
    if moved is None:
        problems.append("evidence row 'order-replayed': no planned relocation ran")
    else:
        problems.append(await _row("order-replayed", workflow, ev.ORDER_REPLAYED, exactly=1,
                                   marks=marks, say=say, OrderId=moved.order_id,
                                   N=moved.generation))
    problems.append(await _row("external-effect-repeated", workflow, ev.EFFECT_REPEATED,
                               exactly=0, marks=marks, say=say))
    return [p for p in problems if p is not None]


async def _api_row(reads: Mapping[str, Callable[[], str]], say: Callable[[str], None],
                   ) -> str | None:
    """At least one line over both API logs, each read and counted on its own at every poll."""
    api = {n: reads[n] for n in API_NODES}
    try:
        counts = await wait_for_counts(api, ev.API_EVIDENCE,
                                       done=lambda c: sum(c.values()) >= 1,
                                       wanted="at least 1 over both API logs")
        ok = True
    except LogWaitTimeout as exc:
        counts, ok = exc.counts, False
    say(f"shoppingmall-runner row=api-evidence counts={counts} {'ok' if ok else 'FAILED'}")
    return None if ok else f"evidence row 'api-evidence': counts {counts}"
