"""``serve`` survives a dead node: it says which one died, the others keep serving, and only
SIGINT or SIGTERM stops it.

The process test runs ``python -m zlink_trio.samples.shoppingmall serve --base-port 0
--lease 3`` as a separate process (four node processes under it) and talks to it the way
a user does: its output, HTTP on the two API addresses, the node logs in its work
directory and ``zlink-trio nodes`` on its Location Store. Orders it creates on both
Workflow nodes are activated again by a continue, so each has a Ready owner (a finished
order closes its owner; one a continue activated stays until idle eviction). Then it
SIGKILLs ``workflow-b`` and checks that ``serve`` keeps running and reports the death,
that commands for the orders ``workflow-b`` owned answer 503 ``Unavailable`` while the
orders on ``workflow-a`` keep working, that once ``workflow-b``'s lease ran out every new
order goes to ``workflow-a``, and that SIGTERM then stops ``serve`` cleanly. Every wait is
bounded; the whole run by :data:`BOUND`.

The other tests check the pieces without processes: the death line of each role, how an
exit is described, and the ``--lease`` option's way into the deployment file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from functools import partial
from typing import TYPE_CHECKING, cast

import attrs
import httpx
import pytest
import trio

from zlink_trio.samples.shoppingmall.client.api import ApiError, OrderApi, wait_status
from zlink_trio.samples.shoppingmall.runner.processes import NodeProcess
from zlink_trio.samples.shoppingmall.runner.serve import death_line, exit_description, serve
from zlink_trio.samples.shoppingmall.runner.topology import (
    Deployment,
    plan_deployment,
    store_urls,
)
from zlink_trio.samples.shoppingmall.shared.contracts import (
    WORKFLOW_MESH,
    OrderStatus,
    StartOrderReq,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from zlink_trio.samples.shoppingmall.runner.topology import NodeSpec

#: Seconds the whole process test may take before it fails.
BOUND = 150
#: Seconds one wait inside it may take (readiness, the death line, the lease running out).
STEP = 40
#: The nodes' lease in the process test, seconds: short, so the dead node's runs out soon.
LEASE = 3
#: Seconds ``serve`` gets to stop after SIGTERM (its nodes get ``processes.STOP_GRACE``).
STOP_BOUND = 30

_ADDRESS = re.compile(r"^(api-a|api-b) (http://127\.0\.0\.1:\d+)( |$)")
_WORKFLOW_PID = re.compile(r"^(workflow-a|workflow-b) pid (\d+)$")
_API_PID = re.compile(r"^(api-a|api-b) http://\S+ pid (\d+)$")


@attrs.define
class _Serve:
    """What the running ``serve`` printed so far, and its nodes' pids."""

    text: str = ""
    changed: trio.Event = attrs.Factory(trio.Event)
    pids: dict[str, int] = attrs.Factory(dict)
    ended: bool = False

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    async def read(self, stream: trio.abc.ReceiveStream) -> None:
        async for chunk in stream:
            self.text += chunk.decode("utf-8", "replace")
            for line in self.lines:
                for pattern in (_WORKFLOW_PID, _API_PID):
                    if match := pattern.match(line):
                        self.pids[match[1]] = int(match[2])
            self.changed.set()
            self.changed = trio.Event()
        self.ended = True
        self.changed.set()

    async def wait_line(self, accept: Callable[[str], bool], what: str) -> str:
        """The first line ``accept`` takes, waiting up to :data:`STEP` s for it."""
        with trio.move_on_after(STEP):
            while True:
                for line in self.lines:
                    if accept(line):
                        return line
                if self.ended:
                    break
                await self.changed.wait()
        raise AssertionError(f"serve printed no {what} (within {STEP} s, or before its output "
                             f"ended):\n{self.text}")

    async def stop(self, process: trio.Process) -> None:
        """``run_process``'s way out when the test fails: SIGTERM, then kill it and its nodes."""
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(STOP_BOUND):
            await process.wait()
            return
        process.kill()
        for pid in self.pids.values():  # its nodes run in their own sessions
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _owner(logs: Path, order_id: str) -> str | None:
    """The node of ``order_id``'s latest activation that replayed events (not its start's)."""
    pattern = re.compile(rf"^shoppingmall-workflow activated order={re.escape(order_id)} "
                         r"generation=(\d+) node=(\S+) version=([1-9]\d*)$", re.MULTILINE)
    found = [(int(m[1]), m[2]) for path in sorted(logs.glob("workflow-*.log"))
             for m in pattern.finditer(path.read_text(encoding="utf-8", errors="replace"))]
    return max(found)[1] if found else None


