"""The runner's answers to the Client's asks (``runner.ask_desk``), over stand-in hooks.

The stand-in records every hook call in order, so the tests check what the
runner does and in which order (the gate opens only after the relocation
committed at the same generation; the owner's process is the one killed).
"""

from __future__ import annotations

import json

import attrs

from zlink_trio.samples.shoppingmall.runner.ask_desk import AskDesk, Relocation
from zlink_trio.samples.shoppingmall.runner.hooks_client import HookError


@attrs.define
class FakeHooks:
    owners: dict[str, tuple[str, str]]
    moved_generation: str = "7"
    calls: list[tuple[str, ...]] = attrs.field(factory=list)
    down: set[str] = attrs.field(factory=set)
    projections: set[str] = attrs.field(factory=set)

    @property
    def live(self) -> list[str]:
        return [n for n in ("workflow-a", "workflow-b") if n not in self.down]

    async def wait_parked(self, order_id: str) -> str:
        self.calls.append(("wait_parked", order_id))
        return self.owners[order_id][0]

    async def owner(self, order_id: str) -> tuple[str, str] | None:
        return self.owners.get(order_id)

    async def relocate(self, order_id: str, source: str, target: str) -> dict[str, str]:
        self.calls.append(("relocate", order_id, source, target))
        self.owners[order_id] = (target, self.moved_generation)
        return {"generation": self.moved_generation}

    async def open_gate(self, node_id: str) -> None:
        self.calls.append(("open_gate", node_id))

    async def delete_projection(self, order_id: str) -> bool:
        self.calls.append(("delete_projection", order_id))
        return order_id in self.projections

    async def wait_released(self, order_id: str) -> None:
        if order_id in self.owners:
            raise HookError(f"order {order_id} was never released")


@attrs.define
class FakeProcess:
    killed: bool = False

    def kill(self) -> None:
        self.killed = True

    async def wait(self) -> int:
        return -9


@attrs.define
class FakeNode:
    process: FakeProcess = attrs.field(factory=FakeProcess)


def _desk(hooks: FakeHooks) -> tuple[AskDesk, dict[str, FakeNode]]:
    nodes = {"workflow-a": FakeNode(), "workflow-b": FakeNode()}
    return AskDesk(hooks, nodes), nodes  # type: ignore[arg-type]


async def test_a_relocation_opens_the_gates_only_after_it_committed():
    hooks = FakeHooks(owners={"o-1": ("workflow-a", "7")})
    desk, _ = _desk(hooks)
    answer = json.loads(await desk.answer("shoppingmall-client ask=relocate order=o-1"))
    assert answer == {"answer": "relocate", "ok": True, "generation": "7"}
    assert hooks.calls == [("wait_parked", "o-1"), ("relocate", "o-1", "workflow-a", "workflow-b"),
                           ("open_gate", "workflow-b"), ("open_gate", "workflow-a")]
    assert desk.facts.relocation == Relocation(order_id="o-1", generation="7",
                                               source="workflow-a", target="workflow-b")


async def test_a_relocation_that_changed_the_generation_is_refused_and_the_gate_stays_shut():
    hooks = FakeHooks(owners={"o-1": ("workflow-b", "7")}, moved_generation="8")
    desk, _ = _desk(hooks)
    answer = json.loads(await desk.answer("shoppingmall-client ask=relocate order=o-1"))
    assert answer["ok"] is False
    assert "generation" in answer["reason"]
    assert not [c for c in hooks.calls if c[0] == "open_gate"]
    assert desk.facts.relocation is None


async def test_kill_owner_terminates_the_owners_process_only():
    hooks = FakeHooks(owners={"o-2": ("workflow-b", "3")})
    desk, nodes = _desk(hooks)
    answer = json.loads(await desk.answer("shoppingmall-client ask=kill-owner order=o-2"))
    assert answer["ok"] is True
    assert (nodes["workflow-a"].process.killed, nodes["workflow-b"].process.killed) == \
        (False, True)
    assert hooks.down == {"workflow-b"}
    assert desk.facts.killed == {"o-2": "workflow-b"}


async def test_kill_owner_without_an_owner_is_refused():
    desk, nodes = _desk(FakeHooks(owners={}))
    answer = json.loads(await desk.answer("shoppingmall-client ask=kill-owner order=o-3"))
    assert answer["ok"] is False
    assert not any(n.process.killed for n in nodes.values())


async def test_deleting_a_projection_that_is_not_there_is_refused():
    hooks = FakeHooks(owners={}, projections={"o-4"})
    desk, _ = _desk(hooks)
    assert json.loads(await desk.answer(
        "shoppingmall-client ask=delete-projection order=o-4"))["ok"] is True
    assert json.loads(await desk.answer(
        "shoppingmall-client ask=delete-projection order=o-5"))["ok"] is False
    assert desk.facts.deleted == ["o-4"]


async def test_await_released_answers_once_no_node_hosts_the_order():
    desk, _ = _desk(FakeHooks(owners={"o-6": ("workflow-a", "1")}))
    assert json.loads(await desk.answer(
        "shoppingmall-client ask=await-released order=o-7"))["ok"] is True
    assert json.loads(await desk.answer(
        "shoppingmall-client ask=await-released order=o-6"))["ok"] is False


async def test_an_unknown_ask_or_one_without_an_order_is_refused():
    desk, _ = _desk(FakeHooks(owners={}))
    for line in ("shoppingmall-client ask=teleport order=o-1", "shoppingmall-client ask=relocate"):
        assert json.loads(await desk.answer(line))["ok"] is False
