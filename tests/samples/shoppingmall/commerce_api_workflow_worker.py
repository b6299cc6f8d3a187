"""A Workflow node process for the CommerceApi crash test: the stand-in Spot, nothing else.

``python commerce_api_workflow_worker.py NODE_ID LOCATION_URL READ_MODEL_URL LIFETIME``
opens ``NODE_ID`` in the workflow Mesh on the Location Store ``LOCATION_URL`` (a
SQLite file the test shares), serving ``StandInWorkflow`` (``commerce_api_world``),
which projects into the OrderReadModelStore ``READ_MODEL_URL``. It prints one JSON
line ``{"ready": true, "node_rid": ...}`` once the node serves, then waits; it exits on
its own after ``LIFETIME`` seconds, whatever happens to the test (the test kills it).
"""

from __future__ import annotations

import json
import sys

import trio
from commerce_api_world import StandInWorkflow, reset_world

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.shared.contracts import WORKFLOW_MESH


async def main(node_id: str, location: str, read_model_url: str, lifetime: float) -> None:
    with trio.move_on_after(lifetime):
        async with open_order_read_model_store(read_model_url) as read_model:
            reset_world(read_model)
            async with zl.open_node(node_id, store=location, mesh=WORKFLOW_MESH,
                                    spots=[StandInWorkflow]) as node:
                sys.stdout.write(json.dumps({"ready": True,
                                             "node_rid": str(node.node_rid)}) + "\n")
                sys.stdout.flush()
                await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
