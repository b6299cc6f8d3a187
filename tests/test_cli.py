"""``zlink-trio inspect``, ``release`` and ``nodes --all`` against a shared store.

The commands run in-process through ``cli.main`` (each one is its own
``trio.run``, so these tests are synchronous) against a SQLite file that a
setup ``trio.run`` filled; one test runs the installed console script in a
subprocess, one runs against Redis (fails under CI, skips locally when Redis
is absent). Leases are stamped with wall-clock time, as nodes on shared stores
do: node A's lease expired 90 s ago, node B's runs for an hour.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import trio

from zlink_trio import cli
from zlink_trio.core.descriptor import NodeDescriptor
from zlink_trio.core.errors import Unavailable
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id
from zlink_trio.core.placement import Role
from zlink_trio.store import open_store
from zlink_trio.store.redis.admin import delete_matching, open_connection

TIMEOUT = 10
MESH = "world"
USER_SPOTS = ("a-1", "a-2", "a-3", "b-1")


def _descriptor(node_id: str) -> NodeDescriptor:
    return NodeDescriptor(
        mesh=MESH, node_rid=NodeRid.generate(), node_id=node_id,
        endpoint=f"ws://127.0.0.1:9/{node_id}", roles=[Role.OBJECT_SERVER],
        served_types={"room": SpotKind.USER}, capacity=10,
        entry_spot_id=new_entry_spot_id(node_id))


async def _populate(url: str, *, inbox: bool = False) -> dict[str, object]:
    """Node A (lease expired) owns a-1..a-3 Ready and "creating"; node B (live) owns b-1."""
    with trio.fail_after(TIMEOUT):
        async with open_store(url) as store:
            loc = store.location
            then, now = time.time() - 100, time.time()
            a = await loc.new_claim(_descriptor("node-a"), now=then, lease=10)
            b = await loc.new_claim(_descriptor("node-b"), now=now, lease=3600)
            records = {}
            for spot_id in USER_SPOTS:
                owner, at = (b, now) if spot_id.startswith("b") else (a, then)
                fence = await loc.reserve(spot_id, kind=SpotKind.USER, stable_type="room",
                                          mesh=MESH, owner=owner.owner(), now=at)
                records[spot_id] = await loc.commit_ready(fence, now=at)
            await loc.reserve("creating", kind=SpotKind.USER, stable_type="room", mesh=MESH,
                              owner=a.owner(), now=then)
            if inbox:
                await store.relocation.inbox_append(
                    "a-1", records["a-1"].object_generation, b"undelivered")
            return {"a": a, "b": b, **records}


async def _find(url: str, spot_id: str):
    async with open_store(url) as store:
        return await store.location.find(spot_id)


@pytest.fixture
def sqlite_store(tmp_path):
    url = f"sqlite://{tmp_path / 'store.db'}"
    return url, trio.run(_populate, url)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def all_ids(seeded) -> list[str]:
    entries = [seeded[n].descriptor.entry_spot_id for n in ("a", "b")]
    return sorted([*USER_SPOTS, "creating", *entries])


# -- inspect: list ------------------------------------------------------------------------------


def test_inspect_lists_one_line_per_record(capsys, sqlite_store):
    url, seeded = sqlite_store
    status, out, _ = run(capsys, "inspect", "--store", url)
    assert status == 0
    header, *lines, total = out.splitlines()
    assert header.split()[:4] == ["SPOT", "ID", "KIND", "TYPE"]
    assert [line.split()[0] for line in lines] == all_ids(seeded)
    r = seeded["a-1"]
    assert lines[0].split() == [
        "a-1", "user", "room", "ready", str(r.object_generation), "1",
        f"node-a/{r.owner.lifecycle_generation}", str(r.store_version)]  # by NodeId
    assert str(r.owner.node_rid) not in out  # the NodeRid is for --json
    assert "creating" in [line.split()[3] for line in lines]
    assert total == f"{len(lines)} record(s)"


def test_inspect_pages_with_cursor_and_all(capsys, sqlite_store):
    url, seeded = sqlite_store
    seen, cursor = [], None
    for _ in range(10):
        extra = ["--cursor", cursor] if cursor else []
        status, out, _ = run(capsys, "inspect", "--store", url, "--page-size", "2", *extra)
        assert status == 0
        lines = out.splitlines()
        seen += [line.split()[0] for line in lines[1:-1]]
        assert len(lines[1:-1]) <= 2
        if "--cursor" not in lines[-1]:
            break
        cursor = lines[-1].split("--cursor ")[1].split()[0]
    assert seen == all_ids(seeded)  # every record exactly once, in order
    status, out, _ = run(capsys, "inspect", "--store", url, "--page-size", "2", "--all")
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == all_ids(seeded)
    assert "more" not in out


def test_inspect_json_list(capsys, sqlite_store):
    url, seeded = sqlite_store
    status, out, _ = run(capsys, "inspect", "--store", url, "--json", "--page-size", "3",
                         "--all")
    assert status == 0
    document = json.loads(out)
    assert [r["spotId"] for r in document["records"]] == all_ids(seeded)
    assert document["nextCursor"] is None
    assert document["records"][0] == seeded["a-1"].to_json()
    status, out, _ = run(capsys, "inspect", "--store", url, "--json", "--page-size", "2")
    page = json.loads(out)
    assert len(page["records"]) == 2
    status, out, _ = run(capsys, "inspect", "--store", url, "--json", "--cursor",
                         page["nextCursor"])
    assert [r["spotId"] for r in json.loads(out)["records"]] == all_ids(seeded)[2:]


# -- inspect: one -------------------------------------------------------------------------------


def test_inspect_one_shows_every_field_and_the_owner_lease(capsys, sqlite_store):
    url, seeded = sqlite_store
    r = seeded["a-1"]
    status, out, _ = run(capsys, "inspect", "--store", url, "a-1")
    assert status == 0
    for field in ("spot id", "kind", "stable type", "mesh", "state", "object generation",
                  "owner generation", "store version", "owner", "owner lease",
                  "creation intent", "recovery pointer", "relocation target"):
        assert any(line.startswith(field) for line in out.splitlines()), field
    assert f"object generation  {r.object_generation}" in out
    assert "not live" in out
    assert "owner              node 'node-a' (lifecycle 1)\n" in out
    assert str(r.owner.node_rid) not in out
    *_, hint, _, node_hint = (line.strip() for line in out.splitlines())
    assert hint == (f"zlink-trio release --store {shlex.quote(url)} a-1 --generation "
                    f"{r.object_generation} --owner-generation 1")
    assert node_hint == f"zlink-trio release --store {shlex.quote(url)} --node node-a"
    status, out, _ = run(capsys, *shlex.split(hint)[1:])  # the hint is a command that works
    assert status == 0
    assert "released 'a-1'" in out
    status, out, _ = run(capsys, "inspect", "--store", url, "b-1")
    assert status == 0
    assert "live until" in out
    assert "zlink-trio release" not in out
    status, out, _ = run(capsys, "inspect", "--store", url, "a-2", "--json")
    shown = json.loads(out)
    assert shown["objectGeneration"] == str(seeded["a-2"].object_generation)
    assert shown["ownerLease"] == {"live": False, "expiresAt": None}
    status, out, _ = run(capsys, "inspect", "--store", url, "b-1", "--json")
    assert json.loads(out)["ownerLease"]["live"] is True


def test_inspect_missing_exits_1(capsys, sqlite_store):
    url, _ = sqlite_store
    status, out, _ = run(capsys, "inspect", "--store", url, "nope")
    assert status == 1
    assert "'nope' is Missing" in out
    status, out, _ = run(capsys, "inspect", "--store", url, "nope", "--json")
    assert (status, json.loads(out)) == (1, {"spotId": "nope", "state": "missing"})


def test_inspect_columns_line_up_whatever_the_values(capsys, sqlite_store):
    url, _ = sqlite_store
    status, out, _ = run(capsys, "inspect", "--store", url)
    assert status == 0
    header, *rows, _ = out.splitlines()
    assert max(len(row.split()[0]) for row in rows) > 24  # Entry IDs are long
    for heading in ("KIND", "TYPE", "STATE", "OWNER NODE/LIFECYCLE"):
        start = header.index(heading)
        for row in rows:
            assert row[start - 2:start] == "  ", (heading, row)
            assert row[start] != " ", (heading, row)
    for heading in ("GENERATION", "VERSION"):  # numbers end under their heading's end
        end = header.index(heading) + len(heading)
        assert all(row[end - 1].isdigit() and row[end:end + 1] in ("", " ") for row in rows)


def test_inspect_more_hint_is_the_command_that_continues(capsys, sqlite_store):
    url, seeded = sqlite_store
    status, out, _ = run(capsys, "inspect", "--store", url, "--page-size", "2")
    assert status == 0
    hint = out.splitlines()[-1].split("more: ", 1)[1].split("   (or add --all)")[0]
    argv = shlex.split(hint)
    assert argv[:5] == ["zlink-trio", "inspect", "--store", url, "--page-size"]
    status, out, _ = run(capsys, *argv[1:])
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == all_ids(seeded)[2:4]


def test_release_json(capsys, sqlite_store):
    url, seeded = sqlite_store
    r = seeded["a-1"]
    status, out, _ = run(capsys, "release", "--store", url, "a-1", "--generation",
                         str(r.object_generation), "--owner-generation", "1", "--json")
    assert status == 0
    assert json.loads(out) == {"released": r.to_json(), "inboxLeft": "0"}
    status, out, err = run(capsys, "release", "--store", url, "a-1", "--generation",
                           str(r.object_generation), "--owner-generation", "1", "--json")
    assert status == 1
    error = json.loads(out)["error"]
    assert (error["command"], error["status"]) == ("release", 1)
    assert error["message"] in err
    status, out, _ = run(capsys, "release", "--store", url, "--node", "node-a", "--json")
    assert status == 0
    shown = json.loads(out)
    assert shown["nodeId"] == "node-a"
    assert sorted(rec["spotId"] for rec in shown["released"]) == ["a-2", "a-3", "creating"]
    assert (shown["left"], shown["claimsRemoved"]) == ([], 1)


def test_usage_errors_are_json_too(capsys, sqlite_store):
    url, _ = sqlite_store
    status, out, _ = run(capsys, "inspect", "--store", url, "--cursor", "bogus", "--json")
    assert status == 2
    assert json.loads(out)["error"]["status"] == 2


# -- release ------------------------------------------------------------------------------------


def release(capsys, url, spot_id, generation, owner_generation=1):
    return run(capsys, "release", "--store", url, spot_id, "--generation", str(generation),
               "--owner-generation", str(owner_generation))


def test_release_frees_an_expired_owners_spot(capsys, sqlite_store):
    url, seeded = sqlite_store
    r = seeded["a-1"]
    status, out, err = release(capsys, url, "a-1", r.object_generation)
    assert (status, err) == (0, "")
    assert f"released 'a-1': generation {r.object_generation}" in out
    assert "owner node 'node-a' (lifecycle 1) (lease over)" in out
    assert "Missing now" in out
    assert trio.run(_find, url, "a-1") is None
    status, out, _ = run(capsys, "inspect", "--store", url, "a-1")
    assert status == 1
    # Again: nothing to release, said plainly.
    status, out, err = release(capsys, url, "a-1", r.object_generation)
    assert status == 1
    assert "not released" in err
    assert "Missing" in err


def test_release_warns_about_an_undelivered_inbox(capsys, tmp_path):
    url = f"sqlite://{tmp_path / 'store.db'}"
    seeded = trio.run(lambda: _populate(url, inbox=True))
    status, out, _ = release(capsys, url, "a-1", seeded["a-1"].object_generation)
    assert status == 0
    assert "1 unhandled record(s) remain" in out


def test_release_refuses_a_live_owner(capsys, sqlite_store):
    url, seeded = sqlite_store
    r = seeded["b-1"]
    status, out, err = release(capsys, url, "b-1", r.object_generation)
    assert (status, out) == (1, "")
    assert "refused" in err
    assert "live until" in err
    assert "must close the Spot itself" in err
    assert "the lease ends 20" in err  # ISO 8601
    assert "Traceback" not in err
    assert trio.run(_find, url, "b-1") == r


def test_release_refuses_a_stale_fence(capsys, sqlite_store):
    url, seeded = sqlite_store
    r = seeded["a-2"]
    status, _, err = release(capsys, url, "a-2", r.object_generation + 100)
    assert status == 1
    assert "re-read the authority" in err
    assert "the lease ends" not in err
    status, _, err = release(capsys, url, "a-2", r.object_generation, owner_generation=2)
    assert status == 1
    assert "owner generation 1, not 2" in err
    assert trio.run(_find, url, "a-2") == r


def test_release_refuses_entry_and_creating(capsys, sqlite_store):
    url, seeded = sqlite_store
    entry = seeded["a"].descriptor.entry_spot_id
    generation = trio.run(_find, url, entry).object_generation
    status, _, err = release(capsys, url, entry, generation)
    assert status == 1
    assert "Entry Spot" in err
    creating = trio.run(_find, url, "creating")
    status, _, err = release(capsys, url, "creating", creating.object_generation)
    assert status == 1
    assert "abort_creating" in err
    assert trio.run(_find, url, "creating") == creating


def test_release_node_releases_everything_a_dead_node_id_owned(capsys, sqlite_store):
    url, seeded = sqlite_store
    status, out, err = run(capsys, "release", "--store", url, "--node", "node-a")
    assert (status, err) == (0, ""), err
    for spot_id in ("a-1", "a-2", "a-3", "creating"):
        assert f"released {spot_id!r}" in out
        assert trio.run(_find, url, spot_id) is None
    assert "4 Spot(s) released, 0 left, 1 dead claim(s) removed" in out
    assert trio.run(_find, url, seeded["a"].descriptor.entry_spot_id) is None  # Entry claim
    assert trio.run(_find, url, "b-1") == seeded["b-1"]  # another node's Spot is untouched
    status, out, _ = run(capsys, "release", "--store", url, "--node", "node-a")
    assert status == 0
    assert "0 Spot(s) released, 0 left, 0 dead claim(s) removed" in out


def test_release_node_refuses_a_node_id_with_a_live_claim(capsys, sqlite_store):
    url, seeded = sqlite_store
    status, out, err = run(capsys, "release", "--store", url, "--node", "node-b")
    assert (status, out) == (1, "")
    assert "NodeId 'node-b' holds a live claim (lifecycle 1, lease until 20" in err
    assert str(seeded["b"].descriptor.node_rid) not in err
    assert "stop it, or wait for its lease to end" in err
    assert trio.run(_find, url, "b-1") == seeded["b-1"]


# -- nodes --all: the dead lifecycles that still own Spots ----------------------------------


def test_nodes_all_lists_a_dead_lifecycle_with_its_spots_and_the_command_to_release_them(
        capsys, sqlite_store):
    url, seeded = sqlite_store
    status, out, err = run(capsys, "nodes", "--store", url)
    assert (status, err) == (0, "")
    assert "node-a" not in out  # only the live ones without --all
    status, out, err = run(capsys, "nodes", "--store", url, "--all")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[:3] == [lines[0], lines[1], "1 live node(s)"]
    assert lines[1].split()[0] == "node-b"
    header, row, total = lines[3:6]
    assert header.split() == ["NODE", "ID", "MESH", "LIFECYCLE", "LEASE", "ENDED", "SPOTS", "TO",
                              "RELEASE", "THEM"]
    command = f"zlink-trio release --store {shlex.quote(url)} --node node-a"
    assert row.split()[:3] == ["node-a", "world", "1"]
    assert row.split()[4] == "4"  # a-1..a-3 and the Creating one
    assert row.endswith(command)
    assert total == "1 dead lifecycle(s) still own Spots"
    assert str(seeded["a"].descriptor.node_rid) not in out
    status, out, _ = run(capsys, "nodes", "--store", url, "--all", "--json")
    (dead,) = json.loads(out)["deadLifecycles"]
    assert dead == {"nodeId": "node-a", "nodeRid": str(seeded["a"].descriptor.node_rid),
                    "mesh": MESH, "lifecycleGeneration": 1, "leaseExpiresAt": dead[
                        "leaseExpiresAt"], "spots": 4, "spotsByState": {"creating": 1,
                                                                        "ready": 3},
                    "release": command}
    status, out, err = run(capsys, *shlex.split(command)[1:])  # the command works as printed
    assert (status, err) == (0, ""), err
    status, out, _ = run(capsys, "nodes", "--store", url, "--all")
    assert "no dead lifecycle owns Spots" in out
    assert json.loads(run(capsys, "nodes", "--store", url, "--all", "--json")[1])[
        "deadLifecycles"] == []


async def _remove_claim(url: str, claim) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_store(url) as store:
            assert await store.location.remove(MESH, claim.descriptor.node_rid, 1)


def test_an_owner_no_claim_names_any_more_is_shown_by_its_rid(capsys, sqlite_store):
    url, seeded = sqlite_store
    trio.run(_remove_claim, url, seeded["a"])
    rid = str(seeded["a"].descriptor.node_rid)
    status, out, _ = run(capsys, "nodes", "--store", url, "--all")
    assert status == 0
    (row,) = [line for line in out.splitlines() if line.startswith("(rid ")]
    assert row.startswith(f"(rid {rid})  ?")
    assert "no claim names its NodeId: release each Spot with zlink-trio release" in row
    status, out, _ = run(capsys, "inspect", "--store", url)
    assert f"(rid {rid})/1" in out.splitlines()[1]
    status, out, _ = run(capsys, "inspect", "--store", url, "a-1")
    assert (f"an unnamed lifecycle (lifecycle 1, rid {rid}: no claim of it was found to "
            "name its NodeId)") in out
    assert "--node" not in out  # no NodeId to release by


@pytest.mark.parametrize("argv", [
    ["--node", "node-a", "a-1"],
    ["--node", "node-a", "--generation", "1"],
    ["a-1", "--generation", "1"],
    [],
    ["--node", ""],
])
def test_release_usage_errors_say_which_form(capsys, sqlite_store, argv):
    url, _ = sqlite_store
    status, out, err = run(capsys, "release", "--store", url, *argv)
    assert (status, out) == (2, "")
    assert "error:" in err
    assert trio.run(_find, url, "a-1") is not None


# -- usage errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["inspect"],  # --store is required
    ["inspect", "--store", "memory://"],
    ["inspect", "--store", "memory://shared"],
    ["inspect", "--store", "ftp://x"],
    ["inspect", "--store", "sqlite:///no/such/dir/store.db"],
    ["inspect", "--store", "STORE", "--page-size", "0"],
    ["inspect", "--store", "STORE", "--page-size", "1001"],
    ["inspect", "--store", "STORE", "a-1", "--all"],
    ["inspect", "--store", "STORE", "--cursor", "bogus"],
    ["release", "--store", "STORE", "a-1", "--generation", "1"],
    ["release", "--store", "STORE", "a-1", "--generation", "0", "--owner-generation", "1"],
    ["release", "--store", "STORE", "a-1", "--generation", "x", "--owner-generation", "1"],
    ["release", "--store", "memory://", "a-1", "--generation", "1", "--owner-generation", "1"],
    ["release", "--store", "STORE", "", "--generation", "1", "--owner-generation", "1"],
    ["no-such-command"],
    [],
])
def test_usage_errors_exit_2(capsys, sqlite_store, argv):
    url, _ = sqlite_store
    status, _, err = run(capsys, *[url if a == "STORE" else a for a in argv])
    assert status == 2
    assert err
    assert "Traceback" not in err
    if "memory" in " ".join(argv):
        assert "in-process memory store" in err


def test_a_missing_sqlite_file_is_not_created(capsys, tmp_path):
    path = tmp_path / "typo.db"
    status, _, err = run(capsys, "inspect", "--store", f"sqlite://{path}")
    assert status == 2
    assert "no such file" in err
    assert not path.exists()


# -- the console script, and Redis --------------------------------------------------------------


def test_console_script_runs_inspect(sqlite_store):
    url, seeded = sqlite_store
    script = Path(sys.executable).with_name("zlink-trio")
    assert script.exists(), f"{script} is missing: pip install -e . in the venv"
    done = subprocess.run([str(script), "inspect", "--store", url, "--json", "--all"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert [r["spotId"] for r in json.loads(done.stdout)["records"]] == all_ids(seeded)
    missing = subprocess.run([str(script), "inspect", "--store", url, "nope"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 1


async def _drop_prefix(prefix: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection("redis://127.0.0.1:6379/0") as connection:
            await delete_matching(connection.call, f"{prefix}:*", per_command=500)


def test_inspect_and_release_on_redis(capsys):
    base = os.environ.get("ZLINK_TEST_REDIS") or "redis://127.0.0.1:6379/0"
    if base.split("?")[0] != "redis://127.0.0.1:6379/0":
        pytest.skip("this test cleans up on redis://127.0.0.1:6379/0 only")
    prefix = f"zltest-cli-{uuid.uuid4().hex[:12]}"
    url = f"{base.split('?')[0]}?prefix={prefix}"
    try:
        seeded = trio.run(_populate, url)
    except Unavailable as error:
        if os.environ.get("CI"):
            pytest.fail(f"Redis is not reachable: {error}")
        pytest.skip(f"Redis is not reachable: {error}")
    try:
        status, out, _ = run(capsys, "inspect", "--store", url, "--all", "--page-size", "2")
        assert status == 0
        assert [line.split()[0] for line in out.splitlines()[1:-1]] == all_ids(seeded)
        status, _, err = release(capsys, url, "b-1", seeded["b-1"].object_generation)
        assert status == 1
        assert "must close the Spot itself" in err
        status, out, _ = release(capsys, url, "a-3", seeded["a-3"].object_generation)
        assert status == 0
        status, out, _ = run(capsys, "inspect", "--store", url, "a-3")
        assert status == 1
    finally:
        trio.run(_drop_prefix, prefix)
