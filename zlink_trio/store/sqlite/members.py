"""SQLite store: a container's Actor members, read from the ``loc_records`` columns.

Theory of operation
-------------------
An Actor is a member of the container its record names (docs/actors.md) and, while it
moves to another node, of its next container too (``AuthorityRecord.next_container``:
its container at the target, so that neither container can close under it). Membership
is no table of its own: the ``container`` and ``next_container`` columns of
``loc_records`` hold those two names of an Actor's row (NULL on a Spot's row, and
``next_container`` NULL unless the Actor moves), each under a partial index
(``schema``, version 3). A row's columns are written with its body, so the members of
a container are always exactly the rows that name it -- there is no second copy to
disagree.

A container's members are therefore two index ranges, one in each index, joined with
``UNION ALL``: no scan and no sort (an Actor's ``container`` and ``next_container`` are
never the same Spot -- the next one is owned by another node -- so no row is in both
ranges; callers still key the rows by ID). Both queries return the rows in no
particular order; the oracle (``store.rules.membership.txn_members``) orders members
by ActorId.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from zlink_trio.store.sqlite.session import SqlSession

__all__ = ("member_ids", "member_rows")

#: The IDs of the rows naming the container, given twice (covering: each index holds
#: the ID).
_IDS: Final = ("SELECT spot_id FROM loc_records WHERE container = ? "
               "UNION ALL SELECT spot_id FROM loc_records WHERE next_container = ?")
#: The IDs and bodies of the rows naming the container, given twice.
_ROWS: Final = ("SELECT spot_id, body FROM loc_records WHERE container = ? "
                "UNION ALL SELECT spot_id, body FROM loc_records WHERE next_container = ?")


def member_ids(conn: SqlSession, container: str) -> set[str]:
    """The IDs of the Actors whose rows name ``container`` (container or next container)."""
    return {row[0] for row in conn.execute(_IDS, (container, container))}


def member_rows(conn: SqlSession, container: str) -> dict[str, str]:
    """ActorId -> stored body of every Actor whose row names ``container``, as
    :func:`member_ids` (in no particular order)."""
    return dict(conn.execute(_ROWS, (container, container)).fetchall())
