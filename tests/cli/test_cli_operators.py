"""``zlink-trio nodes``, ``relocate``, ``drain`` and ``undrain`` against real nodes of this
process.

The nodes run in the test's Trio loop on a SQLite file and real loopback links, on the
real clock, every test under ``trio.fail_after``. The command runs as it would from a
shell -- ``cli.main``, its own ``trio.run`` -- in a worker thread, so it joins the Mesh
as a separate client-only node while the nodes keep serving.
"""

from __future__ import annotations

import json
import ssl
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trustme

import zlink_trio as zl
from zlink_trio import cli
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

SECRET = "operator-test-secret-0123456789abcdef"


@attrs.frozen
class Put:
    n: int


@attrs.frozen
class Total:
    value: int


class Adapter:
    def capture(self, spot: Any) -> bytes:
        return str(spot.total).encode()

    def restore(self, spot: Any, data: bytes) -> None:
        spot.total = int(data)


class _Base:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.total = 0

    @zl.handler
    async def put(self, msg: Put) -> Total:
        self.total += msg.n
        return Total(self.total)


@zl.instance_spot("cli-kept", relocation=zl.PreserveStateWith(Adapter()))
class Kept(_Base):
    pass


@zl.instance_spot("cli-pinned", relocation=zl.DisableRelocation())
class Pinned(_Base):
    pass


SPOTS = [Kept, Pinned]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'store.db'}"


@asynccontextmanager
async def started(url: str, *names: str, **options: Any) -> AsyncIterator[list[zl.Node]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(zl.open_node(
            name, store=url, spots=SPOTS, **options)) for name in names]


async def put(node: zl.Node, spot_id: str, kind: str = "cli-kept") -> None:
    await node.client.request(spot_id, Put(1), reply=Total).instance_spot(kind).timeout(5)


