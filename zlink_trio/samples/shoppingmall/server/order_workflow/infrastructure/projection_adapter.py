"""The OrderReadModelStore as the application's Projection, and the lookup the HTTP edge uses.

The document is the fold's OrderState as the framework's typed JSON
codec writes it (camelCase), tagged with the stream version it folds; the
store never overwrites a newer version (``read_model_store``). GetOrderStateReq
is served from here: :func:`read_order_state` decodes the document the
workflow wrote, and progresses or records nothing. The Spot has no
GetOrderState handler -- a lookup must not activate an order owner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.application import order_state_of
from zlink_trio.samples.shoppingmall.shared.contracts import OrderState

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.server.order_workflow.domain import OrderAggregate
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (  # noqa: E501
        OrderReadModelStore,
    )

__all__ = ("ReadModelProjection", "read_order_state")


class ReadModelProjection:
    """:class:`~..application.Projection` over an :class:`OrderReadModelStore`."""

    def __init__(self, store: OrderReadModelStore, codec: zl.MessageCodec) -> None:
        self._store = store
        self._codec = codec

    async def put(self, state: OrderAggregate) -> None:
        """See :meth:`Projection.put`."""
        document = self._codec.to_json(order_state_of(state)).decode()
        await self._store.put(state.order_id, state.version, document)


async def read_order_state(store: OrderReadModelStore, order_id: str, *,
                           codec: zl.MessageCodec | None = None) -> OrderState | None:
    """The order's OrderState as the read model holds it; ``None`` when it holds none.

    For CommerceApi's GetOrderStateReq. Raises :class:`zlink_trio.RemoteProtocolError`
    for a document that is not an OrderState, and what the store raises.
    """
    found = await store.get(order_id)
    if found is None:
        return None
    return (codec or zl.MessageCodec()).from_json(found.document.encode(), OrderState)
