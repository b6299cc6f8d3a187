"""Key layout, argument encoding and reply decoding of the Redis backend.

Theory of operation
-------------------
Keys (``P`` = ``<prefix>:loc:``, ``R`` = ``<prefix>:rel:``; ``prefix`` comes
from the URL's ``?prefix=``, default ``zlink``)::

    P spot:{<spot_id>}                          hash: one authority record
    P members:{<spot_id>}                       set: the IDs of the Actors whose
                                                records name this container
    P state:{<spot_id>}                         hash: a Spot's durable state: version
                                                ``v``, ObjectGeneration ``g``, bytes ``d``
    P reminders:{<spot_id>}                     hash: a Spot's reminders, name -> one
                                                encoded reminder (``redis.reminders``)
    P node:{<node_rid>}:claim:<mesh>            hash: one descriptor claim
    P node:{<node_rid>}:load:<lifecycle>:<mesh> hash: pending / active capacity units
    P meta:{m}:seq                              the store-wide ObjectGeneration sequence
    P meta:{m}:lifecycles                       hash: NodeId -> last lifecycle generation
    P meta:{m}:ids                              zset (score 0): every Spot ID, for Query
    P meta:{m}:claims                           zset: every claim key, for descriptors()
    P meta:{m}:counts                           hash: records per state
    P meta:{m}:due:<partition>:<mesh>           zset: the reminders of one Mesh and
                                                reminder partition, score their wake
                                                (``redis.reminders``)
    R root:{<ref>}                              one immutable root's bytes
    R inbox:{<spot_id>}:<generation>[:log]      one incarnation's activation inbox
    R meta:{m}:stats                            hash: Relocation Store counts

Every key of one Spot carries the hash tag ``{<spot_id>}`` (Redis Cluster
hashes only the text between the first ``{`` and the next ``}``, so an ID
holding ``}`` is tagged by its prefix -- still the same tag for all of that
Spot's keys). Node keys are tagged by NodeRid, never Spot keys by node.

A container's members set carries the container's tag. It is an index of the
records, written by the same scripts that write them (Reserve of an Actor,
MoveMembership, BeginRelocation of an Actor -- a member of its next container too until
CommitRelocation makes that its container or AbortRelocation drops it -- and every
deletion of an Actor's record: ``drop_record``), so it holds exactly the Actors whose
records name the container (as container or next container); like the oracle's index it is
keyed by Spot ID, not incarnation. Such a script reads and writes the container's
keys beside the Actor's, as every script reads node keys beside Spot keys: one Redis
runs it atomically whatever the tags (Redis Cluster cannot, and splits it:
``store.redis_cluster.membership``).

An authority record is a hash of short fields: ``id kind type mesh state gen
ogen ver orid olc`` plus ``ir ish isz`` (creation intent), ``pr psh psz pv``
(recovery pointer), ``trid tlc`` (relocation target), ``mr msh msz`` (the
move's payload root, Sealed and RelayReady only), ``container`` (an Actor's
record only; on Redis Cluster also ``mt``, its membership token:
``store.redis_cluster.membership``) and ``nc`` (a moving Actor's next container, its
container at the target; on Redis Cluster also ``nmt``, the token of that membership)
when present. Kinds
and states are the JSON names ``AuthorityRecord.to_json`` uses, counters are
decimal strings, so :func:`decode_record` rebuilds the record through
``AuthorityRecord.from_json`` and its validation. A claim keeps the
descriptor as ``NodeDescriptor.to_json`` text plus the fields the scripts
compare (``lc exp cap serves:<type>``), and ``closed`` (``1``) once
ClosePlacement marked it; a claim hash without that field (also one an earlier
version wrote) accepts placements.

:func:`raise_status` maps a script's refusal code to the memory oracle's
typed error (``UNDEFINED``, a step the SpotAuthority chart lacks -- ``lua.authority``
-- is :class:`InvalidOperation`, as ``store.rules.authority.step`` raises);
:func:`raise_writer` first maps the refusals of a fenced durable write (state, reminders:
the prelude's ``state_writer``) to ``store.rules.state``'s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from zlink_trio.core._json_fields import decode_kind, encode_kind
from zlink_trio.core.descriptor import NodeClaim, NodeDescriptor
from zlink_trio.core.errors import (
    AlreadyExists,
    CapacityExceeded,
    InvalidOperation,
    StaleFence,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.placement import Role
from zlink_trio.core.records import (
    AuthorityRecord,
    AuthorityState,
    OwnerFence,
    RecoveryPointer,
)
from zlink_trio.store.rules.location import container_refusal
from zlink_trio.store.rules.relocation_steps import (
    carried_refusal,
    member_refusal,
    past_relay_ready,
)
from zlink_trio.store.rules.state import not_serving, stale_writer
from zlink_trio.store.values import AuthorityExists, MembersRemain

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.records import AuthorityFence, CreationIntent, ReservationFence

__all__ = (
    "CLAIM_FIELDS",
    "Keys",
    "claim_args",
    "decode_claim",
    "decode_ready",
    "decode_record",
    "optional_fields",
    "raise_status",
    "raise_writer",
    "text",
)

#: Largest value of a 63-bit counter, as the scripts compare it.
_MAX_COUNTER: Final = str(2**63 - 1)


class Keys:
    """Builds the key names of one deployment ``prefix`` (see the module docstring)."""

    def __init__(self, prefix: str) -> None:
        self.location: Final = f"{prefix}:loc:"
        self.relocation: Final = f"{prefix}:rel:"

    def spot(self, spot_id: str) -> str:
        """The authority record of ``spot_id``."""
        return f"{self.location}spot:{{{spot_id}}}"

    def members(self, container: str) -> str:
        """The set of the Actor IDs whose records name ``container``."""
        return f"{self.location}members:{{{container}}}"

    def state(self, spot_id: str) -> str:
        """The durable state of ``spot_id`` (beside its record: the same hash tag)."""
        return f"{self.location}state:{{{spot_id}}}"

    def reminders(self, spot_id: str) -> str:
        """The reminders of ``spot_id`` (beside its record: the same hash tag)."""
        return f"{self.location}reminders:{{{spot_id}}}"

    def reminder_index(self, mesh: str, partition: int) -> str:
        """The due index of the reminders of ``mesh`` in reminder ``partition``."""
        return self.meta(f"due:{partition}:{mesh}")

    def claim(self, mesh: str, node_rid: NodeRid) -> str:
        """The descriptor claim of ``(mesh, node_rid)``."""
        return f"{self.location}node:{{{node_rid}}}:claim:{mesh}"

    def load(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int) -> str:
        """The pending / active capacity units of one owner lifecycle in ``mesh``."""
        return f"{self.location}node:{{{node_rid}}}:load:{lifecycle_generation}:{mesh}"

    def meta(self, name: str) -> str:
        """A Location Store index or counter key (``seq``, ``ids``, ``claims``, ...)."""
        return f"{self.location}meta:{{m}}:{name}"

    def root(self, ref: str) -> str:
        """The bytes of root ``ref``."""
        return f"{self.relocation}root:{{{ref}}}"

    def inbox(self, spot_id: str, object_generation: int) -> tuple[str, str]:
        """The inbox state and record log of one incarnation."""
        base = f"{self.relocation}inbox:{{{spot_id}}}:{object_generation}"
        return base, f"{base}:log"

    def patterns(self) -> tuple[str, str]:
        """``SCAN MATCH`` patterns covering every key of this deployment."""
        return f"{_glob(self.location)}*", f"{_glob(self.relocation)}*"


def _glob(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def text(value: object) -> str:
    """A reply value (bytes, str or int) as text."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value)