async def zlink(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``zlink-trio *argv`` in a worker thread (its own trio.run); status, stdout, stderr."""
    status = await trio.to_thread.run_sync(cli.main, [*argv, "--timeout", "10"])
    out, err = capsys.readouterr()
    return status, out, err


# -- nodes --------------------------------------------------------------------------------------


async def test_nodes_lists_live_nodes_with_aligned_columns_and_spot_counts(capsys, url):
    with trio.fail_after(30):
        async with started(url, "node-a") as (a,), zl.open_node(
                "b", store=url, spots=SPOTS, placement_weight=0.0) as b:
            for i in range(3):
                await put(a, f"k-{i}")
            async with zl.open_node("edge", store=url, client_only=True):
                status, out, err = await zlink(capsys, "nodes", "--store", url)
    assert (status, err) == (0, "")
    header, *rows, total = out.splitlines()
    assert header.split() == ["NODE", "ID", "MESH", "LIFECYCLE", "ENDPOINT", "ROLES", "LEASE",
                              "LEFT", "PLACEMENT", "SPOTS"]
    assert total == "3 live node(s)"
    by_id = {row.split()[0]: row.split() for row in rows}
    assert by_id["node-a"][3:5] == [a.statistics().endpoint, "server,client"]
    assert (by_id["node-a"][7], by_id["b"][7], by_id["edge"][7]) == ("3", "0", "0")
    assert by_id["edge"][4] == "client"
    assert str(b.node_rid) not in out  # nodes are named by NodeId; the rid is in --json
    for column in ("MESH", "ENDPOINT", "ROLES", "PLACEMENT"):  # every row lines up
        start = header.index(column)
        assert all(row[start - 1] == " " and row[start] != " " for row in rows), column
    assert all(len(row) == len(header) for row in rows)  # SPOTS, the last, ends under it
    assert float(by_id["node-a"][5].rstrip("s")) > 0


async def test_nodes_json_mesh_filter_and_bounded_walk(capsys, url):
    with trio.fail_after(30):
        async with started(url, "node-a") as (a,), AsyncExitStack() as stack:
            await put(a, "k-1")
            await put(a, "p-1", "cli-pinned")
            await stack.enter_async_context(zl.open_node("x", store=url, mesh="other",
                                                         spots=SPOTS))
            status, out, _ = await zlink(capsys, "nodes", "--store", url, "--json",
                                         "--mesh", "world")
            assert status == 0
            shown = json.loads(out)
            (node,) = shown["nodes"]
            assert (node["nodeId"], node["nodeRid"], node["spots"], node["spotsByState"]) == (
                "node-a", str(a.node_rid), 2, {"ready": 2})
            assert node["acceptsPlacements"] is True
            assert node["lifecycleGeneration"] == 1
            assert 0 < node["leaseLeft"] <= 10
            assert shown["spotsComplete"] is True
            status, out, _ = await zlink(capsys, "nodes", "--store", url, "--max-records", "1")
            assert status == 0
            assert ">=" in out
            assert "Spot counts are lower bounds" in out
            status, out, _ = await zlink(capsys, "nodes", "--store", url, "--json")
            assert sorted(n["mesh"] for n in json.loads(out)["nodes"]) == ["other", "world"]


async def test_nodes_usage_and_unavailable(capsys, url, tmp_path):
    with trio.fail_after(30):
        status, out, err = await zlink(capsys, "nodes", "--store", "memory://")
        assert (status, out) == (2, "")
        assert "in-process memory store" in err
        status, out, err = await zlink(capsys, "nodes", "--store", url, "--mesh", "", "--json")
        assert status == 2
        assert json.loads(out)["error"]["status"] == 2
        async with open_store(url):
            pass
        status, out, err = await zlink(capsys, "nodes", "--store", url)
        assert (status, out.splitlines()[-1]) == (0, "0 live node(s)")


# -- relocate -----------------------------------------------------------------------------------


async def test_relocate_moves_a_spot_to_the_named_node(capsys, url):
    with trio.fail_after(30):
        async with started(url, "node-a") as (a,), zl.open_node(
                "node-b", store=url, spots=SPOTS, placement_weight=0.0) as b:
            await put(a, "k-1")
            status, out, err = await zlink(capsys, "relocate", "k-1", "--to", "node-b",
                                           "--store", url)
            assert (status, err) == (0, ""), err
            ref = await a.spots.find("k-1")
            assert ref is not None
            assert ref.node_rid == b.node_rid
            assert out == f"relocated 'k-1' to node 'node-b', generation {ref.generation}\n"
            assert await a.client.request("k-1", Put(1), reply=Total) == Total(2)  # state kept
            status, out, _ = await zlink(capsys, "relocate", "k-1", "--to", "node-a",
                                         "--store", url, "--json")
            assert status == 0
            assert json.loads(out) == {"spotId": "k-1", "outcome": "committed",
                                       "ref": {**ref.to_json(), "nodeRid": str(a.node_rid)},
                                       "reason": None, "node": "node-a"}


async def test_relocate_refusals_and_errors_exit_1(capsys, url):
    with trio.fail_after(30):
        async with started(url, "node-a") as (a,), zl.open_node("node-b", store=url,
                                                                spots=SPOTS):
            await put(a, "p-1", "cli-pinned")
            status, out, _ = await zlink(capsys, "relocate", "p-1", "--store", url)
            assert status == 1
            assert out.startswith("not relocated 'p-1': refused: ")
            assert "DisableRelocation" in out
            status, out, _ = await zlink(capsys, "relocate", "p-1", "--store", url, "--json")
            assert (status, json.loads(out)["outcome"]) == (1, "refused")
            status, out, err = await zlink(capsys, "relocate", "nobody", "--store", url)
            assert (status, out) == (1, "")
            assert err == ("zlink-trio relocate: not found: Spot 'nobody' does not exist; "
                           "there is nothing to relocate\n")
            status, out, err = await zlink(capsys, "relocate", "nobody", "--store", url,
                                           "--json")
            assert status == 1
            assert "'nobody' does not exist" in json.loads(out)["error"]["message"]


@pytest.mark.parametrize(("argv", "says"), [
    (["relocate", "x" * 256, "--store", "STORE"], "Spot ID"),
    (["relocate", "k-1", "--to", "", "--store", "STORE"], "NodeId"),
    (["relocate", "k-1", "--store", "memory://"], "in-process memory store"),
    (["drain", "a", "--store", "STORE", "--mesh", ""], "mesh name"),
    (["drain", "a", "--store", "STORE", "--secret-file", "/no/such/secret"],
     "cannot read --secret-file"),
    (["drain", "--store", "STORE"], "required: NODE"),
    (["undrain", "--store", "STORE"], "required: NODE"),
    (["undrain", "", "--store", "STORE"], "NodeId"),
])
async def test_operator_usage_errors_exit_2(capsys, url, argv, says):
    async with open_store(url):
        pass
    with trio.fail_after(30):
        status, _, err = await zlink(capsys, *[url if a == "STORE" else a for a in argv])
    assert status == 2
    assert says.lower() in err.lower()


async def test_the_secret_comes_from_a_file_or_the_environment(capsys, url, tmp_path,
                                                               monkeypatch):
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n", encoding="utf-8")
    short = tmp_path / "short"
    short.write_text("short", encoding="utf-8")
    with trio.fail_after(40):
        async with started(url, "node-a", secret=SECRET) as (a,), zl.open_node(
                "node-b", store=url, spots=SPOTS, secret=SECRET, placement_weight=0.0):
            await put(a, "k-1")
            monkeypatch.delenv("ZLINK_SECRET", raising=False)
            status, _, err = await zlink(capsys, "relocate", "k-1", "--store", url)
            assert status == 1  # the dev secret does not open this Mesh's links
            assert "unavailable" in err
            status, _, err = await zlink(capsys, "relocate", "k-1", "--store", url,
                                         "--secret-file", str(short))
            assert status == 2
            assert "at least 32 bytes" in err
            status, out, err = await zlink(capsys, "relocate", "k-1", "--to", "node-b",
                                           "--store", url, "--secret-file", str(secret_file))
            assert (status, err) == (0, ""), out
            assert "to node 'node-b'" in out
            monkeypatch.setenv("ZLINK_SECRET", SECRET)
            status, out, err = await zlink(capsys, "relocate", "k-1", "--store", url)
            assert (status, err) == (0, ""), out
            assert "to node 'node-a'" in out


# -- drain --------------------------------------------------------------------------------------


async def test_drain_moves_every_spot_off_a_node(capsys, url):
    with trio.fail_after(40):
        async with started(url, "node-a") as (a,):
            for i in range(4):
                await put(a, f"k-{i}")
            async with zl.open_node("node-b", store=url, spots=SPOTS) as b:
                status, out, err = await zlink(capsys, "drain", "node-a", "--store", url)
                assert (status, err) == (0, ""), err
                lines = out.splitlines()
                assert sorted(lines[:-1]) == [f"moved 'k-{i}' to node 'node-b'" for i in range(4)]
                assert lines[-1] == ("node 'node-a' drained: 4 Spot(s) moved, 0 not moved. It "
                                     "takes no new Spots; stop it when ready.")
                assert a.statistics().active_spots == 0
                await put(b, "new-1")  # node-a takes no new Spot any more
                assert (await b.spots.find("new-1")).node_rid == b.node_rid  # type: ignore[union-attr]
                status, out, _ = await zlink(capsys, "nodes", "--store", url, "--json")
                placement = {n["nodeId"]: n["acceptsPlacements"] for n in json.loads(out)["nodes"]}
                assert placement == {"node-a": False, "node-b": True}


async def test_drain_that_leaves_spots_exits_1_and_lists_them(capsys, url):
    with trio.fail_after(40):
        async with started(url, "node-a") as (a,):
            await put(a, "k-1")
            await put(a, "p-1", "cli-pinned")
            async with zl.open_node("node-b", store=url, spots=SPOTS) as b:
                status, out, _ = await zlink(capsys, "drain", "node-a", "--store", url, "--json")
                assert status == 1
                shown = json.loads(out)
                assert shown["nodeId"] == "node-a"
                assert [(m["spotId"], m["outcome"], m["ref"]["nodeRid"], m["node"]) for m in
                        shown["moved"]] == [("k-1", "committed", str(b.node_rid), "node-b")]
                assert [(m["spotId"], m["outcome"]) for m in shown["notMoved"]] == [
                    ("p-1", "refused")]
                assert shown["unlisted"] == 0
            status, out, err = await zlink(capsys, "drain", "node-zz", "--store", url)
            assert (status, out) == (1, "")
            assert "no live node 'node-zz'" in err


async def test_undrain_lets_a_drained_node_take_new_spots_again(capsys, url):
    with trio.fail_after(40):
        async with started(url, "node-a", "node-b"):
            status, _, err = await zlink(capsys, "drain", "node-b", "--store", url)
            assert (status, err) == (0, ""), err
            status, out, err = await zlink(capsys, "undrain", "node-b", "--store", url)
            assert (status, err) == (0, ""), err
            assert out == ("node 'node-b' undrained: it takes new Spots again (the Spots its "
                           "drain moved stay where they went)\n")
            status, out, _ = await zlink(capsys, "nodes", "--store", url, "--json")
            placement = {n["nodeId"]: n["acceptsPlacements"] for n in json.loads(out)["nodes"]}
            assert placement == {"node-a": True, "node-b": True}
            status, out, _ = await zlink(capsys, "nodes", "--store", url)
            assert "draining" not in out
            status, out, _ = await zlink(capsys, "undrain", "node-b", "--store", url, "--json")
            assert (status, json.loads(out)) == (0, {"nodeId": "node-b",
                                                     "acceptsPlacements": True})
            status, out, err = await zlink(capsys, "undrain", "node-zz", "--store", url)
            assert (status, out) == (1, "")
            assert "no live node 'node-zz'" in err


def test_every_command_documents_its_exit_status(capsys):
    for command in ("inspect", "release", "nodes", "relocate", "drain", "undrain",
                    "statecharts"):
        assert cli.main([command, "--help"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "Exit 0" in out or "Exit status" in out, command
        assert "--json" in out, command
    assert cli.main(["--help"]) == 0
    assert "Exit status: 0 success, 1" in capsys.readouterr().out


async def test_relocate_reaches_nodes_that_serve_tls_with_ca_file(capsys, url, tmp_path):
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server)
    dial = ssl.create_default_context()
    ca.configure_trust(dial)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    tls = {"secret": SECRET, "ssl_context": server, "client_ssl_context": dial}
    with trio.fail_after(40):
        async with started(url, "node-a", **tls) as (a,), zl.open_node(
                "node-b", store=url, spots=SPOTS, placement_weight=0.0, **tls) as b:
            assert a.statistics().endpoint.startswith("wss://")
            await put(a, "k-1")
            argv = ["relocate", "k-1", "--to", "node-b", "--store", url]
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("ZLINK_SECRET", SECRET)
                status, _, err = await zlink(capsys, *argv)  # the system does not trust it
                assert status == 1
                assert "unavailable" in err
                status, out, err = await zlink(capsys, *argv, "--ca-file", str(ca_file))
                assert (status, err) == (0, ""), out
            assert (await a.spots.find("k-1")).node_rid == b.node_rid  # type: ignore[union-attr]
            status, _, err = await zlink(capsys, *argv, "--ca-file", str(tmp_path / "none"))
            assert status == 2
            assert "cannot use --ca-file" in err
