"""What the Client is told: the public API base URLs, the carts and prepared orders.

The runner writes it as JSON (``--config FILE``)::

    {"apis": ["http://127.0.0.1:8080", "http://127.0.0.1:8081"],
     "carts": {"success": "cart-ok-…", "noStock": "cart-no-stock-…", ...},
     "concurrentCarts": ["cart-ok-…", ...],
     "orders": {"rebuild": "<OrderId>", "released": "<OrderId>", ...}}

``orders`` are the OrderIds of the fixtures the runner prepared before the
Client started (the runner prepares fixtures before the Client starts and reads
evidence after it finishes, never while it runs), one per :data:`ORDER_ROLES`
entry -- values this run produced. It holds the HTTP edge, cart IDs and OrderIds
only: no NodeId, NodeRid, mesh endpoint or owner choice (item 9.3-4: a caller
never chooses an owner), which :func:`forbidden_names` checks. The cart roles
the scenario and the runner use are :data:`CART_ROLES`.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ("CART_ROLES", "ORDER_ROLES", "ClientConfig", "config_names_and_values",
           "forbidden_names")

_WORDS: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")

#: Each cart role and the self-check item(s) that use it.
CART_ROLES: Final = {
    "success": "9.1-1, 9.1-2, 9.1-5",
    "noStock": "9.1-3",
    "payReject": "9.1-4",
    "duplicate": "9.2-1",
    "resume": "9.2-2 (the runner stops its continuation at InventoryReserved)",
    "terminalProjection": "9.2-3 (the runner skips its terminal projection)",
    "rebuild": "9.2-4 (the runner's order; it deletes the projection)",
    "released": "9.2-5 (the runner's no-stock order; it waits for the release)",
    "relocation": "9.2-6 (the runner's order, gated after InventoryReserved and moved)",
    "failureBoundary": "9.3-2 (the runner's order, stopped at InventoryReserved; its "
                       "owner is terminated)",
}
#: Each order the runner prepares before the Client starts, and the self-check item using it.
ORDER_ROLES: Final = {
    "rebuild": "9.2-4: Confirmed, then its projection deleted",
    "released": "9.2-5: Failed, and its authority released by the explicit close",
    "relocation": "9.2-6: relocated after InventoryReserved, then let go on",
    "failureBoundary": "9.3-2: at InventoryReserved, its Ready owner's process terminated",
}
#: Words of a field name that would choose or name an owner (camelCase split).
_FORBIDDEN_WORDS: Final = frozenset({"node", "rid", "endpoint", "owner", "mesh", "host"})
#: Text in a value that would name a node or a mesh address.
_FORBIDDEN_TEXT: Final = ("ws://", "wss://", "workflow-", "api-a", "api-b")


@attrs.frozen(kw_only=True)
class ClientConfig:
    """The Client's configuration (module docstring)."""

    apis: tuple[str, ...]
    carts: dict[str, str]
    concurrent_carts: tuple[str, ...]
    orders: dict[str, str] = attrs.field(factory=dict)

    def to_json(self) -> str:
        """The config file's text."""
        return json.dumps({"apis": list(self.apis), "carts": self.carts,
                           "concurrentCarts": list(self.concurrent_carts),
                           "orders": self.orders}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> ClientConfig:
        """Read the config file; ``ValueError`` when a cart role or prepared order is missing."""
        data: dict[str, Any] = json.loads(text)
        config = cls(apis=tuple(data["apis"]), carts=dict(data["carts"]),
                     concurrent_carts=tuple(data["concurrentCarts"]),
                     orders=dict(data.get("orders", {})))
        missing = sorted(set(CART_ROLES) - set(config.carts))
        unprepared = sorted(set(ORDER_ROLES) - set(config.orders))
        if missing or unprepared or len(config.apis) < 2:
            raise ValueError(f"client config needs two APIs, the carts {missing} and the "
                             f"prepared orders {unprepared}")
        return config


def forbidden_names(names: Iterable[str], values: Iterable[str] = ()) -> list[str]:
    """The field ``names`` and ``values`` that would name a node, NodeRid or endpoint.

    A name is split into its camelCase words (``orderId`` is ``order`` + ``id``),
    so only a whole word such as ``node`` or ``rid`` counts.
    """
    found = [name for name in names
             if {w.lower() for w in _WORDS.findall(name)} & _FORBIDDEN_WORDS]
    found += [value for value in values if any(t in value.lower() for t in _FORBIDDEN_TEXT)]
    return found


def config_names_and_values(config: ClientConfig) -> tuple[list[str], list[str]]:
    """Every field name and text value of ``config``'s JSON."""
    data = json.loads(config.to_json())
    names = [*data, *data["carts"], *data["orders"]]
    values = [*data["apis"], *data["carts"].values(), *data["concurrentCarts"],
              *data["orders"].values()]
    return names, values
