"""The runner's fixture hooks (items 9.2-2, 9.2-3, 9.2-6): a control object a node may be given.

Theory of operation
-------------------
A :class:`FixtureControl` implements the application's
:class:`~..application.ContinuationControl`: the background continuation asks
it how to go on before every step (``application.continuation``). It exists
only when the process runner starts a Workflow node in runner mode and hands
one to ``run_workflow_node(fixtures=...)``; a node started without it runs
with ``RUN_FREELY``. Nothing in the message contracts, the Spot's handlers or
the HTTP edge reaches it: the runner drives it beside the Client, through
whatever runner-only hook the process exposes (``/self-check/*``).

The runner arms one rule per fixture, for an order it names by OrderId or by
the CartId it seeded (a value of this run, never a fixed one); a rule armed by cart binds
to the first order of that cart that reaches it.

==========================  =====================================================
:class:`Fixture`            the background continuation of a matching order ...
==========================  =====================================================
``STOP_AT_RESERVED``        ends at InventoryReserved: the Client's
                            ContinueOrderWorkflowReq resumes from payment (9.2-2)
``SKIP_TERMINAL_PROJECTION`` appends the terminal event but leaves the read model
                            at the state before it: the Client's continue
                            reflects the terminal fold (9.2-3)
``GATE_AFTER_RESERVED``     parks at InventoryReserved until :meth:`open_gate`:
                            the runner relocates the order meanwhile; the parked
                            turn is a timer, so it fires at the target, whose
                            control (another process, gate open) lets it go on
                            at AuthorizePaymentReq (9.2-6)
==========================  =====================================================

:meth:`wait_parked` (or :meth:`parked_orders`) tells the runner when a gated
order is parked, i.e. right after its InventoryReservedEvent was appended.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import attrs
import trio

from zlink_trio.samples.shoppingmall.server.order_workflow.application import Pace
from zlink_trio.samples.shoppingmall.server.order_workflow.domain import (
    ConfirmOrder,
    FailOrder,
    Phase,
)

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.server.order_workflow.domain import (
        OrderAggregate,
        Step,
    )

__all__ = ("Fixture", "FixtureControl")


class Fixture(enum.Enum):
    """The runner's interruptions of the background continuation (module docstring)."""

    STOP_AT_RESERVED = "stop-at-reserved"
    SKIP_TERMINAL_PROJECTION = "skip-terminal-projection"
    GATE_AFTER_RESERVED = "gate-after-reserved"


@attrs.define
class _Rule:
    fixture: Fixture
    order_id: str | None
    cart_id: str | None
    parked: trio.Event = attrs.field(factory=trio.Event)

    def matches(self, state: OrderAggregate) -> bool:
        if self.order_id is not None:
            return self.order_id == state.order_id
        if self.cart_id is not None and self.cart_id == state.cart_id:
            self.order_id = state.order_id  # bind to the first order of the cart
            return True
        return False


class FixtureControl:
    """The runner-only :class:`ContinuationControl` (module docstring). Trio-thread only."""

    def __init__(self, *, park_poll: float = 0.05) -> None:
        self._park_poll = park_poll
        self._rules: list[_Rule] = []
        self._gate_open = False

    @property
    def park_poll(self) -> float:
        """Seconds between two looks of a parked continuation."""
        return self._park_poll

    def arm(self, fixture: Fixture, *, order_id: str | None = None,
            cart_id: str | None = None) -> None:
        """Arm ``fixture`` for the order ``order_id``, or the first order of ``cart_id``.

        Raises ``ValueError`` unless exactly one of them is given. Arming
        :attr:`Fixture.GATE_AFTER_RESERVED` closes this node's gate.
        """
        if (order_id is None) == (cart_id is None):
            raise ValueError("arm a fixture for exactly one of order_id and cart_id")
        self._rules.append(_Rule(fixture, order_id, cart_id))
        if fixture is Fixture.GATE_AFTER_RESERVED:
            self._gate_open = False

    def open_gate(self) -> None:
        """Let every parked continuation of this node go on at its next look."""
        self._gate_open = True

    def disarm(self) -> None:
        """Forget every rule (and open the gate)."""
        self._rules.clear()
        self._gate_open = True

    def parked_orders(self) -> tuple[str, ...]:
        """The OrderIds whose continuation parked at this node's gate so far."""
        return tuple(rule.order_id for rule in self._rules
                     if rule.parked.is_set() and rule.order_id is not None)

    async def wait_parked(self, *, order_id: str | None = None,
                          cart_id: str | None = None) -> str:
        """Wait until a gated order (by OrderId or CartId, else any) parked; its OrderId."""
        while True:
            for rule in self._rules:
                if rule.fixture is Fixture.GATE_AFTER_RESERVED and (
                        (order_id is None or rule.order_id == order_id) and
                        (cart_id is None or rule.cart_id == cart_id)):
                    await rule.parked.wait()
                    assert rule.order_id is not None
                    return rule.order_id
            await trio.sleep(self._park_poll)  # the rule is not armed yet

    def _rule(self, fixture: Fixture, state: OrderAggregate) -> _Rule | None:
        for rule in self._rules:
            if rule.fixture is fixture and rule.matches(state):
                return rule
        return None

    def pace(self, state: OrderAggregate) -> Pace:
        """See :meth:`ContinuationControl.pace`."""
        if state.phase is not Phase.RESERVED:
            return Pace.GO
        if self._rule(Fixture.STOP_AT_RESERVED, state) is not None:
            return Pace.STOP
        gate = self._rule(Fixture.GATE_AFTER_RESERVED, state)
        if gate is not None and not self._gate_open:
            gate.parked.set()
            return Pace.PARK
        return Pace.GO

    def skip_projection(self, state: OrderAggregate, step: Step) -> bool:
        """See :meth:`ContinuationControl.skip_projection`: only a terminal step's."""
        return isinstance(step, (ConfirmOrder, FailOrder)) and \
            self._rule(Fixture.SKIP_TERMINAL_PROJECTION, state) is not None