def _flat(value: object) -> Sequence[object]:
    if not isinstance(value, list):
        raise TypeError(f"expected a Redis array, got {value!r}")
    return value


def _pairs(flat: Sequence[object]) -> dict[str, str]:
    decoded = [v.decode() if type(v) is bytes else text(v) for v in flat]
    return dict(zip(decoded[0::2], decoded[1::2], strict=True))


def _owner(rid: str, lc: str) -> dict[str, str]:
    return {"nodeRid": rid, "lifecycleGeneration": lc}


def decode_record(flat: Sequence[object]) -> AuthorityRecord:
    """The :class:`AuthorityRecord` of an ``HGETALL`` reply (non-empty)."""
    f = _pairs(flat)
    container = f.get("container")
    intent = None if "ir" not in f else {
        "contentRef": f["ir"], "sha256": f["ish"], "size": int(f["isz"])}
    pointer = None if "pr" not in f else {
        "rootRef": f["pr"], "sha256": f["psh"], "size": int(f["psz"]), "version": int(f["pv"])}
    body: dict[str, object] = {
        "spotId": f["id"], "kind": f["kind"], "stableType": f["type"], "mesh": f["mesh"],
        "state": f["state"], "objectGeneration": f["gen"], "ownerGeneration": f["ogen"],
        "storeVersion": f["ver"], "owner": _owner(f["orid"], f["olc"]),
        "creationIntent": intent, "recoveryPointer": pointer,
        "relocationTarget": None if "trid" not in f else _owner(f["trid"], f["tlc"]),
        "relocationPayload": None if "mr" not in f else {
            "ref": f["mr"], "sha256": f["msh"], "size": int(f["msz"])},
    }
    if container is not None:
        body["container"] = container
    if "nc" in f:
        body["nextContainer"] = f["nc"]
    return AuthorityRecord.from_json(body)


