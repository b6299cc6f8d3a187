"""Pointers into the Relocation Store: a root's receipt, a creation intent, a recovery pointer.

Theory of operation
-------------------
The Relocation Store keeps immutable *roots* (a creation request, an
activation recovery root, a relocation payload) addressed by ``(ref,
sha256, size)``. :class:`RootReceipt` is that address as the store returns
it. An authority record points at a root in two ways: a Creating record
carries the :class:`CreationIntent` of its creation request (docs/concepts.md,
"Intent"), and an incarnation whose activation must be recoverable carries a
:class:`RecoveryPointer` (docs/stores.md, "Crash recovery"). Both convert to and from a
receipt, and to and from the JSON objects an authority record is stored as.

These values sit below :mod:`zlink_trio.core.records`, which re-exports
them: the record imports them, never the other way round. All are frozen
attrs classes whose validators raise :class:`InvalidOperation`; nothing
here does I/O or reads a clock.

Hot paths build these from parts that are valid already -- a receipt from the
digest the store just computed, a pointer from a receipt, which passed the same
checks when it was built -- so :func:`receipt_of_digest` and
:meth:`RecoveryPointer.from_receipt` set the fields without running the
validators again (each validator pass is most of such a value's cost).
"""

from __future__ import annotations

from typing import Final

import attrs

from zlink_trio.core._checks import (
    MAX_GENERATION,
    check_generation,
    check_int,
    check_sha256_hex,
    check_text,
)
from zlink_trio.core._json_fields import json_int, json_object, json_str

__all__ = (
    "MAX_CREATION_REQUEST_BYTES",
    "MAX_ROOT_BYTES",
    "CreationIntent",
    "RecoveryPointer",
    "RootReceipt",
    "receipt_of_digest",
)

#: Largest encoded creation request (1 MiB).
MAX_CREATION_REQUEST_BYTES: Final = 1024 * 1024
#: Largest immutable root the Relocation Store keeps (activation envelopes, relocation payloads).
MAX_ROOT_BYTES: Final = 64 * 1024 * 1024

_RECEIPT_KEYS: Final = frozenset({"ref", "sha256", "size"})
_INTENT_KEYS: Final = frozenset({"contentRef", "sha256", "size"})
_POINTER_KEYS: Final = frozenset({"rootRef", "sha256", "size", "version"})