async def _activate_again(api: OrderApi, logs: Path, order_id: str) -> str:
    """Continue a finished order until a continue activated it again; its new owner.

    A finished order closes its owner one turn after its last step, so a continue may still
    reach that owner; then the next one activates the order anew (100 ms x 100 at most).
    """
    for _ in range(100):
        state = await api.continue_order(order_id, f"continue-{uuid.uuid4()}")
        assert state.status is OrderStatus.CONFIRMED, state
        owner = _owner(logs, order_id)
        if owner is not None:
            return owner
        await trio.sleep(0.1)
    raise AssertionError(f"no continue activated {order_id} again")


def _start_req(tag: str) -> StartOrderReq:
    return StartOrderReq(cart_id=f"cart-ok-{tag}", shipping_address_id="addr-1",
                         payment_method_id="pm-ok", idempotency_key=f"key-{tag}")


async def _live_workflow_nodes(location_url: str) -> set[str]:
    """``zlink-trio nodes --json``: the Workflow Mesh's live NodeIds."""
    done = await trio.run_process(
        [sys.executable, "-m", "zlink_trio.cli", "nodes", "--store", location_url,
         "--mesh", WORKFLOW_MESH, "--max-records", "0", "--json"],
        capture_stdout=True, capture_stderr=True)
    nodes = json.loads(done.stdout)["nodes"]
    return {str(n["nodeId"]) for n in nodes if str(n["nodeId"]).startswith("workflow-")}


async def _wait_lease_out(location_url: str, dead: str) -> None:
    """Poll ``zlink-trio nodes`` until ``dead`` is not live any more (up to :data:`STEP` s)."""
    live: set[str] = set()
    with trio.move_on_after(STEP):
        while True:
            live = await _live_workflow_nodes(location_url)
            if dead not in live:
                return
            await trio.sleep(0.2)
    raise AssertionError(f"{dead}'s lease did not run out within {STEP} s; live: {live}")


async def test_serve_keeps_serving_when_a_workflow_node_dies_and_stops_on_sigterm(
        tmp_path: Path) -> None:
    work = tmp_path / "run"
    logs = work / "logs"
    location_url = store_urls(None, work / "stores", "unused").location
    watched = _Serve()
    command = [sys.executable, "-m", "zlink_trio.samples.shoppingmall", "serve",
               "--base-port", "0", "--work-dir", str(work), "--lease", str(LEASE)]
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery, httpx.AsyncClient(timeout=20) as http:
            process: trio.Process = await nursery.start(partial(
                trio.run_process, command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, check=False, deliver_cancel=watched.stop))
            assert process.stdout is not None
            nursery.start_soon(watched.read, process.stdout)
            await watched.wait_line(lambda line: line.startswith("shoppingmall ready"),
                                    "ready line")
            # Other tooling parses these: "api-a http://HOST:PORT", anything after a space.
            addresses = {m[1]: m[2] for line in watched.lines if (m := _ADDRESS.match(line))}
            assert set(addresses) == {"api-a", "api-b"}, watched.text
            apis = [OrderApi(http, addresses["api-a"]), OrderApi(http, addresses["api-b"])]

            # Orders on both Workflow nodes, each with a Ready owner there.
            owned: dict[str, list[str]] = {"workflow-a": [], "workflow-b": []}
            for n in range(30):
                if all(owned.values()):
                    break
                api = apis[n % 2]
                started = await api.start(_start_req(f"{n}-{uuid.uuid4().hex[:6]}"))
                await wait_status(api, started.order_id, frozenset({OrderStatus.CONFIRMED}))
                owner = await _activate_again(api, logs, started.order_id)
                owned[owner].append(started.order_id)
            assert all(owned.values()), owned
            on_a, on_b = owned["workflow-a"][0], owned["workflow-b"][0]

            dead_pid = watched.pids["workflow-b"]
            os.kill(dead_pid, signal.SIGKILL)
            died = await watched.wait_line(
                lambda line: line.startswith("shoppingmall-died "), "death line")
            assert died.startswith(
                f"shoppingmall-died node=workflow-b signal=SIGKILL pid={dead_pid} "
                f"log={logs / 'workflow-b.log'}; api-a, api-b, workflow-a keep serving"), died
            assert process.poll() is None, watched.text

            async def check_boundary() -> None:
                for api in apis:
                    with pytest.raises(ApiError) as refused:
                        await api.continue_order(on_b, f"continue-{uuid.uuid4()}")
                    assert (refused.value.status, refused.value.error) == (503, "Unavailable")
                    # a lookup reads the read model: the dead owner's order still reads
                    assert (await api.get(on_b)).status is OrderStatus.CONFIRMED
                    kept = await api.continue_order(on_a, f"continue-{uuid.uuid4()}")
                    assert kept.status is OrderStatus.CONFIRMED

            await check_boundary()  # right after the death
            await _wait_lease_out(location_url, "workflow-b")
            assert await _live_workflow_nodes(location_url) == {"workflow-a"}
            await check_boundary()  # and after: nothing re-created it elsewhere

            # Once the lease ran out, every new order goes to the live Workflow node.
            for n in range(6):
                api = apis[n % 2]
                started = await api.start(_start_req(f"after-{n}-{uuid.uuid4().hex[:6]}"))
                state = await wait_status(api, started.order_id,
                                          frozenset({OrderStatus.CONFIRMED}))
                assert state.status is OrderStatus.CONFIRMED
                line = f"shoppingmall-order started order={started.order_id} "
                assert line in (logs / "workflow-a.log").read_text(encoding="utf-8")
            assert process.poll() is None, watched.text
            assert sum(line.startswith("shoppingmall-died ") for line in watched.lines) == 1

            process.send_signal(signal.SIGTERM)
            with trio.fail_after(STOP_BOUND):
                code = await process.wait()
        assert code == 0, watched.text
        assert watched.lines[-1] == "shoppingmall stopped", watched.text
        for node_id in ("api-a", "api-b", "workflow-a"):  # serve stopped and reaped them
            with pytest.raises(ProcessLookupError):
                os.kill(watched.pids[node_id], 0)


