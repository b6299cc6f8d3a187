"""A SQLite open that finds the file locked is tried again until the busy timeout
(issue #13 item 2: several processes opening one fresh file at once).

SQLite answers "database is locked" at once, without its busy handler, to a connection
that opens a file while another switches it to WAL or recovers its index; the store
retries such an open every 10-50 ms until ``busy_timeout`` and only then fails.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from zlink_trio.core.errors import StoreUnavailable
from zlink_trio.store.sqlite.connection import SqliteConnection
from zlink_trio.store.sqlite.schema import SqliteOptions, parse_url

if TYPE_CHECKING:
    from pathlib import Path

LOCKED = StoreUnavailable("SQLite store 'x' is locked by another connection past the busy "
                          "timeout (database is locked); nothing was written")


def _options(tmp_path: Path, busy_timeout: float) -> SqliteOptions:
    return parse_url(f"sqlite://{tmp_path / 's.db'}?busy_timeout={busy_timeout}")


def test_a_locked_open_is_tried_again_and_then_opens(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    real = SqliteConnection._open_once
    tries: list[float] = []

    def flaky(options: SqliteOptions) -> Any:
        tries.append(time.monotonic())
        if len(tries) < 3:
            raise LOCKED
        return real(options)

    monkeypatch.setattr(SqliteConnection, "_open_once", staticmethod(flaky))
    connection = SqliteConnection.open_sync(_options(tmp_path, 5))
    connection._conn.close()
    assert len(tries) == 3


def test_a_file_locked_past_the_busy_timeout_is_store_unavailable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tries: list[float] = []

    def locked(options: SqliteOptions) -> Any:
        tries.append(time.monotonic())
        raise LOCKED

    monkeypatch.setattr(SqliteConnection, "_open_once", staticmethod(locked))
    with pytest.raises(StoreUnavailable, match="locked"):
        SqliteConnection.open_sync(_options(tmp_path, 0.2))
    assert len(tries) > 2
    assert tries[-1] - tries[0] <= 0.2


def test_any_other_open_failure_is_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tries: list[int] = []

    def broken(options: SqliteOptions) -> Any:
        tries.append(1)
        raise StoreUnavailable("SQLite store 'x' failed: file is not a database")

    monkeypatch.setattr(SqliteConnection, "_open_once", staticmethod(broken))
    with pytest.raises(StoreUnavailable, match="not a database"):
        SqliteConnection.open_sync(_options(tmp_path, 5))
    assert tries == [1]