def _ref(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    check_text(value, attribute.name)


def _sha(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    check_sha256_hex(value, attribute.name)


def _version(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    check_generation(value, attribute.name)


@attrs.frozen(kw_only=True)
class RootReceipt:
    """Names one immutable Relocation Store root: ``(ref, sha256, size)``.

    The store returns it from ``put_root``; readers pass it back, and the
    store refuses to return bytes whose SHA-256 or size differ from it.
    """

    ref: str = attrs.field(validator=_ref)
    sha256: str = attrs.field(validator=_sha)
    size: int = attrs.field()

    @size.validator
    def _size(self, attribute: attrs.Attribute[int], value: int) -> None:
        check_int(value, "root size", 0, MAX_ROOT_BYTES)

    def to_json(self) -> dict[str, object]:
        """Encode as ``{"ref", "sha256", "size"}`` (a moving record's relocation payload)."""
        return {"ref": self.ref, "sha256": self.sha256, "size": self.size}

    @classmethod
    def from_json(cls, value: object) -> RootReceipt:
        """Decode :meth:`to_json`'s object; :class:`InvalidOperation` when malformed."""
        raw = json_object(value, _RECEIPT_KEYS, "root receipt")
        return cls(ref=json_str(raw["ref"], "ref"), sha256=json_str(raw["sha256"], "sha256"),
                   size=json_int(raw["size"], "size", 0, MAX_ROOT_BYTES))


_new: Final = object.__new__
# The slots' own setters: they bypass the frozen ``__setattr__`` and the validators.
_SET_REF: Final = RootReceipt.__dict__["ref"].__set__
_SET_SHA: Final = RootReceipt.__dict__["sha256"].__set__
_SET_SIZE: Final = RootReceipt.__dict__["size"].__set__


def _receipt(ref: str, sha256: str, size: int) -> RootReceipt:
    # Only for fields that passed RootReceipt's (or an equally strict) validation.
    receipt: RootReceipt = _new(RootReceipt)
    _SET_REF(receipt, ref)
    _SET_SHA(receipt, sha256)
    _SET_SIZE(receipt, size)
    return receipt


def receipt_of_digest(digest: str, size: int) -> RootReceipt:
    """The receipt ``sha256:<digest>`` of a root of ``size`` bytes.

    For the store that just hashed the bytes: ``digest`` is what ``hexdigest()``
    returned. Its two cheap checks keep the receipt's contract (64 lowercase hex
    digits, a size within :data:`MAX_ROOT_BYTES`); the validators do not run again.
    """
    if (type(digest) is not str or len(digest) != 64 or digest.strip("0123456789abcdef")
            or type(size) is not int or not 0 <= size <= MAX_ROOT_BYTES):
        return RootReceipt(ref=f"sha256:{digest}", sha256=digest, size=size)  # raises
    return _receipt(f"sha256:{digest}", digest, size)


@attrs.frozen(kw_only=True)
class CreationIntent:
    """The immutable creation request a Creating record points to.

    The request bytes live in the Relocation Store under ``content_ref``; the
    target checks SHA-256 and size before it runs the factory. At most 1 MiB.
    """

    content_ref: str = attrs.field(validator=_ref)
    sha256: str = attrs.field(validator=_sha)
    size: int = attrs.field()

    @size.validator
    def _size(self, attribute: attrs.Attribute[int], value: int) -> None:
        check_int(value, "creation request size", 0, MAX_CREATION_REQUEST_BYTES)

    @classmethod
    def from_receipt(cls, receipt: RootReceipt) -> CreationIntent:
        """Point at a root holding the encoded request; InvalidOperation over 1 MiB."""
        return cls(content_ref=receipt.ref, sha256=receipt.sha256, size=receipt.size)

    def receipt(self) -> RootReceipt:
        """The receipt to read the request back with."""
        return RootReceipt(ref=self.content_ref, sha256=self.sha256, size=self.size)

    def to_json(self) -> dict[str, object]:
        """Encode as ``{"contentRef", "sha256", "size"}`` (the authority record's field)."""
        return {"contentRef": self.content_ref, "sha256": self.sha256, "size": self.size}

    @classmethod
    def from_json(cls, value: object) -> CreationIntent:
        """Decode :meth:`to_json`'s object; :class:`InvalidOperation` when malformed."""
        raw = json_object(value, _INTENT_KEYS, "creation intent")
        return cls(
            content_ref=json_str(raw["contentRef"], "contentRef"),
            sha256=json_str(raw["sha256"], "sha256"),
            size=json_int(raw["size"], "size", 0, MAX_CREATION_REQUEST_BYTES))


@attrs.frozen(kw_only=True)
class RecoveryPointer:
    """Links an incarnation to its activation recovery root, for restart recovery.

    ``version`` is the format version of the root's content (1 =
    ``instance-activation-recovery-v1``); it is data, not a CAS token: the
    pointer is removed by a CAS on the record's StoreVersion.
    """

    root_ref: str = attrs.field(validator=_ref)
    sha256: str = attrs.field(validator=_sha)
    size: int = attrs.field()
    version: int = attrs.field(default=1, validator=_version)

    @size.validator
    def _size(self, attribute: attrs.Attribute[int], value: int) -> None:
        check_int(value, "recovery root size", 0, MAX_ROOT_BYTES)

    @classmethod
    def from_receipt(cls, receipt: RootReceipt, *, version: int = 1) -> RecoveryPointer:
        """Point at a root the Relocation Store confirmed.

        A :class:`RootReceipt`'s fields passed the pointer's own checks (same text,
        digest and size bounds) when it was built, so with the default version they
        are taken as they are.
        """
        if cls is not RecoveryPointer or type(receipt) is not RootReceipt or version != 1:
            return cls(root_ref=receipt.ref, sha256=receipt.sha256, size=receipt.size,
                       version=version)
        pointer: RecoveryPointer = _new(RecoveryPointer)
        _SET_POINTER_REF(pointer, receipt.ref)
        _SET_POINTER_SHA(pointer, receipt.sha256)
        _SET_POINTER_SIZE(pointer, receipt.size)
        _SET_POINTER_VERSION(pointer, 1)
        return pointer

    def receipt(self) -> RootReceipt:
        """The receipt to read or delete the root with."""
        # The pointer's fields passed the receipt's checks (same bounds) when it was built.
        return _receipt(self.root_ref, self.sha256, self.size)

    def to_json(self) -> dict[str, object]:
        """Encode as ``{"rootRef", "sha256", "size", "version"}`` (the record's field)."""
        return {"rootRef": self.root_ref, "sha256": self.sha256, "size": self.size,
                "version": self.version}

    @classmethod
    def from_json(cls, value: object) -> RecoveryPointer:
        """Decode :meth:`to_json`'s object; :class:`InvalidOperation` when malformed."""
        raw = json_object(value, _POINTER_KEYS, "recovery pointer")
        return cls(
            root_ref=json_str(raw["rootRef"], "rootRef"),
            sha256=json_str(raw["sha256"], "sha256"),
            size=json_int(raw["size"], "size", 0, MAX_ROOT_BYTES),
            version=json_int(raw["version"], "version", 1, MAX_GENERATION))


_SET_POINTER_REF: Final = RecoveryPointer.__dict__["root_ref"].__set__
_SET_POINTER_SHA: Final = RecoveryPointer.__dict__["sha256"].__set__
_SET_POINTER_SIZE: Final = RecoveryPointer.__dict__["size"].__set__
_SET_POINTER_VERSION: Final = RecoveryPointer.__dict__["version"].__set__
