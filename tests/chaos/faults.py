"""The fault rows of the chaos harness: what each one does to a running cluster.

A :class:`Fault` has an optional :meth:`~Fault.prepare` (runs before the cluster starts;
may put a relay in front of the store and return the URL the nodes use) and
:meth:`~Fault.inject`, which breaks something under load, heals it, and returns the
*heal* times after which every Spot must serve again (see ``checker.serve_again``). Each
records its steps in ``cluster.events``. Durations come from :class:`Knobs` (the lease,
long mode), so a fault "past the lease" stays past it whatever the lease is.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import urlsplit, urlunsplit

import attrs
import trio
from relay import Relay

if TYPE_CHECKING:
    import random
    from contextlib import AsyncExitStack

    from cluster import Cluster

__all__ = ("FAULTS", "Fault", "Knobs")


@attrs.frozen
class Knobs:
    lease: float
    long: bool
    seed: int

    def hold(self, short: float, long: float) -> float:
        return long if self.long else short


def victim(cluster: Cluster, rng: random.Random) -> str:
    """A server that owns at least one Spot (the one owning most, ties at random)."""
    owned: dict[str, int] = dict.fromkeys(cluster.servers, 0)
    for owner in cluster.owners().values():
        if owner in owned:
            owned[owner] += 1
    best = max(owned.values())
    return rng.choice(sorted(name for name, count in owned.items() if count == best))


@attrs.define
class Fault:
    """One row: a name, the backends it applies to, and what the runtime promises."""

    name: ClassVar[str] = ""
    backends: ClassVar[tuple[str, ...]] = ("sqlite", "redis")
    promise: ClassVar[str] = ""
    #: Whether a node may lose its lease in this row (else a loss breaks a promise).
    may_lose_lease: ClassVar[bool] = False
    #: Whether every call must succeed (the fault only slows things down).
    no_errors: ClassVar[bool] = False
    #: Deadlines of callers ``c0``, ``c1``, ... (the others: ``scenario.DEADLINE``).
    caller_deadlines: ClassVar[tuple[float, ...]] = ()
    #: Whether the fault acts on the whole store server (a Redis ``CLIENT PAUSE``): the
    #: row then runs on a server of its own (``stores.chaos_store``), never the shared one.
    acts_on_the_store_server: ClassVar[bool] = False
    #: Whether every counter keeps its count through the fault (a reset fails the row).
    keeps_state: ClassVar[bool] = False
    #: Whether the servers keep each count as durable state (``--durable``): no count
    #: may go back, and the saves the store refused are counted.
    durable: ClassVar[bool] = False
    #: With ``durable``: every fifth handled call sets a durable reminder due this many
    #: seconds later (``--remind``); every one set must be delivered (0: none set).
    remind_after: ClassVar[float] = 0.0
    #: How many counter Spots the row loads.
    spots: ClassVar[int] = 12
    #: Every Spot serves again within this many leases of the (last) heal, if set.
    serves_within_leases: ClassVar[float | None] = None

    async def prepare(self, stack: AsyncExitStack, url: str, knobs: Knobs) -> str:
        return url

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        raise NotImplementedError


class LinkCut(Fault):
    name = "link cut"
    promise = ("calls to the cut node's Spots end Unavailable (or DeadlineExceeded) "
               "within their deadline; the other Spots keep serving; after the heal every "
               "Spot serves again (the next call dials again)")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        name = victim(cluster, rng)
        relay = cluster.relays[name]
        cluster.mark("fault", what="cut", node=name)
        relay.cut()
        await trio.sleep(knobs.hold(1.2, 6.0))
        relay.heal()
        return [cluster.mark("heal", node=name)]


class LinkDelay(Fault):
    name = "link delay"
    no_errors = True
    promise = ("every call to the delayed node's Spots is slower by the delay and still "
               "answered within its deadline: no error, none late")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        name = victim(cluster, rng)
        relay = cluster.relays[name]
        cluster.mark("fault", what="delay 0.2 s each way", node=name)
        relay.delay(0.2)
        await trio.sleep(knobs.hold(1.2, 6.0))
        relay.heal()
        return [cluster.mark("heal", node=name)]


class LinkBlackhole(Fault):
    name = "link black-hole"
    promise = ("calls to the silent node's Spots end DeadlineExceeded (or Unavailable) at "
               "their deadline, none later; once the bytes flow again every Spot serves")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        name = victim(cluster, rng)
        relay = cluster.relays[name]
        cluster.mark("fault", what="black-hole", node=name)
        relay.blackhole()
        await trio.sleep(knobs.hold(2.3, 8.0))  # past the 2 s deadline
        relay.heal()
        return [cluster.mark("heal", node=name)]


class SigstopZombie(Fault):
    name = "SIGSTOP past the lease (zombie)"
    may_lose_lease = True
    #: ``c1`` waits longer than the freeze: a turn the zombie runs or finishes once
    #: resumed would reach it as an ``ok`` (a zombie ack), not a DeadlineExceeded.
    caller_deadlines = (2.0, 10.0)
    promise = ("the frozen owner's Spots answer Unavailable / DeadlineExceeded; a "
               "replacement process under the same NodeId takes them over once the frozen "
               "lease ran out; the zombie, resumed, starts no turn and acknowledges nothing "
               "past its lease (the turn it was frozen in may run to its end: a frozen "
               "overlap, reported) and leaves; every Spot serves again")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        name = victim(cluster, rng)
        zombie = cluster.servers[name]
        await zombie.send(op="no_reopen")  # resumed, it must leave, not claim again
        # Freeze it in the middle of a turn: ``c1`` sends one whose handler takes 0.8 s
        # longer, to a Spot the victim owns, and the freeze comes 0.3 s into it.
        spot = rng.choice(sorted(s for s, owner in cluster.owners().items() if owner == name))
        await cluster.callers[1].send(op="slow", spot=spot, hold=0.8, deadline=10.0)
        await trio.sleep(0.3)
        zombie.signal(signal.SIGSTOP)
        cluster.mark("fault", what="SIGSTOP in a turn", node=name, pid=zombie.proc.pid,
                     spot=spot)
        await trio.sleep(knobs.lease * 1.3)  # its lease has run out
        restart = cluster.mark("restart", node=name)
        replacement = await cluster.start_server(name)
        await replacement.wait_for("open", 1, 30)
        # At most 3 s more: the zombie resumes before ``c1``'s 10 s calls give up.
        await cluster.wait_served(restart, 3.0)
        zombie.signal(signal.SIGCONT)
        resumed = cluster.mark("resume", node=name, pid=zombie.proc.pid)
        await trio.sleep(knobs.hold(1.0, 5.0))
        return [restart, resumed]


class SigkillRestart(Fault):
    name = "SIGKILL + restart"
    promise = ("calls in flight to the killed node end Unavailable (may or may not have "
               "run; never acknowledged without running); once the process restarted under "
               "the same NodeId has opened (it waits the dead lease out), every Spot serves "
               "again within 2 leases")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        name = victim(cluster, rng)
        await trio.sleep(rng.uniform(0.0, knobs.hold(0.8, 3.0)))  # a random moment
        proc = cluster.kill(name)
        cluster.mark("fault", what="SIGKILL", node=name, pid=proc.proc.pid)
        await proc.proc.wait()
        restart = cluster.mark("restart", node=name)
        replacement = await cluster.start_server(name)
        opened = await replacement.wait_for("open", 1, 30)  # it waited the dead lease out
        cluster.mark("reopened", node=name, at=opened["t"])
        return [restart]


class DurableSigkillRestart(SigkillRestart):
    name = "SIGKILL + restart, durable state"
    durable = True
    promise = ("each counter keeps its count as durable state: the one on the killed node "
               "goes on, in its next incarnation, from its last acknowledged save -- no "
               "count goes back (0 lost saves), no save of the dead owner is applied; every "
               "Spot serves again within 2 leases of the restart")


class DurableSigstopZombie(SigstopZombie):
    name = "SIGSTOP past the lease while the successor saves (durable state)"
    durable = True
    promise = ("the frozen owner's successor loads each count and saves on; the zombie, "
               "resumed in a turn, has its save refused by the store (counted: "
               "refused_writes) and acknowledges nothing; no count goes back")


class RemindersSigkillRestart(SigkillRestart):
    name = "reminders across SIGKILL + restart"
    durable = True
    remind_after = 1.0
    promise = ("the counters set durable reminders due 1 s later as they count; those due "
               "while the killed node is down -- its own Spots' too -- reach their Spots "
               "once it restarted: every reminder set is delivered at least once (0 lost; "
               "redeliveries counted)")


def _redis_port(url: str) -> int:
    return urlsplit(url).port or 6379


class RollingRestart(Fault):
    name = "rolling restart (SIGTERM, 300 counters)"
    keeps_state = True
    spots = 300
    promise = ("each server in turn gets SIGTERM, drains (its counters move to the other "
               "servers with their counts) and exits; it is started again before the next: "
               "no acknowledged request lost or applied twice, no counter reset, every "
               "error typed")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        restarts = []
        for name in sorted(cluster.servers):
            proc = cluster.servers[name]
            cluster.mark("fault", what="SIGTERM", node=name, pid=proc.proc.pid)
            proc.signal(signal.SIGTERM)
            with trio.fail_after(30):
                await proc.proc.wait()
            cluster.mark("exited", node=name, code=proc.proc.returncode)
            restarts.append(cluster.mark("restart", node=name))
            replacement = await cluster.start_server(name)
            await replacement.wait_for("open", 1, 30)
        return restarts


class RedisFlush(Fault):
    name = "Redis FLUSHALL (the store lost its data)"
    backends = ("redis",)
    may_lose_lease = True
    acts_on_the_store_server = True
    serves_within_leases = 2.0
    promise = ("every node learns at its next renewal that its claim is gone, stops its "
               "Spots without touching the store and rejoins the Mesh by itself under the "
               "same NodeId: every Spot serves again within 2 leases, no two owners run "
               "turns side by side")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        from zlink_trio.store.redis.admin import open_connection

        parts = urlsplit(cluster.store)
        server = f"redis://{parts.hostname or '127.0.0.1'}:{parts.port or 6379}/0"
        async with open_connection(server) as client:
            await client.command(["FLUSHALL"])
        flushed = cluster.mark("fault", what="FLUSHALL")
        # Every node rejoins by itself (its second open), within 2 leases: the recovery
        # phase, and the run's last calls, come after that.
        for proc in [*cluster.servers.values(), *cluster.callers]:
            await proc.wait_for("open", 2, 2 * knobs.lease + 3)
        rejoined = cluster.mark("rejoined")
        # The nodes served on their old leases for a moment after the flush, so "an ok
        # call since the heal" is no proof of service after the rejoin: the run goes on
        # once every Spot answered a call started after it (else a Spot's last call could
        # be one that failed while the nodes rejoined, the run over before its next one).
        await cluster.wait_served(rejoined, 2 * knobs.lease + 3)
        return [flushed]


class RedisPause(Fault):
    name = "Redis CLIENT PAUSE past the lease"
    backends = ("redis",)
    may_lose_lease = True
    acts_on_the_store_server = True
    serves_within_leases = 2.0
    promise = ("every node loses its lease: its calls end Unavailable (typed), it runs no "
               "work and rejoins the Mesh by itself; every Spot serves again within 2 leases "
               "of the pause's end")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        from zlink_trio.store.redis.admin import open_connection

        pause = knobs.lease * 1.6
        parts = urlsplit(cluster.store)
        server = f"redis://{parts.hostname or '127.0.0.1'}:{parts.port or 6379}/0"
        async with open_connection(server) as client:
            try:
                # The pause ends by itself after ``pause`` even if this process dies.
                await client.command(["CLIENT", "PAUSE", round(pause * 1000)])
                cluster.mark("fault", what=f"CLIENT PAUSE {pause:.1f} s")
                await trio.sleep(pause)
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await client.command(["CLIENT", "UNPAUSE"])
        return [cluster.mark("heal")]


class RedisRelayCut(Fault):
    name = "Redis link cut (relay)"
    backends = ("redis",)
    promise = ("a store outage shorter than the lease: calls that need the store fail "
               "typed (StoreUnavailable / Unavailable) or wait within their deadline; no "
               "node loses its lease; after the heal every Spot serves")
    relay: Relay | None = None

    def outage(self, knobs: Knobs) -> float:
        return knobs.lease * 0.5

    async def prepare(self, stack: AsyncExitStack, url: str, knobs: Knobs) -> str:
        relay = self.relay = Relay(upstream=_redis_port(url))
        nursery = await stack.enter_async_context(trio.open_nursery())
        stack.callback(nursery.cancel_scope.cancel)
        await nursery.start(relay.serve)
        parts = urlsplit(url)
        return urlunsplit(parts._replace(netloc=f"127.0.0.1:{relay.port}"))

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        assert self.relay is not None
        cluster.mark("fault", what="cut the store link")
        self.relay.cut()
        await trio.sleep(self.outage(knobs))
        self.relay.heal()
        return [cluster.mark("heal")]


LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


class SqliteLock(Fault):
    name = "SQLite file locked"
    backends = ("sqlite",)
    promise = ("another process holds BEGIN EXCLUSIVE past the busy timeout (shorter "
               "than the lease): store writes fail typed (StoreUnavailable / Unavailable) "
               "within their deadline, no lease is lost; after the release every Spot "
               "serves")

    def outage(self, knobs: Knobs) -> float:
        return knobs.lease * 0.6

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        hold = self.outage(knobs)
        return await _hold_lock(cluster, [LOCKER, urlsplit(cluster.store).path], hold,
                                f"BEGIN EXCLUSIVE for {hold:.1f} s")


async def _hold_lock(cluster: Cluster, script: list[str], hold: float, what: str
                     ) -> list[float]:
    """Run ``python -c script...`` (a locker: it prints ``locked`` once it holds the lock,
    and lets go at a line on its stdin) for ``hold`` seconds, marked as fault ``what``."""
    locker = await trio.lowlevel.open_process(
        [sys.executable, "-c", *script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert locker.stdout is not None
    assert locker.stdin is not None
    try:
        with trio.fail_after(10):
            assert (await locker.stdout.receive_some(64)).startswith(b"locked")
        cluster.mark("fault", what=what)
        await trio.sleep(hold)
        await locker.stdin.send_all(b"\n")
        with trio.fail_after(10):
            await locker.wait()
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            if locker.returncode is None:
                locker.kill()
            await locker.wait()
            await locker.stdin.aclose()
            await locker.stdout.aclose()
    return [cluster.mark("heal")]


class RedisRelayCutPastLease(RedisRelayCut):
    name = "Redis link cut past the lease"
    may_lose_lease = True
    serves_within_leases = 2.0
    promise = ("a store outage of 2 leases: every node loses its lease (calls end "
               "Unavailable, typed), runs no work and rejoins the Mesh by itself once the "
               "store answers; every Spot serves again within 2 leases of that")

    def outage(self, knobs: Knobs) -> float:
        return knobs.lease * 2.0


class SqliteLockPastLease(SqliteLock):
    name = "SQLite file locked past the lease"
    may_lose_lease = True
    serves_within_leases = 2.0
    promise = RedisRelayCutPastLease.promise

    def outage(self, knobs: Knobs) -> float:
        return knobs.lease * 2.0


POSTGRES_LOCKER = """
import psycopg, sys
conn = psycopg.connect(sys.argv[1], autocommit=True)
conn.execute("BEGIN")
conn.execute("SELECT pg_advisory_xact_lock(%s)", (int(sys.argv[2]),))
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


