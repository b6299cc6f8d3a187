"""The memory store's shared handled inbox: it stands for every drained first record
and is never changed by the writers (``store.rules.relocation_store.HANDLED_FIRST``)."""

from __future__ import annotations

from zlink_trio.store.rules import relocation_store as rel


def test_a_handled_first_record_shares_one_inbox_and_later_appends_get_their_own():
    state = rel.RelocationState()
    for spot_id in ("a", "b"):
        assert rel.txn_inbox_append(state, spot_id, 7, b"first") == 1
        assert rel.txn_inbox_set_cursor(state, spot_id, 7, 1)
    assert state.inboxes[("a", 7)] is state.inboxes[("b", 7)] is rel.HANDLED_FIRST
    assert not rel.txn_inbox_set_cursor(state, "a", 7, 1)  # nothing to move
    assert rel.txn_inbox_append(state, "a", 7, b"second") == 2
    assert rel.txn_inbox_read(state, "a", 7, limit=10) == [rel.InboxRecord(2, b"second")]
    assert rel.txn_inbox_cursor(state, "a", 7) == 1
    assert state.inboxes[("b", 7)] is rel.HANDLED_FIRST
    assert rel.Inbox(None, 1, 1) == rel.HANDLED_FIRST  # unchanged
    assert rel.txn_inbox_set_cursor(state, "a", 7, 2)
    assert rel.txn_inbox_read(state, "a", 7, limit=10) == []
    assert rel.txn_statistics(state).inboxes == 2
