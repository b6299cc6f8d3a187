"""``PostgresSession``: a psycopg connection seen as a ``store.sqlite.session.SqlSession``.

The SQL backends' transaction bodies write their statements once, with ``?``
placeholders, in the SQL SQLite and PostgreSQL both accept. psycopg takes ``%s``
placeholders (and reads a literal ``%`` as the start of one), so :func:`translated`
rewrites each statement once -- ``?`` becomes ``%s``, ``%`` becomes ``%%`` -- and keeps
the result (the statements are a fixed set). One function has no common spelling:
SQLite's ``json_extract(column, '$.key')`` (SQL NULL for a missing key or a JSON null)
becomes ``(column::jsonb ->> 'key')``, which answers the same. Nothing else differs:
psycopg's cursors have ``fetchone``, ``fetchall``, iteration and ``rowcount``.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import psycopg

__all__ = ("PostgresSession", "translated")

_JSON_EXTRACT: Final = re.compile(r"json_extract\((\w+), '\$\.(\w+)'\)")


@cache
def translated(sql: str) -> str:
    """``sql`` as PostgreSQL and psycopg take it (see the module docstring)."""
    sql = _JSON_EXTRACT.sub(r"(\1::jsonb ->> '\2')", sql)
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresSession:
    """``execute`` / ``executemany`` of a psycopg connection, with ``?`` placeholders."""

    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        """Run one statement (see the module docstring)."""
        return self._conn.execute(translated(sql), parameters)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /,
                    ) -> psycopg.Cursor[Any]:
        """Run one statement once per parameter row."""
        cursor = self._conn.cursor()
        cursor.executemany(translated(sql), seq_of_parameters)
        return cursor