def _postgres(url: str) -> tuple[str, str, int]:
    """The libpq URL, the prefix and the write lock's key of a ``postgresql://`` store."""
    from zlink_trio.store.postgres.schema import parse_url

    options = parse_url(url)
    return options.conninfo, options.prefix, options.lock_key


class PostgresLock(Fault):
    name = "PostgreSQL write lock held"
    backends = ("postgresql",)
    promise = ("another connection holds the store's write lock (the prefix's advisory "
               "lock) past the store's ?timeout= (shorter than the lease): store writes fail "
               "typed (StoreUnavailable / Unavailable) within their deadline, no lease is "
               "lost; after the release every Spot serves")

    def outage(self, knobs: Knobs) -> float:
        return knobs.lease * 0.6

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        conninfo, _, key = _postgres(cluster.store)
        hold = self.outage(knobs)
        return await _hold_lock(cluster, [POSTGRES_LOCKER, conninfo, str(key)], hold,
                                f"advisory write lock held for {hold:.1f} s")


class PostgresLockPastLease(PostgresLock):
    name = "PostgreSQL write lock held past the lease"
    may_lose_lease = True
    serves_within_leases = 2.0
    promise = ("a store outage of 2 leases: every node loses its lease (calls end "
               "Unavailable, typed), runs no work and rejoins the Mesh by itself; every "
               "Spot serves again within 2 leases of the release")

    def outage(self, knobs: Knobs) -> float:
        return knobs.lease * 2.0


