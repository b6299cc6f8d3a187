"""The pytest plugin of the test kit: fixtures ``zl_node`` and ``zl_cluster``.

Theory of operation
-------------------
Installed with zlink_trio (entry point ``zlink_trio`` in ``pytest11``), so every
project that depends on zlink_trio has the fixtures; ``-p no:zlink_trio`` turns it off,
``-p zlink_trio.testing.pytest_plugin`` loads it where the entry point is not installed.
The fixtures are async and need pytest-trio (``trio_mode = true``, or
``@pytest.mark.trio``), as every Trio test does:

* ``zl_node`` -- one running node (``open_test_node``: no links, store clock on Trio's
  clock, a fresh ``memory://`` store), ready for ``zl_node.client`` / ``zl_node.spots``;
* ``zl_cluster`` -- a :class:`~zlink_trio.testing.TestCluster` of three nodes on one
  store, linked in memory (``open_test_cluster(links="memory")``: real websocket links
  over in-process streams), so it runs on ``autojump_clock`` too; the marker's
  ``links="tcp"`` gives it loopback sockets (then run on the real clock).

What they serve and where comes from fixtures a test module (or conftest) overrides:
``zl_spots`` (the Spot classes, default none), ``zl_store`` (default ``"memory://"``),
``zl_cluster_size`` (3) and ``zl_node_options`` (more ``open_node`` keywords, e.g.
``{"instance_idle_timeout": 5}``); or per test with the marker
``@pytest.mark.zlink(spots=[...], store=..., n=..., **open_node_options)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from zlink_trio.testing.cluster import TestCluster, open_test_cluster, open_test_node

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    import zlink_trio as zl

__all__ = ("pytest_configure", "zl_cluster", "zl_cluster_size", "zl_node", "zl_node_options",
           "zl_spots", "zl_store")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "zlink(spots=None, store=None, n=None, **options): what the zl_node / "
                   "zl_cluster fixtures serve in this test (zlink_trio.testing)")


@pytest.fixture
def zl_spots() -> Sequence[object]:
    """The Spot classes ``zl_node`` and ``zl_cluster`` serve; override it (default none)."""
    return ()


@pytest.fixture
def zl_store() -> str:
    """The store URL of ``zl_node`` / ``zl_cluster`` (``"memory://"``: a fresh one)."""
    return "memory://"


@pytest.fixture
def zl_cluster_size() -> int:
    """How many nodes ``zl_cluster`` runs (3)."""
    return 3


@pytest.fixture
def zl_node_options() -> dict[str, Any]:
    """More ``open_node`` keywords for every node of ``zl_node`` / ``zl_cluster``."""
    return {}


def _settings(request: pytest.FixtureRequest, spots: Sequence[object], store: str,
              options: dict[str, Any]) -> tuple[Sequence[object], str, dict[str, Any], int | None]:
    marker = request.node.get_closest_marker("zlink")
    merged = dict(options)
    n = None
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("@pytest.mark.zlink takes keywords only: spots=, store=, "
                                    "n= and open_node options")
        extra = dict(marker.kwargs)
        spots = extra.pop("spots", spots)
        store = extra.pop("store", store)
        n = extra.pop("n", None)
        merged.update(extra)
    return spots, store, merged, n


@pytest.fixture
async def zl_node(request: pytest.FixtureRequest, zl_spots: Sequence[object], zl_store: str,
                  zl_node_options: dict[str, Any]) -> AsyncIterator[zl.Node]:
    """One running node serving ``zl_spots`` on ``zl_store`` (no links)."""
    spots, store, options, _ = _settings(request, zl_spots, zl_store, zl_node_options)
    async with open_test_node("zl-node", store=store, spots=spots, **options) as node:
        yield node


@pytest.fixture
async def zl_cluster(request: pytest.FixtureRequest, zl_spots: Sequence[object],
                     zl_store: str, zl_cluster_size: int,
                     zl_node_options: dict[str, Any]) -> AsyncIterator[TestCluster]:
    """``zl_cluster_size`` nodes serving ``zl_spots`` on ``zl_store``, linked in memory."""
    spots, store, options, n = _settings(request, zl_spots, zl_store, zl_node_options)
    options.setdefault("links", "memory")
    async with open_test_cluster(n or zl_cluster_size, store=store, spots=spots,
                                 **options) as cluster:
        yield cluster