def decode_ready(flat: Sequence[object], fence: ReservationFence) -> AuthorityRecord:
    """:func:`decode_record` of the record CommitReady with ``fence`` just made Ready.

    The script wrote the fields it compared with the fence; when the reply holds
    exactly those values (Spot ID, generations, owner, StoreVersion one past the
    fence's, Ready, no intent or relocation target), they are taken from the already
    checked fence instead of being parsed again, and only kind, type, Mesh and pointer
    are decoded -- the same record, checked by the same constructor. Any other reply
    is decoded by :func:`decode_record` (and its errors are raised from there).
    """
    f: dict[object, Any] = dict(zip(flat[0::2], flat[1::2], strict=True))  # bytes: bytes
    owner = fence.owner
    if (f.get(b"id") != fence.spot_id.encode() or f.get(b"state") != b"ready"
            or f.get(b"gen") != b"%d" % fence.object_generation
            or f.get(b"ogen") != b"%d" % fence.owner_generation
            or f.get(b"ver") != b"%d" % (fence.store_version + 1)
            or f.get(b"olc") != b"%d" % owner.lifecycle_generation
            or f.get(b"orid") != str(owner.node_rid).encode()
            or b"ir" in f or b"trid" in f or b"mr" in f or len(f) * 2 != len(flat)):
        return decode_record(flat)
    try:
        pointer = None if b"pr" not in f else RecoveryPointer.from_json({
            "rootRef": f[b"pr"].decode(), "sha256": f[b"psh"].decode(),
            "size": int(f[b"psz"]), "version": int(f[b"pv"])})
        return AuthorityRecord(
            spot_id=fence.spot_id, kind=decode_kind(f[b"kind"].decode()),
            stable_type=f[b"type"].decode(), mesh=f[b"mesh"].decode(),
            state=AuthorityState.READY, object_generation=fence.object_generation,
            owner_generation=fence.owner_generation, store_version=fence.store_version + 1,
            owner=owner, recovery_pointer=pointer,
            container=None if b"container" not in f else f[b"container"].decode())
    except (ZLinkError, KeyError, ValueError):
        return decode_record(flat)  # the general decoding says what is wrong


def optional_fields(intent: CreationIntent | None,
                    pointer: RecoveryPointer | None) -> list[str | int]:
    """Field/value pairs of a new record's creation intent and recovery pointer."""
    out: list[str | int] = []
    if intent is not None:
        out += ["ir", intent.content_ref, "ish", intent.sha256, "isz", intent.size]
    if pointer is not None:
        out += ["pr", pointer.root_ref, "psh", pointer.sha256, "psz", pointer.size,
                "pv", pointer.version]
    return out