class PostgresTerminate(Fault):
    name = "PostgreSQL connections terminated"
    backends = ("postgresql",)
    may_lose_lease = True
    serves_within_leases = 2.0
    promise = ("every connection of the store is ended by the server "
               "(pg_terminate_backend), three times within a lease: the transactions in "
               "flight fail typed and write nothing, the connections are replaced; every "
               "Spot serves again within 2 leases")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        import psycopg

        conninfo, prefix, _ = _postgres(cluster.store)

        def terminate() -> int:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s", (f"zlink_trio:{prefix}",)).fetchall()
            return len(rows)

        for _ in range(3):
            ended = await trio.to_thread.run_sync(terminate)
            cluster.mark("fault", what=f"pg_terminate_backend of {ended} connections")
            await trio.sleep(knobs.lease / 3)
        return [cluster.mark("heal")]


class PostgresRestart(Fault):
    name = "PostgreSQL server restarted"
    backends = ("postgresql",)
    may_lose_lease = True
    serves_within_leases = 3.0
    promise = ("the server restarts under traffic (pg_ctlcluster restart: every "
               "connection ends, the server is gone for about a lease): calls that need "
               "the store fail typed or wait within their deadline, nothing acknowledged is "
               "lost or applied twice (the server keeps what it committed), nodes that "
               "lose their lease rejoin; every Spot serves again within 3 leases")

    async def inject(self, cluster: Cluster, knobs: Knobs, rng: random.Random) -> list[float]:
        clusters = (await trio.run_process(["pg_lsclusters", "-h"], capture_stdout=True)
                    ).stdout.decode().split()
        version, name = clusters[0], clusters[1]
        cluster.mark("fault", what=f"pg_ctlcluster {version} {name} restart")
        with trio.fail_after(30):
            await trio.run_process(["pg_ctlcluster", version, name, "restart"])
        return [cluster.mark("heal")]


FAULTS: dict[str, type[Fault]] = {
    "link-cut": LinkCut, "link-delay": LinkDelay, "link-blackhole": LinkBlackhole,
    "sigstop-zombie": SigstopZombie, "sigkill-restart": SigkillRestart,
    "redis-pause": RedisPause, "redis-relay-cut": RedisRelayCut,
    "redis-relay-cut-past-lease": RedisRelayCutPastLease, "sqlite-lock": SqliteLock,
    "sqlite-lock-past-lease": SqliteLockPastLease, "rolling-restart": RollingRestart,
    "redis-flush": RedisFlush, "durable-sigkill-restart": DurableSigkillRestart,
    "durable-sigstop-zombie": DurableSigstopZombie,
    "reminders-sigkill-restart": RemindersSigkillRestart,
    "postgres-lock": PostgresLock, "postgres-lock-past-lease": PostgresLockPastLease,
    "postgres-terminate": PostgresTerminate, "postgres-restart": PostgresRestart,
}
