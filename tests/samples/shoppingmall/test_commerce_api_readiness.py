"""The object-route readiness watcher against a scripted claim directory (no store).

The directory returns the claims a test sets; the watcher must print one verbatim line
per Workflow NodeId serving ``shoppingmall.order-workflow`` as an Instance type -- never
itself, never a node serving something else, never twice -- and notice a new one
within ``max_interval``. On the autojump clock under ``trio.fail_after``.
"""

from __future__ import annotations

import attrs
import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.readiness import watch_object_routes
from zlink_trio.samples.shoppingmall.shared.contracts import ORDER_WORKFLOW_TYPE, WORKFLOW_MESH


@attrs.frozen
class Descriptor:
    node_id: str
    served: dict

    def serves(self, stable_type, kind):
        return self.served.get(stable_type) is kind


@attrs.frozen
class Claim:
    descriptor: Descriptor


@attrs.define
class Directory:
    claims: list = attrs.Factory(list)
    reads: list = attrs.Factory(list)
    fail: bool = False

    async def descriptors(self, mesh=None, *, now):
        self.reads.append((mesh, now))
        if self.fail:
            raise zl.StoreUnavailable("test: the store is paused")
        return list(self.claims)


def claim(node_id, served=None):
    return Claim(Descriptor(node_id, {ORDER_WORKFLOW_TYPE: zl.SpotKind.INSTANCE}
                            if served is None else served))


async def test_each_workflow_node_is_announced_once_and_only_workflow_nodes(autojump_clock):
    directory = Directory([claim("api-a", {}), claim("api-b", {}), claim("workflow-a"),
                           claim("other", {"counter": zl.SpotKind.INSTANCE}),
                           claim("users", {ORDER_WORKFLOW_TYPE: zl.SpotKind.USER})])
    lines = []
    second = trio.Event()

    def log(line):
        lines.append(line)
        if len(lines) == 2:
            second.set()

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: watch_object_routes(
                directory, "api-a", log, clock=trio.current_time,
                task_status=task_status))
            assert lines == ["shoppingmall-ready kind=object-route node=api-a target=workflow-a"]
            assert directory.reads[0][0] == WORKFLOW_MESH
            await trio.sleep(30)  # many quiet reads, backing off
            quiet = len(directory.reads)
            assert quiet < 30 / 0.1 / 2  # the pause grew
            directory.claims.append(claim("workflow-b"))
            directory.fail = True  # a paused store is skipped, not fatal
            await trio.sleep(5)
            directory.fail = False
            seen_at = trio.current_time()
            await second.wait()
            assert trio.current_time() - seen_at <= 2.0 + 1e-6
            await trio.sleep(30)
            nursery.cancel_scope.cancel()
    assert lines == ["shoppingmall-ready kind=object-route node=api-a target=workflow-a",
                     "shoppingmall-ready kind=object-route node=api-a target=workflow-b"]
