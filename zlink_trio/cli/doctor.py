"""``zlink-trio doctor --store URL [--lease SECONDS] [--json]``: is this store fit for nodes?

Theory of operation
-------------------
The runtime needs four things from a shared store: that it answers, that its schema is
one this code knows, that its clock agrees with the hosts' (leases are stamped with the
nodes' wall clocks and judged against them), and that what it acknowledged survives a
restart or a failover of the store. ``doctor`` checks each without writing anything and
says, for every finding, what may happen and what to do:

- **reachable** -- the store opens and answers (``PING`` on Redis, ``CLUSTER SHARDS``
  on Redis Cluster, the file opens read-only on SQLite);
- **schema** -- SQLite's ``user_version`` against ``store.sqlite.schema.SCHEMA_VERSION``
  (newer: nodes refuse it; older: the next node migrates it at open), PostgreSQL's
  ``zlink_meta`` against ``store.postgres.schema.SCHEMA_VERSION``; Redis keys carry no
  schema version (they are written as they are used), which is said as such;
- **clock** -- the server's clock (``TIME``; PostgreSQL's ``clock_timestamp()``) against
  this host's, judged against the
  lease (``--lease``, default the nodes' 10 s): a skew of a tenth of the lease or more
  is a problem. A node whose clock runs ahead sees others' leases end early, one that
  runs behind keeps acting on its own after it ended; NTP on every host is the fix. An
  SQLite store lives on this host: it has no clock of its own to disagree;
- **durability** -- PostgreSQL: ``fsync`` or ``full_page_writes`` off may corrupt the
  database on a crash; ``synchronous_commit`` off loses the last acknowledged commits;
  replicas none of which is synchronous (``synchronous_standby_names``) may lose them in
  a failover. Redis: snapshots (``save``) and the append-only file
  (``appendonly``, ``appendfsync``) both off means a restart of the server loses every
  record; ``appendfsync`` other than ``always`` loses the last second or so of writes;
  replicas mean a failover may lose writes the master acknowledged (the runtime does not
  ``WAIT`` for them). After such a loss the nodes find their claims gone, drop their
  Spots and rejoin (docs/reliability.md); messages in flight fail typed. SQLite: WAL
  must be on, and the file must not be on a network filesystem (its locks are not
  reliable there: two writers could both commit).

Each check is ``ok``, ``warn`` (a risk the operator should know and accept or fix) or
``fail`` (nodes will not work, or may duplicate a Spot). Output: one line per check,
``STATUS  CHECK  message``; ``--json`` prints ``{"store", "checks": [{"check",
"status", "message", "facts"}], "ok"}``.

Exit status: 0 every check ``ok``; 1 a check warned or failed (or the store did not
answer); 2 usage error (a bad URL, ``memory://``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs
import trio

from zlink_trio.cli.store_command import (
    EXIT_OK,
    EXIT_REFUSED,
    UsageError,
    add_store_arguments,
    check_url,
    run_command,
)
from zlink_trio.core.errors import Unavailable
from zlink_trio.store.redis.admin import open_connection
from zlink_trio.store.redis.store import parse_redis_url
from zlink_trio.store.redis_cluster.store import parse_cluster_url
from zlink_trio.store.sqlite.schema import SCHEMA_VERSION, parse_url

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ("Check", "add_parser", "diagnose", "run")

Status = Literal["ok", "warn", "fail"]

#: The nodes' default lease (``TimingOptions.lease``), what ``--lease`` defaults to.
DEFAULT_LEASE: Final = 10.0
#: Filesystem types on which SQLite's locks cannot be trusted.
NETWORK_FILESYSTEMS: Final = frozenset({
    "nfs", "nfs4", "cifs", "smb", "smb2", "smbfs", "fuse.sshfs", "9p", "afs", "glusterfs",
    "fuse.glusterfs", "ceph", "fuse.ceph", "lustre", "gpfs", "davfs", "fuse.s3fs",
    "fuse.rclone", "virtiofs"})
_REJOIN: Final = ("the nodes then find their claims gone, drop their Spots and rejoin; "
                  "calls in flight fail with a typed error")


@attrs.frozen
class Check:
    """One finding: which check, how it went, what it means and what to do."""

    check: str
    status: Status
    message: str
    #: What was read, as JSON-able values (``--json``).
    facts: dict[str, Any] = attrs.Factory(dict)

    def to_json(self) -> dict[str, Any]:
        """The finding as ``--json`` prints it."""
        return {"check": self.check, "status": self.status, "message": self.message,
                "facts": self.facts}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``doctor``."""
    parser = commands.add_parser(
        "doctor", help="check that a store is fit for nodes: reachable, schema, clock, "
                       "durability",
        description="Check what the runtime needs from a shared store -- that it answers, "
                    "its schema version, its clock against this host's, and what a restart "
                    "or failover of the store may lose -- and say what to do. Read-only. "
                    "Exit 0 all well, 1 a risk or a problem found, 2 usage error.")
    add_store_arguments(parser)
    parser.add_argument("--lease", type=float, default=DEFAULT_LEASE, metavar="SECONDS",
                        help="the nodes' lease, to judge the clock skew against (default "
                             f"{DEFAULT_LEASE:g})")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``doctor`` (exit status as in the module docstring)."""
    url: str = args.store

    async def body() -> int:
        if not args.lease > 0:
            raise UsageError(f"--lease must be a positive number of seconds, got {args.lease}")
        checks = await diagnose(url, lease=args.lease, timeout=args.timeout)
        healthy = all(check.status == "ok" for check in checks)
        if args.json:
            print(json.dumps({"store": _shown(url), "checks": [c.to_json() for c in checks],
                              "ok": healthy}))
        else:
            for check in checks:
                print(f"{check.status.upper():<5} {check.check:<11} {check.message}")
        return EXIT_OK if healthy else EXIT_REFUSED

    return run_command("doctor", body, as_json=args.json)


async def diagnose(url: str, *, lease: float = DEFAULT_LEASE,
                   timeout: float = 30.0) -> list[Check]:  # noqa: ASYNC109
    """The checks of the store ``url`` names (the module docstring lists them).

    Raises :class:`UsageError` for a URL no command can use.
    """
    check_url(url)
    scheme = url.partition("://")[0].lower()
    if scheme == "sqlite":
        return _sqlite(url)
    if scheme == "redis":
        return await _redis(url, lease, timeout)
    if scheme == "redis+cluster":
        return await _cluster(url, lease, timeout)
    if scheme in ("postgresql", "postgres"):
        return await trio.to_thread.run_sync(_postgres, url, lease)
    raise UsageError(f"doctor knows sqlite://, redis://, redis+cluster:// and postgresql:// "
                     f"stores, not {scheme}://")


def _shown(url: str) -> str:
    """``url`` without a password."""
    head, at, tail = url.partition("@")
    if not at:
        return url
    scheme, _, userinfo = head.partition("://")
    return f"{scheme}://{userinfo.partition(':')[0]}@{tail}"


# ---------------------------------------------------------------------- SQLite


def _sqlite(url: str) -> list[Check]:
    path = parse_url(url).path
    try:
        # (An existing file, check_url made sure; nothing here writes to it.)
        connection = sqlite3.connect(path, timeout=5.0)
        try:
            connection.execute("PRAGMA query_only = 1")
            version = int(connection.execute("PRAGMA user_version").fetchone()[0])
            journal = str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        return [Check("reachable", "fail", f"{path} could not be read ({exc}); "
                      "check the path and that this user may read it", {"path": path})]
    checks = [Check("reachable", "ok", f"{path} opens", {"path": path})]
    if version > SCHEMA_VERSION:
        checks.append(Check("schema", "fail", f"schema version {version} is newer than this "
                            f"zlink_trio knows ({SCHEMA_VERSION}): its nodes refuse the file; "
                            "upgrade zlink_trio", {"version": version, "known": SCHEMA_VERSION}))
    elif version < SCHEMA_VERSION:
        checks.append(Check("schema", "warn", f"schema version {version}, older than "
                            f"{SCHEMA_VERSION}: the next node to open it migrates it in "
                            "place, and older zlink_trio versions cannot open it after that",
                            {"version": version, "known": SCHEMA_VERSION}))
    else:
        checks.append(Check("schema", "ok", f"schema version {version}",
                            {"version": version, "known": SCHEMA_VERSION}))
    checks.append(Check("clock", "ok", "one host: the file has no clock of its own, every "
                        "node on it reads this host's", {}))
    if journal == "wal":
        checks.append(Check("wal", "ok", "journal_mode is WAL", {"journalMode": journal}))
    else:
        checks.append(Check("wal", "fail", f"journal_mode is {journal}, not WAL: the nodes "
                            "set WAL when they open the file, so it was changed since or "
                            "never opened by a node; open a node on it, or run PRAGMA "
                            "journal_mode=WAL", {"journalMode": journal}))
    filesystem = filesystem_of(path)
    if filesystem in NETWORK_FILESYSTEMS:
        checks.append(Check("filesystem", "fail", f"the file is on a {filesystem} network "
                            "filesystem, where SQLite's locks are not reliable: two nodes "
                            "could both commit and one Spot run twice. Keep the file on a "
                            "local disk, or use a Redis or PostgreSQL store for several hosts",
                            {"type": filesystem}))
    else:
        checks.append(Check("filesystem", "ok", f"local filesystem ({filesystem or 'unknown'})",
                            {"type": filesystem}))
    return checks


def filesystem_of(path: str, mounts: str = "/proc/mounts") -> str | None:
    """The filesystem type of the mount holding ``path`` (from ``mounts``, Linux's
    table); ``None`` when it cannot be read."""
    try:
        table = Path(mounts).read_text()
    except OSError:
        return None
    target = os.path.realpath(path)
    best: tuple[int, str] | None = None
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > best[0]):
            best = (len(point), fields[2])
    return None if best is None else best[1]


# ---------------------------------------------------------------------- PostgreSQL


def _postgres(url: str, lease: float) -> list[Check]:
    """The PostgreSQL checks (blocking: run in a thread)."""
    from zlink_trio.store.postgres.schema import SCHEMA_VERSION as POSTGRES_SCHEMA
    from zlink_trio.store.postgres.schema import parse_url as parse_postgres_url

    try:
        import psycopg
    except ImportError as error:
        raise UsageError(f"the PostgreSQL checks need psycopg 3 ({error}); install "
                         "zlink-trio[postgres]") from error
    options = parse_postgres_url(url)
    where = options.server
    try:
        connection = psycopg.connect(options.conninfo, autocommit=True,
                                     connect_timeout=max(1, round(options.timeout)))
    except psycopg.Error as exc:
        return [Check("reachable", "fail", f"PostgreSQL at {where} did not answer ({exc}); "
                      "start it or fix the URL", {})]
    try:
        def one(sql: str, *args: object) -> Any:
            row = connection.execute(sql, args).fetchone()
            return None if row is None else row[0]

        sent = time.time()
        server_time = float(one("SELECT extract(epoch FROM clock_timestamp())"))
        received = time.time()
        has_meta = one("SELECT count(*) FROM information_schema.tables WHERE "
                       "table_schema = %s AND table_name = 'zlink_meta'", options.prefix)
        version = (one(f'SELECT value FROM "{options.prefix}".zlink_meta '
                       "WHERE key = 'schema_version'") if has_meta else None)
        facts = {name: one(f"SHOW {name}") for name in (
            "synchronous_commit", "fsync", "full_page_writes", "synchronous_standby_names")}
        replicas = int(one("SELECT count(*) FROM pg_stat_replication"))
    except psycopg.Error as exc:
        return [Check("reachable", "fail", f"PostgreSQL at {where} answered, but could not "
                      f"be read ({exc}); check the user's rights", {})]
    finally:
        connection.close()
    checks = [Check("reachable", "ok", f"PostgreSQL at {where} answers", {})]
    if version is None:
        checks.append(Check("schema", "ok", f"no zlink_trio schema under prefix "
                            f"{options.prefix!r} yet: the first node creates it",
                            {"version": None, "known": POSTGRES_SCHEMA}))
    elif int(version) > POSTGRES_SCHEMA:
        checks.append(Check("schema", "fail", f"schema version {version} is newer than this "
                            f"zlink_trio knows ({POSTGRES_SCHEMA}): its nodes refuse it; "
                            "upgrade zlink_trio",
                            {"version": int(version), "known": POSTGRES_SCHEMA}))
    elif int(version) < POSTGRES_SCHEMA:
        checks.append(Check("schema", "warn", f"schema version {version}, older than "
                            f"{POSTGRES_SCHEMA}: the next node to open it migrates it in "
                            "place, and older zlink_trio versions cannot open it after that",
                            {"version": int(version), "known": POSTGRES_SCHEMA}))
    else:
        checks.append(Check("schema", "ok", f"schema version {version}",
                            {"version": int(version), "known": POSTGRES_SCHEMA}))
    checks.append(judge_skew(where, server_time - (sent + received) / 2, received - sent,
                             lease))
    checks.append(judge_postgres(where, facts, replicas))
    return checks


def judge_postgres(where: str, facts: dict[str, Any], replicas: int) -> Check:
    """The durability check of one PostgreSQL server from its settings and replicas."""
    shown = {**facts, "replicas": replicas}
    if facts.get("fsync") == "off" or facts.get("full_page_writes") == "off":
        return Check("durability", "fail", f"{where} runs with fsync or full_page_writes "
                     "off: a crash of its host may corrupt the database, not only lose the "
                     f"last writes; {_REJOIN}. Turn both on", shown)
    if facts.get("synchronous_commit") == "off":
        return Check("durability", "warn", f"{where} has synchronous_commit off: a crash of "
                     "the server loses the last commits it acknowledged (up to three times "
                     f"wal_writer_delay); {_REJOIN}. Set synchronous_commit = on", shown)
    if replicas and not (facts.get("synchronous_standby_names") or "").strip():
        return Check("durability", "warn", f"{where} has {replicas} replica(s), all "
                     "asynchronous (synchronous_standby_names is empty): a failover to one "
                     f"may lose commits the primary acknowledged; {_REJOIN}. Name them in "
                     "synchronous_standby_names", shown)
    return Check("durability", "ok", f"{where} flushes every commit before it answers "
                 f"(synchronous_commit {facts.get('synchronous_commit')})", shown)


# ---------------------------------------------------------------------- Redis


async def _redis(url: str, lease: float, timeout: float) -> list[Check]:  # noqa: ASYNC109
    config = parse_redis_url(url)
    where = f"{config.host}:{config.port}"
    try:
        with trio.fail_after(timeout):
            async with open_connection(url) as server:
                await server.command(["PING"])
                facts = await _server_facts(server.command)
    except (Unavailable, OSError, trio.TooSlowError) as exc:
        return [Check("reachable", "fail", f"Redis at {where} did not answer ({exc}); start "
                      "it or fix the URL", {"server": where})]
    checks = [Check("reachable", "ok", f"Redis at {where} answers", {"server": where}),
              Check("schema", "ok", "Redis keys carry no schema version: they are written "
                    "as they are used", {})]
    checks.extend(judge_server(where, facts, lease))
    return checks


async def _cluster(url: str, lease: float,
                   timeout: float) -> list[Check]:  # noqa: ASYNC109
    from zlink_trio.store import open_store
    from zlink_trio.store.redis.resp import encode_command
    from zlink_trio.store.redis_cluster.store import RedisClusterStore

    config = parse_cluster_url(url)
    try:
        with trio.fail_after(timeout):
            async with open_store(url) as store:
                assert isinstance(store, RedisClusterStore)
                router = store.router
                per_master = []
                for address in router.masters():
                    async def command(args: Sequence[str | int | bytes],
                                      address: Any = address) -> Any:
                        return await router.call_master(address, encode_command(args))
                    per_master.append((address, await _server_facts(command)))
    except (Unavailable, OSError, trio.TooSlowError) as exc:
        return [Check("reachable", "fail", f"Redis Cluster at {config.where} did not answer "
                      f"({exc}); start it or list reachable masters in the URL", {})]
    checks = [Check("reachable", "ok", f"Redis Cluster answers: {len(per_master)} masters",
                    {"masters": [_address(a) for a, _ in per_master]}),
              Check("schema", "ok", "Redis keys carry no schema version: they are written "
                    "as they are used", {})]
    for address, facts in per_master:
        checks.extend(judge_server(_address(address), facts, lease))
    return checks


def _address(address: Any) -> str:
    host, port = address
    return f"{host}:{port}"


async def _server_facts(command: Any) -> dict[str, Any]:
    """What the durability and clock checks read of one server."""
    facts: dict[str, Any] = {}
    sent = time.time()
    seconds, micros = await command(["TIME"])
    received = time.time()
    server_time = int(seconds) + int(micros) / 1e6
    facts["skew"] = server_time - (sent + received) / 2
    facts["roundTrip"] = received - sent
    try:
        for name in ("save", "appendonly", "appendfsync"):
            reply = await command(["CONFIG", "GET", name])
            facts[name] = _text(reply[1]) if len(reply) >= 2 else None
    except Exception as exc:  # CONFIG renamed or refused (a managed Redis): say so
        facts["configError"] = str(exc)
    info = _text(await command(["INFO", "replication"]))
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    facts["role"] = fields.get("role")
    facts["replicas"] = int(fields.get("connected_slaves", "0") or 0)
    return facts


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def judge_server(where: str, facts: dict[str, Any], lease: float) -> list[Check]:
    """The clock and durability checks of one Redis server from its ``facts``."""
    checks = [judge_skew(where, facts["skew"], facts["roundTrip"], lease)]
    if "configError" in facts:
        checks.append(Check("durability", "warn", f"{where}: its configuration could not be "
                            f"read ({facts['configError']}); check with its operator that "
                            "it keeps what it acknowledges (AOF with appendfsync always)",
                            {"server": where}))
    else:
        snapshots = bool((facts.get("save") or "").strip())
        aof = facts.get("appendonly") == "yes"
        fsync = facts.get("appendfsync")
        shown = {"server": where, "save": facts.get("save"), "appendonly": facts.get(
            "appendonly"), "appendfsync": fsync}
        if not snapshots and not aof:
            checks.append(Check("durability", "warn", f"{where} keeps nothing on disk (no RDB "
                                "snapshots, no AOF): a restart of it loses every record and "
                                f"claim; {_REJOIN}. Turn on appendonly yes with appendfsync "
                                "always where losing the store is not acceptable", shown))
        elif not aof:
            checks.append(Check("durability", "warn", f"{where} keeps RDB snapshots only: a "
                                "restart loses what was written since the last one; "
                                f"{_REJOIN}. Turn on appendonly yes with appendfsync always",
                                shown))
        elif fsync != "always":
            checks.append(Check("durability", "warn", f"{where} writes its AOF with "
                                f"appendfsync {fsync}: a crash of the server (or its host) "
                                "loses the last writes it acknowledged (about a second with "
                                f"everysec); {_REJOIN}. Use appendfsync always to lose none",
                                shown))
        else:
            checks.append(Check("durability", "ok", f"{where} fsyncs its AOF on every write",
                                shown))
    replicas = facts.get("replicas", 0)
    if replicas:
        checks.append(Check("replicas", "warn", f"{where} has {replicas} replica(s), written "
                            "asynchronously: the runtime does not WAIT for them, so a failover "
                            "to one may lose writes the master acknowledged; "
                            f"{_REJOIN}", {"server": where, "replicas": replicas}))
    return checks


def judge_skew(where: str, skew: float, round_trip: float, lease: float) -> Check:
    """The clock check: ``skew`` (server minus this host, seconds, ± half ``round_trip``)
    against ``lease``."""
    facts = {"server": where, "skewSeconds": round(skew, 4),
             "roundTripSeconds": round(round_trip, 4), "leaseSeconds": lease}
    ahead = "ahead of" if skew > 0 else "behind"
    if abs(skew) >= lease / 10:
        return Check("clock", "fail", f"{where}'s clock is {abs(skew):.3f} s {ahead} this "
                     f"host's, a tenth of the {lease:g} s lease or more: leases are judged "
                     "by the hosts' clocks, so a host running ahead sees another's lease end "
                     "early and may take its Spots while it still serves them. Synchronise "
                     "every host and the store with NTP", facts)
    return Check("clock", "ok", f"{where}'s clock is {abs(skew) * 1000:.1f} ms {ahead} this "
                 f"host's (lease {lease:g} s)", facts)

