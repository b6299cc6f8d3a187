"""The pytest plugin's fixtures, used as a user's test module uses them.

``zl_spots`` is overridden below, as a user's conftest or module would; the marker
``@pytest.mark.zlink`` changes one test. ``zl_node`` runs on ``autojump_clock`` (no
links); ``zl_cluster`` on the real clock under ``trio.fail_after``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from kit_spots import Add, Counter, Room, Spec, Total

import zlink_trio as zl

if TYPE_CHECKING:
    from pathlib import Path

    from zlink_trio.testing import TestCluster


@pytest.fixture
def zl_spots() -> list[type]:
    return [Counter, Room]


async def test_zl_node_serves_the_spots_of_zl_spots(
        zl_node: zl.Node, autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(10):
        total = await zl_node.client.request("c-1", Add(3), reply=Total).instance_spot(
            "kit-counter")
        assert total == Total(3)
        created = await zl_node.spots.get_or_create("r-1", "kit-room").request(Spec())
        assert created.state is zl.CreateState.CREATED


@pytest.mark.zlink(instance_idle_timeout=2.0)
async def test_the_marker_passes_node_options(
        zl_node: zl.Node, autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(30):
        await zl_node.client.request("c-1", Add(1), reply=Total).instance_spot("kit-counter")
        await trio.sleep(10)
        assert await zl_node.spots.find("c-1") is None  # idled out after 2 s


@pytest.mark.zlink(n=2)
async def test_zl_cluster_links_its_nodes_in_memory(
        zl_cluster: TestCluster, autojump_clock: trio.testing.MockClock) -> None:
    assert zl_cluster.network is not None
    with trio.fail_after(30):
        assert len(zl_cluster) == 2
        await zl_cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
            "kit-counter").timeout(10)
        assert await zl_cluster[1].client.request("c-1", Add(1), reply=Total).timeout(10) \
            == Total(2)
        assert len({t.node for t in zl_cluster.recorder.turns}) == 1


@pytest.mark.zlink(n=2, links="tcp")
async def test_the_marker_gives_zl_cluster_loopback_sockets(zl_cluster: TestCluster) -> None:
    assert zl_cluster.network is None
    with trio.fail_after(30):
        await zl_cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
            "kit-counter").timeout(10)
        assert await zl_cluster[1].client.request("c-1", Add(1), reply=Total).timeout(10) \
            == Total(2)


def test_the_plugin_is_registered_under_its_entry_point_name(
        pytestconfig: pytest.Config) -> None:
    import zlink_trio.testing.pytest_plugin as plugin

    assert pytestconfig.pluginmanager.get_plugin("zlink_trio") is plugin


def test_a_project_loads_the_plugin_by_its_module_name_where_the_entry_point_is_absent(
        tmp_path: Path) -> None:
    """``-p zlink_trio.testing.pytest_plugin`` in a project of its own (``-p no:zlink_trio``
    keeps an installed entry point from registering the module a second time)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\ntrio_mode = true\n")
    (tmp_path / "test_user.py").write_text(textwrap.dedent('''
        import attrs
        import pytest
        import zlink_trio as zl

        @attrs.frozen
        class Ping:
            n: int

        @zl.instance_spot("user-echo", relocation=zl.RecreateOnRelocation())
        class Echo:
            def __init__(self, ctx):
                pass

            @zl.handler
            async def ping(self, msg: Ping) -> Ping:
                return msg

        @pytest.fixture
        def zl_spots():
            return [Echo]

        async def test_echo(zl_node, autojump_clock):
            reply = await zl_node.client.request("e-1", Ping(4), reply=Ping).instance_spot(
                "user-echo")
            assert reply == Ping(4)
    '''))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:zlink_trio",
         "-p", "zlink_trio.testing.pytest_plugin", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
