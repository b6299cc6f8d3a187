"""The trusted constructors build exactly what the checking constructors build."""

from __future__ import annotations

import hashlib

import attrs
import pytest

from zlink_trio.core._roots import receipt_of_digest
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import NodeRid, SpotKind
from zlink_trio.core.records import (
    AuthorityRecord,
    AuthorityState,
    OwnerFence,
    RecoveryPointer,
    ReservationFence,
    RootReceipt,
    record_of,
    reservation_fence,
)

OWNER = OwnerFence(NodeRid(bytes(range(1, 17))), 3)
DIGEST = hashlib.sha256(b"root").hexdigest()


def _fields(value: object) -> dict[str, object]:
    return {f.name: getattr(value, f.name) for f in attrs.fields(type(value))}


def test_record_of_equals_the_checked_record():
    pointer = RecoveryPointer(root_ref=f"sha256:{DIGEST}", sha256=DIGEST, size=4)
    fields = dict(spot_id="s-1", kind=SpotKind.INSTANCE, stable_type="t", mesh="m",
                  state=AuthorityState.CREATING, object_generation=7, owner_generation=1,
                  store_version=1, owner=OWNER, recovery_pointer=pointer)
    checked = AuthorityRecord(**fields)
    trusted = record_of(**fields)
    assert type(trusted) is AuthorityRecord
    assert trusted == checked
    assert hash(trusted) == hash(checked)
    assert _fields(trusted) == _fields(checked)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        trusted.state = AuthorityState.READY  # type: ignore[misc]


def test_reservation_fence_equals_the_checked_fence():
    record = record_of("s-1", SpotKind.USER, "t", "m", AuthorityState.CREATING, 9, 1, 1, OWNER)
    checked = ReservationFence(spot_id="s-1", store_version=1, object_generation=9,
                               owner_generation=1, owner=OWNER, owner_lease_expires_at=12.5)
    trusted = reservation_fence(record, 12.5)
    assert trusted == checked
    assert _fields(trusted) == _fields(checked)


def test_receipt_and_pointer_shortcuts_equal_the_checked_values():
    receipt = receipt_of_digest(DIGEST, 4)
    assert receipt == RootReceipt(ref=f"sha256:{DIGEST}", sha256=DIGEST, size=4)
    pointer = RecoveryPointer.from_receipt(receipt)
    assert pointer == RecoveryPointer(root_ref=receipt.ref, sha256=DIGEST, size=4, version=1)
    assert pointer.receipt() == receipt
    assert RecoveryPointer.from_receipt(receipt, version=2).version == 2


@pytest.mark.parametrize(("digest", "size"), [
    ("F" * 64, 4), (DIGEST[:-1], 4), (DIGEST, -1), (DIGEST, True), (DIGEST, 64 * 1024 * 1024 + 1),
])
def test_receipt_of_digest_still_refuses_what_a_receipt_refuses(digest: str, size: int):
    with pytest.raises(InvalidOperation):
        receipt_of_digest(digest, size)
