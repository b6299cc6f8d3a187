"""The runner's own observation after the Client: the event streams, effects and §10.1 rows.

:func:`verify_items` reads, through the hooks, the event stream and external
module calls of each order the Client reported (``shoppingmall-client passed
item=<n> order=<id>``) and checks what the Client cannot see (§9: "the runner
separately observes the event stream and external effects").
:func:`verify_rows` counts the §10.1 rows in each node log separately, with
the bounded waits of ``log_wait``. Each returns a list of problems (empty:
all passed) and says one ``shoppingmall-runner`` line per check.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from zlink_trio.samples.shoppingmall.runner import evidence as ev
from zlink_trio.samples.shoppingmall.runner.log_wait import LogWaitTimeout, wait_for_count
from zlink_trio.samples.shoppingmall.runner.topology import API_NODES, WORKFLOW_NODES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from zlink_trio.samples.shoppingmall.runner.ask_desk import Facts
    from zlink_trio.samples.shoppingmall.runner.hooks_client import Hooks

__all__ = ("ACTIVATED", "FAILURE_INVENTORY", "FAILURE_PAYMENT", "SUCCESS", "verify_items",
           "verify_rows")

SUCCESS: Final = ["OrderStartedEvent", "InventoryReservedEvent", "PaymentAuthorizedEvent",
                  "OrderConfirmedEvent"]
FAILURE_INVENTORY: Final = ["OrderStartedEvent", "InventoryReservationFailedEvent",
                            "OrderFailedEvent"]
FAILURE_PAYMENT: Final = ["OrderStartedEvent", "InventoryReservedEvent", "PaymentFailedEvent",
                          "InventoryReleasedEvent", "OrderFailedEvent"]
#: The Workflow's factory-execution line (§7.3 evidence; not a §10.1 row).
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
        killed = facts.killed.get(order_id)
        others = [n for g, n in activations(logs, order_id) if n != killed]
        if killed is None or others:
            problems.append(f"owner {killed} terminated; activated elsewhere: {others}")
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


async def _row(what: str, reads: Mapping[str, Callable[[], str]], template: str, *,
               at_least: int, exactly: int | None, say: Callable[[str], None],
               **values: str) -> str | None:
    """Wait for one row over some logs, each counted on its own; a problem or ``None``."""
    counts: dict[str, int] = {}
    for node_id, read in reads.items():
        try:
            counts[node_id] = await wait_for_count(read, template, at_least=at_least,
                                                   values=values)
        except LogWaitTimeout as exc:
            counts[node_id] = exc.seen
    total = sum(counts.values())
    ok = all(c >= at_least for c in counts.values()) if exactly is None else total == exactly
    say(f"shoppingmall-runner row={what} counts={counts} {'ok' if ok else 'FAILED'}")
    return None if ok else f"§10.1 row {what!r}: counts {counts}"


async def verify_rows(reads: Mapping[str, Callable[[], str]], facts: Facts,
                      say: Callable[[str], None]) -> list[str]:
    """The §10.1 server evidence rows (module docstring); the problems."""
    workflow = {n: reads[n] for n in WORKFLOW_NODES}
    problems = [
        await _row("order-started", workflow, ev.ORDER_STARTED, at_least=1, exactly=None,
                   say=say),
        await _api_row(reads, say),
    ]
    moved = facts.relocation
    if moved is None:
        problems.append("§10.1 row 'order-replayed': no planned relocation ran")
    else:
        # One wait over the target's log; the total over every Workflow log must be 1.
        await _row("order-replayed-wait", {moved.target: reads[moved.target]},
                   ev.ORDER_REPLAYED, at_least=1, exactly=None, say=say,
                   OrderId=moved.order_id, N=moved.generation)
        problems.append(await _row("order-replayed", workflow, ev.ORDER_REPLAYED, at_least=0,
                                   exactly=1, say=say, OrderId=moved.order_id,
                                   N=moved.generation))
    problems.append(await _row("external-effect-repeated", workflow, ev.EFFECT_REPEATED,
                               at_least=0, exactly=0, say=say))
    return [p for p in problems if p is not None]


async def _api_row(reads: Mapping[str, Callable[[], str]], say: Callable[[str], None],
                   ) -> str | None:
    counts = {n: 0 for n in API_NODES}
    for node_id in API_NODES:
        try:
            counts[node_id] = await wait_for_count(reads[node_id], ev.API_EVIDENCE,
                                                   attempts=1 if any(counts.values()) else 300)
        except LogWaitTimeout as exc:
            counts[node_id] = exc.seen
    ok = sum(counts.values()) >= 1
    say(f"shoppingmall-runner row=api-evidence counts={counts} {'ok' if ok else 'FAILED'}")
    return None if ok else f"§10.1 row 'api-evidence': counts {counts}"
