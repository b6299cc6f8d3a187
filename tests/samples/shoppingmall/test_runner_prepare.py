"""The fixtures the runner prepares before the Client starts (``runner.prepare``), over stand-ins.

The stand-in hooks and order API record every call in order, so the tests check
what the runner does and in which order: every order is started through the
public API, the relocation gate opens only after the move committed at the same
generation, the item 9.3-2 owner is moved to the fixture node and only that process
is killed, and a step that goes wrong stops the preparation with PrepareError.
The status polls run on ``autojump_clock``.
"""

from __future__ import annotations

import attrs
import pytest

from zlink_trio.samples.shoppingmall.client.config import ORDER_ROLES
from zlink_trio.samples.shoppingmall.runner.prepare import (
    Kill,
    PrepareError,
    Relocation,
    prepare_fixtures,
)
from zlink_trio.samples.shoppingmall.runner.smoke import cart_ids
from zlink_trio.samples.shoppingmall.runner.topology import FIXTURE_NODE
from zlink_trio.samples.shoppingmall.shared.contracts import (
    OrderState,
    OrderStatus,
    StartOrderReq,
    StartOrderRes,
)

CARTS, _ = cart_ids("sm-t")
#: Where each cart's order ends up when the runner polls it.
FINAL = {"relocation": OrderStatus.INVENTORY_RESERVED, "rebuild": OrderStatus.CONFIRMED,
         "released": OrderStatus.FAILED, "failureBoundary": OrderStatus.INVENTORY_RESERVED}


def _state(order_id: str, status: OrderStatus) -> OrderState:
    return OrderState(order_id=order_id, status=status, updated_at_unix_ms=1)


@attrs.define
class World:
    """Orders by cart role, their owners, and every call the runner made, in order."""

    final: dict[str, OrderStatus] = attrs.field(factory=lambda: dict(FINAL))
    owners: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    roles: dict[str, str] = attrs.field(factory=dict)  # OrderId -> role
    calls: list[tuple[str, ...]] = attrs.field(factory=list)
    moved_generation: str | None = None  # a relocation that changes the generation
    projections: bool = True


@attrs.define
class FakeApi:
    world: World
    name: str

    async def start(self, req: StartOrderReq) -> StartOrderRes:
        role = next(r for r, c in CARTS.items() if c == req.cart_id)
        order_id = f"order-{role}"
        self.world.roles[order_id] = role
        self.world.owners[order_id] = ("workflow-a", "5")
        self.world.calls.append(("start", role, self.name))
        return StartOrderRes(order_id=order_id, state=_state(order_id, OrderStatus.CREATED))

    async def get(self, order_id: str) -> OrderState:
        return _state(order_id, self.world.final[self.world.roles[order_id]])


@attrs.define
class FakeHooks:
    world: World
    down: set[str] = attrs.field(factory=set)

    async def wait_parked(self, order_id: str) -> str:
        self.world.calls.append(("wait_parked", order_id))
        return self.world.owners[order_id][0]

    async def owner(self, order_id: str) -> tuple[str, str] | None:
        return self.world.owners.get(order_id)

    async def relocate(self, order_id: str, source: str, target: str) -> dict[str, str]:
        self.world.calls.append(("relocate", order_id, source, target))
        generation = self.world.moved_generation or self.world.owners[order_id][1]
        self.world.owners[order_id] = (target, generation)
        return {"generation": generation}

    async def open_gate(self, node_id: str) -> None:
        self.world.calls.append(("open_gate", node_id))

    async def delete_projection(self, order_id: str) -> bool:
        self.world.calls.append(("delete_projection", order_id))
        return self.world.projections

    async def wait_released(self, order_id: str) -> None:
        self.world.calls.append(("wait_released", order_id))


@attrs.define
class FakeProcess:
    world: World
    name: str

    def kill(self) -> None:
        self.world.calls.append(("kill", self.name))

    async def wait(self) -> int:
        return -9


@attrs.define
class FakeNode:
    process: FakeProcess


async def _prepare(world: World):
    nodes = {n: FakeNode(FakeProcess(world, n))
             for n in ("workflow-a", "workflow-b", FIXTURE_NODE)}
    hooks = FakeHooks(world)
    prepared = await prepare_fixtures(
        hooks, nodes, [FakeApi(world, "api-a"), FakeApi(world, "api-b")],  # type: ignore[arg-type]
        CARTS, lambda line: None)
    return prepared, hooks


async def test_every_prepared_order_is_started_through_the_public_api_before_the_client(
        autojump_clock):
    world = World()
    prepared, _ = await _prepare(world)
    assert set(prepared.orders) == set(ORDER_ROLES)
    assert [c[1] for c in world.calls if c[0] == "start"] == [
        "relocation", "rebuild", "released", "failureBoundary"]


async def test_a_relocation_opens_the_gates_only_after_it_committed(autojump_clock):
    world = World()
    prepared, _ = await _prepare(world)
    order = prepared.orders["relocation"]
    steps = [c for c in world.calls if order in c or c[0] == "open_gate"]
    assert steps == [("wait_parked", order), ("relocate", order, "workflow-a", "workflow-b"),
                     ("open_gate", "workflow-b"), ("open_gate", "workflow-a")]
    assert prepared.facts.relocation == Relocation(order_id=order, generation="5",
                                                   source="workflow-a", target="workflow-b")


async def test_a_relocation_that_changed_the_generation_stops_and_the_gate_stays_shut(
        autojump_clock):
    world = World(moved_generation="6")
    with pytest.raises(PrepareError, match="generation"):
        await _prepare(world)
    assert not [c for c in world.calls if c[0] in ("open_gate", "kill")]


async def test_the_failure_boundary_owner_moves_to_the_fixture_node_which_alone_is_killed(
        autojump_clock):
    world = World()
    prepared, hooks = await _prepare(world)
    order = prepared.orders["failureBoundary"]
    assert ("relocate", order, "workflow-a", FIXTURE_NODE) in world.calls
    assert [c for c in world.calls if c[0] == "kill"] == [("kill", FIXTURE_NODE)]
    assert world.calls.index(("kill", FIXTURE_NODE)) > world.calls.index(
        ("relocate", order, "workflow-a", FIXTURE_NODE))
    assert hooks.down == {FIXTURE_NODE}
    assert prepared.facts.kill == Kill(order_id=order, generation="5", source="workflow-a",
                                       node=FIXTURE_NODE)


async def test_a_failure_boundary_order_that_went_on_is_refused_and_nothing_is_killed(
        autojump_clock):
    world = World()
    world.final["failureBoundary"] = OrderStatus.CONFIRMED  # its stop fixture did not hold
    with pytest.raises(PrepareError, match="failureBoundary"):
        await _prepare(world)
    assert not [c for c in world.calls if c[0] == "kill"]


async def test_the_rebuild_order_is_confirmed_before_its_projection_is_deleted(autojump_clock):
    world = World()
    prepared, _ = await _prepare(world)
    order = prepared.orders["rebuild"]
    assert ("delete_projection", order) in world.calls
    assert prepared.facts.rebuilt_before == _state(order, OrderStatus.CONFIRMED)


async def test_a_projection_that_was_not_there_stops_the_preparation(autojump_clock):
    world = World(projections=False)
    with pytest.raises(PrepareError, match="rebuild"):
        await _prepare(world)
    assert not [c for c in world.calls if c[0] == "start" and c[1] == "released"]


async def test_the_released_order_failed_and_was_released(autojump_clock):
    world = World()
    prepared, _ = await _prepare(world)
    order = prepared.orders["released"]
    assert ("wait_released", order) in world.calls
    assert prepared.facts.released == order
