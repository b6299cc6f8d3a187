"""The one place the runner meets the two node roles: the functions it starts them with.

The process runner starts each node through the role's own entry point:

- OrderWorkflow: ``server.order_workflow.process.run_workflow_node(node_id, *,
  store_url, events_url, read_model_url, commerce_url, fixtures=None,
  task_status, **node_options)``; ``task_status.started`` gets the open
  ``zl.Node``. ``fixtures`` is ``infrastructure.fixture_control.FixtureControl``
  (runner mode only), armed with ``Fixture`` members.
- CommerceApi: ``server.commerce_api.process.run_api_node(node_id, *,
  http_port, store_url, app_store_url, read_model_url, relocation_store_url,
  secret, derive_cart, lease, task_status)``; ``task_status.started`` gets the HTTP
  base URL.

Both are looked up by name when a node starts (:func:`load`), so this package
stays importable -- and type-checks -- while a role is still being built, and a
renamed function is fixed here and nowhere else.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

__all__ = ("API_PROCESS", "FIXTURES", "WORKFLOW_PROCESS", "fixture", "load",
           "new_fixture_control")

_BASE: Final = "zlink_trio.samples.shoppingmall.server"
WORKFLOW_PROCESS: Final = (f"{_BASE}.order_workflow.process", "run_workflow_node")
API_PROCESS: Final = (f"{_BASE}.commerce_api.process", "run_api_node")
FIXTURES: Final = f"{_BASE}.order_workflow.infrastructure.fixture_control"


def load(where: tuple[str, str]) -> Any:
    """The object ``where`` = (module, name) names; ``RuntimeError`` saying what is missing."""
    module_name, name = where
    try:
        module = importlib.import_module(module_name)
        return getattr(module, name)
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(f"{module_name}.{name} is not available ({exc}); this node role "
                           "is not built in this checkout") from exc


def new_fixture_control() -> Any:
    """A fresh runner-mode ``FixtureControl`` for one Workflow node."""
    return load((FIXTURES, "FixtureControl"))()


def fixture(name: str) -> Any:
    """The ``Fixture`` member whose value is ``name`` (``stop-at-reserved``, ...)."""
    return load((FIXTURES, "Fixture"))(name)
