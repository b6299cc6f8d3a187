"""One deployment's layout: the four nodes, their ports, and the store URLs.

In runner mode (the smoke) a fifth process joins: :data:`FIXTURE_NODE`, an
OrderWorkflow node with placement weight 0 (no order is ever placed on it) that
the runner uses only before the Client starts, to prepare the fixture of
self-check item 9.3-2: it moves one order there by planned relocation and
terminates it (``prepare``). The four sample nodes run through the whole Client
scenario.

:func:`plan_deployment` decides everything the processes need and
:meth:`Deployment.to_json` writes it to one file that every node process reads
(``node <NodeId> --deployment FILE``); nothing about another node is passed on
a command line. Stores (``docs/shoppingmall.md``, "Topology"):

=====================  ==============================  ==================================
resource               SQLite (default)                ``--store redis://host:port/db``
=====================  ==============================  ==================================
Location Store         ``<dir>/location.db``           ``?prefix=<run>-loc``
Relocation Store       ``<dir>/relocation.db``         ``?prefix=<run>-rel`` (own keyspace)
OrderEventStore        ``<dir>/events.db``             ``?prefix=<run>-app``
OrderReadModelStore    ``<dir>/read-model.db``         ``?prefix=<run>-app``
CommerceStateStore     ``<dir>/commerce.db``           ``?prefix=<run>-app``
=====================  ==============================  ==================================

Ports: ``--base-port N`` gives ``api-a`` N and ``api-b`` N+1 (and, in runner
mode, the Workflow nodes' self-check hooks N+2 and N+3); 0 picks free
loopback ports. The mesh links always take free ports (the framework
publishes them in the Location Store).
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import attrs

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ("API_NODES", "FIXTURE_NODE", "HOST", "NODES", "WORKFLOW_NODES", "Deployment",
           "NodeSpec",
           "StoreUrls", "free_port", "plan_deployment", "store_urls")

API_NODES: Final = ("api-a", "api-b")
WORKFLOW_NODES: Final = ("workflow-a", "workflow-b")
NODES: Final = (*API_NODES, *WORKFLOW_NODES)
#: The runner's own Workflow process (runner mode only; module docstring).
FIXTURE_NODE: Final = "workflow-fixture"
HOST: Final = "127.0.0.1"


@attrs.frozen(kw_only=True)
class StoreUrls:
    """The five store URLs of one deployment (module docstring)."""

    location: str
    relocation: str
    events: str
    read_model: str
    commerce: str


@attrs.frozen(kw_only=True)
class NodeSpec:
    """One node: its role, NodeId and ports (0: none)."""

    node_id: str
    role: str  # "api" or "workflow"
    http_port: int = 0
    hooks_port: int = 0
    #: ``zl.open_node``'s ``placement_weight`` (``None``: the default).
    placement_weight: int | None = None

    @property
    def base_url(self) -> str:
        """The public HTTP base URL (API nodes)."""
        return f"http://{HOST}:{self.http_port}"

    @property
    def hooks_url(self) -> str:
        """The runner-only hook base URL (Workflow nodes in runner mode)."""
        return f"http://{HOST}:{self.hooks_port}"


@attrs.frozen(kw_only=True)
class Deployment:
    """Everything the four node processes share (module docstring)."""

    run_id: str
    stores: StoreUrls
    nodes: tuple[NodeSpec, ...]
    runner_mode: bool
    #: Every node's lease in seconds (``zl.open_node``'s ``lease``; ``None``: its default).
    lease: float | None = None

    def node(self, node_id: str) -> NodeSpec:
        """The spec of ``node_id`` (``KeyError`` if there is none)."""
        for spec in self.nodes:
            if spec.node_id == node_id:
                return spec
        raise KeyError(node_id)

    def to_json(self) -> str:
        """The deployment file's text."""
        return json.dumps(attrs.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> Deployment:
        """Read a deployment file's text."""
        data = json.loads(text)
        return cls(run_id=data["run_id"], stores=StoreUrls(**data["stores"]),
                   nodes=tuple(NodeSpec(**n) for n in data["nodes"]),
                   runner_mode=bool(data["runner_mode"]), lease=data.get("lease"))


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def store_urls(store: str | None, work_dir: Path, run_id: str) -> StoreUrls:
    """The store URLs for ``--store`` (``None``: SQLite files in ``work_dir``).

    ``ValueError`` for a URL that is neither ``sqlite:`` (a directory is taken
    from it) nor ``redis://``.
    """
    if store is None or store.startswith("sqlite:"):
        if store is not None:
            path = urlsplit(store).path
            work_dir = type(work_dir)(path) if path not in ("", "/") else work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        def db(name: str) -> str:
            return f"sqlite:///{(work_dir / f'{name}.db').resolve()}"
        return StoreUrls(location=db("location"), relocation=db("relocation"),
                         events=db("events"), read_model=db("read-model"),
                         commerce=db("commerce"))
    if store.startswith(("redis://", "rediss://")):
        base = store.split("?", 1)[0]
        def redis(suffix: str) -> str:
            return f"{base}?prefix={run_id}-{suffix}"
        app = redis("app")
        return StoreUrls(location=redis("loc"), relocation=redis("rel"), events=app,
                         read_model=app, commerce=app)
    raise ValueError(f"--store {store!r}: use sqlite:///DIR or redis://host:port/db")


def plan_deployment(*, run_id: str, stores: StoreUrls, base_port: int,
                    runner_mode: bool, lease: float | None = None) -> Deployment:
    """The four nodes with their ports, and in runner mode the fixture node (module docstring).

    ``lease``: every node's lease in seconds (``None``: ``zl.open_node``'s default).
    """
    def port(offset: int) -> int:
        return base_port + offset if base_port else free_port()
    nodes = [NodeSpec(node_id=node_id, role="api", http_port=port(i))
             for i, node_id in enumerate(API_NODES)]
    nodes += [NodeSpec(node_id=node_id, role="workflow",
                       hooks_port=port(2 + i) if runner_mode else 0)
              for i, node_id in enumerate(WORKFLOW_NODES)]
    if runner_mode:
        nodes.append(NodeSpec(node_id=FIXTURE_NODE, role="workflow", hooks_port=port(4),
                              placement_weight=0))
    return Deployment(run_id=run_id, stores=stores, nodes=tuple(nodes), runner_mode=runner_mode,
                      lease=lease)
