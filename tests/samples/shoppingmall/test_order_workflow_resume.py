"""Continue, rebuild and the lifecycle boundary (items 9.2-2 to 9.2-5, 9.3-3), two nodes.

The runner's fixtures interrupt only the background continuation
(``FixtureControl``); the explicit commands go through ``workflow_calls`` as
CommerceApi would call them.
"""

from __future__ import annotations

import re

import trio
from workflow_harness import CALL, TIMEOUT, open_harness

from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.fixture_control import (
    Fixture,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.workflow_calls import (
    continue_order_workflow,
    rebuild_order_projection,
    start_order_workflow,
)
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ContinueOrderWorkflowReq,
    OrderStatus,
    RebuildOrderProjectionReq,
)

SUCCESS = ["OrderStartedEvent", "InventoryReservedEvent", "PaymentAuthorizedEvent",
           "OrderConfirmedEvent"]


def _continue(order_id: str) -> ContinueOrderWorkflowReq:
    return ContinueOrderWorkflowReq(order_id=order_id, source_command_id=f"continue:{order_id}")


def _rebuild(order_id: str) -> RebuildOrderProjectionReq:
    return RebuildOrderProjectionReq(order_id=order_id, source_command_id=f"rebuild:{order_id}")


async def test_continue_resumes_an_order_interrupted_at_inventory_reserved_from_payment(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="r1")
            h.fixtures["workflow-a"].arm(Fixture.STOP_AT_RESERVED, cart_id="r1")
            req = h.start_req("r1")
            await start_order_workflow(h.a.client, req, seconds=CALL)
            await h.wait_status(req.order_id, OrderStatus.INVENTORY_RESERVED)
            assert await h.payment.calls(req.order_id) == ()
            state = await continue_order_workflow(h.b.client, _continue(req.order_id),
                                                  seconds=CALL)
            assert state is not None
            assert state.status is OrderStatus.CONFIRMED
            assert (await h.state(req.order_id)) == state
            assert await h.event_types(req.order_id) == SUCCESS
            reserves = await h.inventory.calls(req.order_id)
            assert [c.effect for c in reserves] == [True]  # the reservation was not run again
            assert [c.effect for c in await h.payment.calls(req.order_id)] == [True]
            # A second continue is harmless: the same state, nothing recorded.
            again = await continue_order_workflow(h.a.client, _continue(req.order_id),
                                                  seconds=CALL)
            assert again == state
            assert await h.event_types(req.order_id) == SUCCESS


async def test_continue_reflects_a_terminal_event_whose_projection_was_interrupted(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="r2")
            h.fixtures["workflow-a"].arm(Fixture.SKIP_TERMINAL_PROJECTION, cart_id="r2")
            req = h.start_req("r2")
            await start_order_workflow(h.a.client, req, seconds=CALL)
            await h.wait_event(req.order_id, "OrderConfirmedEvent")
            stale = await h.state(req.order_id)
            assert stale is not None
            assert stale.status is OrderStatus.PAYMENT_AUTHORIZED
            state = await continue_order_workflow(h.b.client, _continue(req.order_id),
                                                  seconds=CALL)
            assert state is not None
            assert state.status is OrderStatus.CONFIRMED
            assert await h.state(req.order_id) == state
            assert await h.event_types(req.order_id) == SUCCESS


async def test_rebuild_reproduces_a_deleted_projection_from_the_stream_alone(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="r3")
            req = h.start_req("r3")
            await start_order_workflow(h.a.client, req, seconds=CALL)
            before = await h.wait_status(req.order_id)
            assert await h.read_models.delete(req.order_id)
            rebuilt = await rebuild_order_projection(h.b.client, _rebuild(req.order_id),
                                                     seconds=CALL)
            assert rebuilt == before
            assert await h.state(req.order_id) == before
            assert await h.event_types(req.order_id) == SUCCESS


async def test_continue_or_rebuild_of_an_unknown_order_creates_nothing(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            for node in (h.a, h.b):  # a local and a remote caller
                assert await continue_order_workflow(node.client, _continue("ghost-1"),
                                                     seconds=CALL) is None
                assert await rebuild_order_projection(node.client, _rebuild("ghost-1"),
                                                      seconds=CALL) is None
            assert await h.events.read("ghost-1") == ()
            assert await h.read_models.get("ghost-1") is None
            await h.wait_gone(h.a, "ghost-1")
            assert await h.b.spots.find("ghost-1") is None


async def test_after_the_owner_closed_a_new_command_activates_a_new_generation(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="r5")
            req = h.start_req("r5")
            await start_order_workflow(h.a.client, req, seconds=CALL)
            final = await h.wait_status(req.order_id)
            # Termination closes the owner; its authority is released.
            await h.wait_gone(h.a, req.order_id)
            state = await continue_order_workflow(h.b.client, _continue(req.order_id),
                                                  seconds=CALL)
            assert state == final
            ref = await h.a.spots.find(req.order_id)
            assert ref is not None
            pattern = re.compile(rf"shoppingmall-workflow activated order={req.order_id} "
                                 r"generation=(\d+) node=\S+ version=(\d+)")
            activations = [m.groups() for lines in h.lines.values() for line in lines
                           if (m := pattern.fullmatch(line))]
            generations = sorted(int(g) for g, _ in activations)
            assert len(generations) == 2
            assert generations[0] < generations[1] == ref.generation
            # The new generation replayed the whole stream (4 events) and recorded nothing.
            assert (str(ref.generation), "4") in activations
            assert await h.event_types(req.order_id) == SUCCESS