def claim_args(descriptor: NodeDescriptor) -> list[str | int]:
    """The descriptor part of NewClaim's arguments: JSON, capacity, served pairs."""
    served: list[str | int] = []
    if Role.OBJECT_SERVER in descriptor.roles:
        for stable_type, kind in descriptor.served_types.items():
            served += [stable_type, encode_kind(kind)]
    body = json.dumps(descriptor.to_json(), ensure_ascii=False, separators=(",", ":"))
    return [body, descriptor.capacity, *served]


#: The claim fields a script returns for :func:`decode_claim`, in order.
CLAIM_FIELDS: Final = ("desc", "lc", "exp", "ver", "closed")


#: Decoded descriptors by their stored JSON: a claim's descriptor never changes, and
#: every ``descriptors`` read returns the same few again -- decoding one (JSON, checks,
#: SHA-256 digest) was most of a read. A pure function of the bytes, so one cache serves
#: every store; bounded (cleared when full).
_DESCRIPTORS: dict[object, NodeDescriptor] = {}
_DESCRIPTORS_MAX: Final = 1024


def _descriptor(raw: object) -> NodeDescriptor:
    if type(raw) is not bytes and type(raw) is not str:  # not a stored text: no cache
        return NodeDescriptor.from_json(json.loads(text(raw)))
    found = _DESCRIPTORS.get(raw)
    if found is None:
        found = NodeDescriptor.from_json(json.loads(text(raw)))
        if len(_DESCRIPTORS) >= _DESCRIPTORS_MAX:
            _DESCRIPTORS.clear()
        _DESCRIPTORS[raw] = found
    return found


def decode_claim(values: Sequence[object]) -> NodeClaim:
    """The :class:`NodeClaim` of an ``HMGET desc lc exp ver closed`` reply."""
    lc, exp, ver = (text(v) for v in values[1:4])
    return NodeClaim(descriptor=_descriptor(values[0]),
                     lifecycle_generation=int(lc), lease_expires_at=float(exp),
                     store_version=int(ver),
                     accepts_placements=len(values) < 5 or values[4] is None)


def raise_writer(reply: Sequence[object], what: str, fence: AuthorityFence) -> None:
    """Raise the refusal of a script that checked ``fence`` as the prelude's
    ``state_writer`` does (a state or reminder write): the oracle's ``stale_writer`` /
    ``not_serving``, or :func:`raise_status`'s error. Returns only on ``OK``."""
    code = text(reply[0])
    if code == "STATE_STALE":
        found = _flat(reply[1])
        raise stale_writer(fence, decode_record(found) if found else None)
    if code == "STATE_IDLE":
        raise not_serving(decode_record(_flat(reply[1])))
    raise_status(reply, what)


