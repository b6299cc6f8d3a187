"""The Inventory and Payment modules as the application's Effects, with the repeat check.

Each call passes the module the step's deterministic ID and this node's
NodeId as ``caller`` (the runner sees which owner called before and after a
planned relocation). The module answers its first result for a repeated ID;
after every call the adapter reads the order's module evidence and writes
``shoppingmall-order external-effect-repeated`` for any effect that ran twice
(``effect_calls.repeated_effects``), once per order -- a line the runner
expects 0 times.
The payment method comes from the start command or the CommerceStateStore
(``commerce_adapter``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.samples.shoppingmall.server.order_workflow.domain import EffectResult
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.commerce_adapter import (
    UNKNOWN_PAYMENT_METHOD,
    find_payment_method,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.effect_calls import (
    repeated_effects,
)

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.server.order_workflow.domain import (
        AuthorizePayment,
        ReleaseInventory,
        ReserveInventory,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.effect_calls import (
        EffectResult as ModuleResult,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.evidence import (
        Evidence,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.inventory import (
        Inventory,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.payment import (
        Payment,
    )
    from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
        CommerceStateStore,
    )

__all__ = ("ModuleEffects",)


def _result(answer: ModuleResult) -> EffectResult:
    return EffectResult(accepted=answer.accepted, reason=answer.reason)


class ModuleEffects:
    """:class:`~..application.Effects` over the Inventory and Payment stand-ins."""

    def __init__(self, *, inventory: Inventory, payment: Payment, commerce: CommerceStateStore,
                 node_id: str, evidence: Evidence) -> None:
        self._inventory = inventory
        self._payment = payment
        self._commerce = commerce
        self._node_id = node_id
        self._evidence = evidence
        self._reported: set[str] = set()

    async def reserve(self, step: ReserveInventory) -> EffectResult:
        """See :meth:`Effects.reserve`."""
        answer = await self._inventory.reserve(step.order_id, step.reservation_id, step.lines,
                                               caller=self._node_id)
        await self._check(step.order_id)
        return _result(answer)

    async def authorize(self, step: AuthorizePayment, *, payment_method_id: str | None,
                        source_command_ids: frozenset[str]) -> EffectResult:
        """See :meth:`Effects.authorize`."""
        method = await find_payment_method(self._commerce, step.cart_id, source_command_ids,
                                           requested=payment_method_id)
        if method is None:
            return EffectResult(accepted=False, reason=UNKNOWN_PAYMENT_METHOD)
        answer = await self._payment.authorize(step.order_id, step.payment_id, method,
                                               step.amount, step.currency, caller=self._node_id)
        await self._check(step.order_id)
        return _result(answer)

    async def release(self, step: ReleaseInventory) -> EffectResult:
        """See :meth:`Effects.release`."""
        answer = await self._inventory.release(step.order_id, step.reservation_id, step.reason,
                                               caller=self._node_id)
        await self._check(step.order_id)
        return _result(answer)

    async def _check(self, order_id: str) -> None:
        calls = (*await self._inventory.calls(order_id), *await self._payment.calls(order_id))
        if repeated_effects(calls) and order_id not in self._reported:
            self._reported.add(order_id)
            self._evidence.external_effect_repeated(order_id)