@attrs.frozen
class _Pid:
    """All of a process :func:`death_line` reads."""

    pid: int


def _specs(tmp_path: Path, *node_ids: str) -> list[NodeSpec]:
    deployment = plan_deployment(run_id="sm-1", stores=store_urls(None, tmp_path, "sm-1"),
                                 base_port=9000, runner_mode=False)
    return [deployment.node(n) for n in node_ids]


def _node(tmp_path: Path, node_id: str) -> NodeProcess:
    return NodeProcess(spec=_specs(tmp_path, node_id)[0],
                       process=cast("trio.Process", _Pid(4242)),
                       log_path=tmp_path / f"{node_id}.log")


def test_an_exit_is_described_by_its_code_or_its_signal() -> None:
    assert exit_description(0) == "code=0"
    assert exit_description(3) == "code=3"
    assert exit_description(-signal.SIGKILL) == "signal=SIGKILL"
    assert exit_description(-signal.SIGSEGV) == "signal=SIGSEGV"


def test_a_dead_workflow_node_line_names_it_and_what_its_orders_answer(tmp_path: Path) -> None:
    line = death_line(_node(tmp_path, "workflow-b"), -signal.SIGKILL,
                      _specs(tmp_path, "api-a", "api-b", "workflow-a"))
    assert line.startswith(f"shoppingmall-died node=workflow-b signal=SIGKILL pid=4242 "
                           f"log={tmp_path / 'workflow-b.log'}; api-a, api-b, workflow-a "
                           "keep serving: ")
    assert "503 Unavailable" in line
    assert "new orders go to workflow-a once its lease runs out" in line
    last = death_line(_node(tmp_path, "workflow-a"), 1,
                      _specs(tmp_path, "api-a", "api-b"))
    assert "node=workflow-a code=1 " in last
    assert "no Workflow node is left" in last


def test_a_dead_api_node_line_points_at_the_other_api(tmp_path: Path) -> None:
    line = death_line(_node(tmp_path, "api-a"), -signal.SIGTERM,
                      _specs(tmp_path, "api-b", "workflow-a", "workflow-b"))
    assert line.startswith("shoppingmall-died node=api-a signal=SIGTERM pid=4242 ")
    assert "http://127.0.0.1:9000 no longer answers; use http://127.0.0.1:9001" in line
    assert not line.startswith("api-a ")  # never mistaken for an address line
    alone = death_line(_node(tmp_path, "api-a"), 0, [])
    assert alone.endswith("; no node is left serving (Ctrl-C stops)")


def test_the_lease_reaches_the_deployment_file_and_a_bad_one_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = plan_deployment(run_id="sm-1", stores=store_urls(None, tmp_path, "sm-1"),
                                 base_port=0, runner_mode=False, lease=2.5)
    assert Deployment.from_json(deployment.to_json()).lease == 2.5
    old = json.loads(deployment.to_json())
    del old["lease"]  # a deployment file written before the option: the framework's lease
    assert Deployment.from_json(json.dumps(old)).lease is None
    assert serve(None, 0, str(tmp_path / "never"), lease=0) == 2
    assert "--lease" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()