def raise_status(reply: Sequence[object], what: str) -> None:
    """Raise the typed error a script's refusal ``reply`` stands for.

    ``what`` names the call for the message (e.g. ``"reserve of 'r-1'"``).
    Returns only when ``reply`` is an ``OK`` status.
    """
    code = text(reply[0])
    if code == "OK":
        return
    detail = [text(v) if not isinstance(v, list) else v for v in reply[1:]]
    if code == "EXISTS":
        raise AuthorityExists(decode_record(_flat(reply[1])))
    if code == "STALE":
        found = _flat(reply[1])
        state = "missing" if not found else _describe(decode_record(found))
        raise StaleFence(f"{what}: the record is {state}; the fence does not match, "
                         "re-read the authority")
    if code == "STALE_OWNER":
        raise StaleFence(f"{what}: node {detail[0]} lifecycle {detail[1]} has no current claim "
                         f"in mesh {detail[2]!r}; the node restarted or left, re-read its "
                         "descriptor")
    if code == "EXPIRED":
        raise Unavailable(f"{what}: the lease of node {detail[0]} lifecycle {detail[1]} "
                          f"expired at {detail[2]}; an expired owner cannot change authority")
    if code == "NOT_SERVED":
        raise InvalidOperation(f"{what}: node {detail[0]} does not serve stable type "
                               f"{detail[1]!r} as {detail[2]}; choose a node that serves it")
    if code == "CAPACITY":
        raise CapacityExceeded(f"{what}: node {detail[0]} is at capacity ({detail[1]} of "
                               f"{detail[2]} active + pending); choose another node or retry")
    if code == "GEN_SPENT":
        raise CapacityExceeded("the store's ObjectGeneration sequence is exhausted (2**63-1)")
    if code in ("SPENT", "LC_SPENT"):
        raise InvalidOperation(f"{what}: a 63-bit counter of the record reached {_MAX_COUNTER}")
    if code == "ALREADY":
        raise AlreadyExists(f"{what}: a live claim already holds this mesh and NodeRid "
                            f"(NodeId {detail[0]!r}, lifecycle {detail[1]}); start this "
                            "lifecycle with a fresh NodeRid")
    if code == "ENTRY_TAKEN":
        raise AlreadyExists(f"{what}: Entry Spot ID {detail[0]!r} already has authority; "
                            "issue a new Entry Spot ID and claim again")
    if code == "CONTAINER":
        raise _container_refusal(reply)
    if code == "MEMBERS":
        raise MembersRemain(decode_record(_flat(reply[1])), int(text(reply[2])))
    if code == "JOIN_REVOKED":
        raise Unavailable(f"{what}: container {detail[0]!r} checked its members while the "
                          "Actor joined it (a BeginClose or a move of the container raced "
                          "the join); nothing was "
                          "written -- retry, the container's state decides the outcome")
    if code == "PAST_RELAY_READY":
        raise past_relay_ready(decode_record(_flat(reply[1])))
    if code == "CARRIED":
        raise carried_refusal(decode_record(_flat(reply[1])))
    if code == "MEMBER":
        spot = decode_record(_flat(reply[1]))
        refusal = member_refusal(spot.spot_id, decode_record(_flat(reply[2])), spot.owner)
        assert refusal is not None, reply  # (the script found that member unfit)
        raise refusal
    if code == "MOVING":
        raise Unavailable(f"{what}: the Spot is {detail[0]} for a move; retry after it")
    if code == "UNDEFINED":
        raise InvalidOperation(
            f"{what}: the SpotAuthority chart has no transition {detail[1]!r} from "
            f"{detail[0] or 'missing'!r}; nothing was written -- re-read the authority and "
            "take the step its state allows")
    if code == "INVALID":
        raise InvalidOperation(f"{what}: {_INVALID.get(str(detail[0]), detail[0])} "
                               f"{detail[1] if len(detail) > 1 else ''}".rstrip())
    raise Unavailable(f"{what}: the Redis script answered {code!r}, which this version "
                      "does not know; check that every process runs the same zlink_trio")


def _container_refusal(reply: Sequence[object]) -> ZLinkError:
    """The oracle's error for a ``{'CONTAINER', container, record, rid, lc}`` refusal."""
    container, found = text(reply[1]), _flat(reply[2])
    owner = OwnerFence.from_json({"nodeRid": text(reply[3]),
                                  "lifecycleGeneration": text(reply[4])})
    error = container_refusal(container, decode_record(found) if found else None, owner)
    if error is None:  # the script and the oracle disagree: never act on it
        return Unavailable(f"container {container!r} was refused by the Redis script but "
                           "the rules accept it; check that every process runs the same "
                           "zlink_trio")
    return error


_INVALID: Final = {
    "generation": "another ObjectGeneration holds the ID now; that incarnation is gone:",
    "entry": "it is an Entry Spot; it ends with its node's claim (Entry Spots never move)",
    "creating": "it is still Creating; act on it once it is Ready",
    "same_node": "the Spot already lives on the target node",
}


def _describe(record: AuthorityRecord) -> str:
    return (f"{record.state.value}, generation {record.object_generation}, owner generation "
            f"{record.owner_generation}, owner {record.owner}, StoreVersion "
            f"{record.store_version}")
