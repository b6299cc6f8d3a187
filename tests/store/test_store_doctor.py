"""``zlink-trio doctor`` (``zlink_trio/cli/doctor.py``): each check on a real store, and
the judgements on facts that a test cannot make a real server show (a skewed clock,
replicas, an NFS mount).

The command runs as from a shell (``cli.main``, its own ``trio.run``) in a worker thread
for the live stores; every I/O test under ``trio.fail_after``.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest
import trio
from postgres_helpers import fresh_url as fresh_postgres_url
from redis_helpers import own_server, raw_client, redis_test_store

import zlink_trio as zl
from zlink_trio import cli
from zlink_trio.cli.doctor import filesystem_of, judge_postgres, judge_server, judge_skew
from zlink_trio.store.redis.admin import open_connection
from zlink_trio.store.sqlite.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from pathlib import Path

LIMIT = 30


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    status = cli.main(["doctor", *args, "--json", "--timeout", "5"])
    return status, json.loads(capsys.readouterr().out)


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {check["check"]: check["status"] for check in report["checks"]}


async def new_sqlite_store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    async with zl.open_node("node-a", store=url):
        pass
    return url


async def test_a_store_nodes_opened_passes_every_check(tmp_path, capsys):
    with trio.fail_after(LIMIT):
        url = await new_sqlite_store(tmp_path)
        status, report = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
    assert status == 0
    assert report["ok"] is True
    assert statuses(report) == {"reachable": "ok", "schema": "ok", "clock": "ok",
                                "wal": "ok", "filesystem": "ok"}
    (schema,) = [c for c in report["checks"] if c["check"] == "schema"]
    assert schema["facts"] == {"version": SCHEMA_VERSION, "known": SCHEMA_VERSION}


@pytest.mark.parametrize(("version", "status", "words"), [
    (SCHEMA_VERSION + 1, "fail", "upgrade zlink_trio"),
    (SCHEMA_VERSION - 1, "warn", "migrates it in place"),
])
async def test_a_schema_other_than_this_codes_is_said(tmp_path, capsys, version, status,
                                                       words):
    with trio.fail_after(LIMIT):
        url = await new_sqlite_store(tmp_path)
    connection = sqlite3.connect(tmp_path / "store.db")
    connection.execute(f"PRAGMA user_version = {version}")
    connection.close()
    with trio.fail_after(LIMIT):
        code, report = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
    assert code == 1
    (schema,) = [c for c in report["checks"] if c["check"] == "schema"]
    assert schema["status"] == status
    assert words in schema["message"]


async def test_a_file_not_in_wal_mode_fails(tmp_path, capsys):
    with trio.fail_after(LIMIT):
        url = await new_sqlite_store(tmp_path)
    connection = sqlite3.connect(tmp_path / "store.db")
    connection.execute("PRAGMA journal_mode = DELETE")
    connection.close()
    with trio.fail_after(LIMIT):
        code, report = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
    assert code == 1
    assert statuses(report)["wal"] == "fail"
    # Read-only: the doctor changed nothing.
    connection = sqlite3.connect(tmp_path / "store.db")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    connection.close()


def test_the_mount_of_a_path_is_the_longest_one_that_holds_it(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/sda1 / ext4 rw 0 0\n"
                      "server:/export /srv/data nfs4 rw 0 0\n"
                      "server:/other /srv/database nfs rw 0 0\n")
    assert filesystem_of("/srv/data/store.db", str(mounts)) == "nfs4"
    assert filesystem_of("/srv/database-not/x.db", str(mounts)) == "ext4"
    assert filesystem_of("/srv/data", str(mounts)) == "nfs4"
    assert filesystem_of("/x", str(tmp_path / "absent")) is None


def test_memory_and_unknown_stores_are_usage_errors(capsys):
    assert cli.main(["doctor", "--store", "memory://"]) == 2
    assert cli.main(["doctor", "--store", "sqlite:///no/such/file.db"]) == 2
    assert cli.main(["doctor", "--store", "nosuch://x"]) == 2
    capsys.readouterr()


def test_a_clock_a_tenth_of_the_lease_apart_fails():
    assert judge_skew("s", 0.002, 0.001, 10.0).status == "ok"
    ahead = judge_skew("s", 1.5, 0.001, 10.0)
    assert ahead.status == "fail"
    assert "ahead of" in ahead.message
    assert "NTP" in ahead.message
    assert judge_skew("s", -1.0, 0.001, 10.0).status == "fail"
    assert judge_skew("s", -1.0, 0.001, 30.0).status == "ok"


@pytest.mark.parametrize(("config", "status", "words"), [
    ({"save": "", "appendonly": "no", "appendfsync": "everysec"}, "warn", "keeps nothing"),
    ({"save": "3600 1", "appendonly": "no", "appendfsync": "everysec"}, "warn",
     "RDB snapshots only"),
    ({"save": "", "appendonly": "yes", "appendfsync": "everysec"}, "warn", "appendfsync"),
    ({"save": "", "appendonly": "yes", "appendfsync": "always"}, "ok", "every write"),
    ({"configError": "ERR unknown command 'CONFIG'"}, "warn", "could not be read"),
])
def test_what_a_redis_restart_may_lose_is_said(config, status, words):
    facts = {"skew": 0.0, "roundTrip": 0.0, "replicas": 0, **config}
    checks = judge_server("s:1", facts, 10.0)
    (durability,) = [c for c in checks if c.check == "durability"]
    assert durability.status == status
    assert words in durability.message
    assert [c.check for c in checks] == ["clock", "durability"]


def test_replicas_without_wait_are_a_risk_of_failover():
    facts = {"skew": 0.0, "roundTrip": 0.0, "replicas": 2, "save": "",
             "appendonly": "yes", "appendfsync": "always"}
    (replicas,) = [c for c in judge_server("s:1", facts, 10.0) if c.check == "replicas"]
    assert replicas.status == "warn"
    assert "failover" in replicas.message
    assert "rejoin" in replicas.message


async def test_a_live_redis_is_judged_by_its_own_configuration(capsys):
    with trio.fail_after(LIMIT):
        async with own_server() as url, open_connection(url) as server:
            await server.command(["CONFIG", "SET", "save", ""])
            await server.command(["CONFIG", "SET", "appendonly", "no"])
            lossy = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
            await server.command(["CONFIG", "SET", "appendonly", "yes"])
            await server.command(["CONFIG", "SET", "appendfsync", "always"])
            durable = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
    assert lossy[0] == 1
    assert statuses(lossy[1]) == {"reachable": "ok", "schema": "ok", "clock": "ok",
                                  "durability": "warn"}
    assert durable[0] == 0
    assert statuses(durable[1])["durability"] == "ok"


async def test_a_redis_that_does_not_answer_fails_reachable(capsys):
    with trio.fail_after(LIMIT):
        async with own_server() as url:
            pass  # stopped: nothing listens there now
        code, report = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
    assert code == 1
    assert statuses(report) == {"reachable": "fail"}


async def test_a_redis_cluster_is_judged_master_by_master(capsys):
    import redis_helpers

    with trio.fail_after(LIMIT):
        async with redis_helpers.cluster_test_store():
            url = redis_helpers.cluster_url()
            code, report = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
    masters = report["checks"][0]["facts"]["masters"]
    assert report["checks"][0]["status"] == "ok"
    assert len(masters) >= 3
    clocks = [c for c in report["checks"] if c["check"] == "clock"]
    assert sorted(c["facts"]["server"] for c in clocks) == sorted(masters)
    assert code == (0 if report["ok"] else 1)


async def test_the_test_redis_answers_the_doctor(capsys):
    with trio.fail_after(LIMIT):
        async with redis_test_store() as store, raw_client() as client:
            assert store is not None
            await client.command(["PING"])
            from redis_helpers import REDIS_URL
            code, report = await trio.to_thread.run_sync(doctor, capsys, "--store", REDIS_URL)
    assert statuses(report)["reachable"] == "ok"
    assert statuses(report)["clock"] == "ok"
    assert code == (0 if report["ok"] else 1)


async def test_a_postgres_store_is_reachable_versioned_and_durable(capsys):
    with trio.fail_after(LIMIT):
        async with fresh_postgres_url() as url:
            code, before = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
            async with zl.open_node("node-a", store=url):
                pass
            code_after, after = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
    # This machine's server commits synchronously, with no replica.
    assert code == code_after == 0
    assert statuses(before) == statuses(after) == {
        "reachable": "ok", "schema": "ok", "clock": "ok", "durability": "ok"}
    schema = [c for c in before["checks"] if c["check"] == "schema"]
    assert "first node creates it" in schema[0]["message"]
    (schema,) = [c for c in after["checks"] if c["check"] == "schema"]
    assert schema["facts"]["version"] == schema["facts"]["known"]


async def test_an_older_postgres_schema_is_said_to_be_migrated_by_the_next_node(capsys):
    import psycopg
    from postgres_helpers import POSTGRES_URL

    from zlink_trio.store.postgres.schema import parse_url as parse_postgres_url

    with trio.fail_after(LIMIT):
        async with fresh_postgres_url() as url:
            async with zl.open_node("node-a", store=url):
                pass
            prefix = parse_postgres_url(url).prefix
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                conn.execute(f'UPDATE "{prefix}".zlink_meta SET value = 1 '  # type: ignore[arg-type]
                             "WHERE key = 'schema_version'")
            code, report = await trio.to_thread.run_sync(doctor, capsys, "--store", url)
    assert code == 1
    (schema,) = [c for c in report["checks"] if c["check"] == "schema"]
    assert schema["status"] == "warn"
    assert "the next node to open it migrates it" in schema["message"]


def test_a_postgres_server_that_may_lose_commits_is_said():
    base = {"synchronous_commit": "on", "fsync": "on", "full_page_writes": "on",
            "synchronous_standby_names": ""}
    assert judge_postgres("s", base, 0).status == "ok"
    lossy = judge_postgres("s", {**base, "synchronous_commit": "off"}, 0)
    assert lossy.status == "warn"
    assert "synchronous_commit" in lossy.message
    assert judge_postgres("s", {**base, "fsync": "off"}, 0).status == "fail"
    failover = judge_postgres("s", base, 2)
    assert failover.status == "warn"
    assert "failover" in failover.message
    assert judge_postgres("s", {**base, "synchronous_standby_names": "FIRST 1 (r1)"},
                          2).status == "ok"
