"""What the Client is told: the public API base URLs and the carts of this run (§9.3-4).

The runner writes it as JSON (``--config FILE``)::

    {"apis": ["http://127.0.0.1:8080", "http://127.0.0.1:8081"],
     "carts": {"success": "cart-ok-…", "noStock": "cart-no-stock-…", ...},
     "concurrentCarts": ["cart-ok-…", ...]}

It holds the HTTP edge and cart IDs only: no NodeId, NodeRid, mesh endpoint or
owner choice (§9.3-4), which :func:`forbidden_names` checks. The cart roles the
scenario needs are :data:`CART_ROLES`.
"""

from __future__ import annotations

import json
from typing import Any, Final

import attrs

__all__ = ("CART_ROLES", "ClientConfig", "forbidden_names")

#: Each cart role and the §9 item(s) that use it.
CART_ROLES: Final = {
    "success": "9.1-1, 9.1-2, 9.1-5, 9.2-4",
    "noStock": "9.1-3, 9.2-5",
    "payReject": "9.1-4",
    "duplicate": "9.2-1",
    "resume": "9.2-2 (the runner stops its continuation at InventoryReserved)",
    "terminalProjection": "9.2-3 (the runner skips its terminal projection)",
    "relocation": "9.2-6 (the runner gates it after InventoryReserved)",
    "ownerDown": "9.3-2 (the runner stops it at InventoryReserved)",
}
_FORBIDDEN: Final = ("node", "rid", "endpoint", "owner", "mesh", "ws://", "wss://",
                     "workflow-")


@attrs.frozen(kw_only=True)
class ClientConfig:
    """The Client's configuration (module docstring)."""

    apis: tuple[str, ...]
    carts: dict[str, str]
    concurrent_carts: tuple[str, ...]

    def to_json(self) -> str:
        """The config file's text."""
        return json.dumps({"apis": list(self.apis), "carts": self.carts,
                           "concurrentCarts": list(self.concurrent_carts)}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> ClientConfig:
        """Read the config file; ``ValueError`` when a cart role is missing."""
        data: dict[str, Any] = json.loads(text)
        config = cls(apis=tuple(data["apis"]), carts=dict(data["carts"]),
                     concurrent_carts=tuple(data["concurrentCarts"]))
        missing = sorted(set(CART_ROLES) - set(config.carts))
        if missing or len(config.apis) < 2:
            raise ValueError(f"client config needs two APIs and the carts {missing}")
        return config


def forbidden_names(text: str) -> list[str]:
    """The owner-choosing words (NodeId, NodeRid, endpoint, ...) that occur in ``text``."""
    lowered = text.lower()
    return [word for word in _FORBIDDEN if word in lowered]
