"""The binary frame codec: golden bytes, round trips, fuzzing and every refusal.

Pure tests, no event loop: the frame codec is sans-IO. The golden frames
below are written out field by field; they pin the wire format (change one
and a peer of another version breaks), and the refusal tests replace one
field of a golden frame at a time.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from zlink_trio.core.errors import (
    InvalidConfiguration,
    InvalidOperation,
    LocalProtocolError,
    NotFound,
    RemoteProtocolError,
    StaleFence,
    ZLinkError,
)
from zlink_trio.core.identity import NodeRid
from zlink_trio.core.records import MAX_ROOT_BYTES, OwnerFence, RootReceipt, SpotRef
from zlink_trio.wire.frames import (
    DEFAULT_MAX_FRAME_BYTES,
    MAX_BODY_BYTES,
    MAX_FOLLOW_HOPS,
    MAX_METADATA_BYTES,
    ActivationRoute,
    Challenge,
    CloseOutcome,
    Command,
    CreateOutcome,
    EncodedMessage,
    Failure,
    FollowRoute,
    Hello,
    MessageOutcome,
    NodeAction,
    NodeOperation,
    NodeOperationOutcome,
    Ping,
    Pong,
    ReadyRoute,
    RelayDone,
    RelocateOutcome,
    RelocateSpot,
    Reply,
    RouteKind,
    SpotMessage,
    TerminalResult,
    UserSpotClose,
    UserSpotCreate,
    Welcome,
    WireCreateState,
    decode,
    encode,
)

# --------------------------------------------------------------------------- golden frames

RID_A = NodeRid(bytes(range(1, 17)))
RID_B = NodeRid(b"\xbb" * 16)
HEX_A = "0102030405060708090a0b0c0d0e0f10"
HEX_B = "bb" * 16
OWNER_A = OwnerFence(RID_A, 3)
OWNER_B = OwnerFence(RID_B, 2)
DEADLINE = 1_700_000_000_000  # 2023-11-14T22:13:20Z in ms
HEX_DEADLINE = "0000018bcfe56800"
ADD = EncodedMessage("app:Add", b'{"n":2}')
HEX_ADD = [("type name", "07 6170703a416464"), ("body", "00000007 7b226e223a327d")]
REF = SpotRef(spot_id="r-1", generation=7, mesh="world", node_rid=RID_B)
HEX_REF = [
    ("ref spot id", "03 722d31"),
    ("ref generation", "0000000000000007"),
    ("ref mesh", "05 776f726c64"),
    ("ref node rid", HEX_B),
]
SHA = "00112233445566778899aabbccddeeff" * 2
ROOT = RootReceipt(ref="rel:r-1", sha256=SHA, size=1024)

Pieces = list[tuple[str, str]]

GOLDEN: dict[str, tuple[object, Pieces]] = {
    "challenge": (
        Challenge(nonce=b"\x11" * 32),
        [("header", "5a4c0101"), ("nonce", "11" * 32)],
    ),
    "hello": (
        Hello(
            node_id="node-a",
            node_rid=RID_A,
            lifecycle_generation=3,
            mesh="world",
            max_frame_bytes=DEFAULT_MAX_FRAME_BYTES,
            nonce=b"\x11" * 32,
            mac=b"\x22" * 32,
        ),
        [
            ("header", "5a4c0102"),
            ("node id", "06 6e6f64652d61"),
            ("node rid", HEX_A),
            ("lifecycle", "0000000000000003"),
            ("mesh", "05 776f726c64"),
            ("max frame", "00108000"),
            ("nonce", "11" * 32),
            ("mac", "22" * 32),
        ],
    ),
    "welcome": (
        Welcome(
            node_id="node-b",
            node_rid=RID_B,
            lifecycle_generation=1,
            mesh="world",
            max_frame_bytes=1024,
            nonce=b"\x22" * 32,
            mac=b"\x11" * 32,
        ),
        [
            ("header", "5a4c0103"),
            ("node id", "06 6e6f64652d62"),
            ("node rid", HEX_B),
            ("lifecycle", "0000000000000001"),
            ("mesh", "05 776f726c64"),
            ("max frame", "00000400"),
            ("nonce", "22" * 32),
            ("mac", "11" * 32),
        ],
    ),
    "ping": (Ping(token=1), [("header", "5a4c0104"), ("token", "0000000000000001")]),
    "pong": (Pong(token=2**64 - 1), [("header", "5a4c0105"), ("token", "ff" * 8)]),
    "message-ready": (
        SpotMessage(
            route=ReadyRoute(
                spot_id="c-1", object_generation=5, owner_generation=1, target=OWNER_B
            ),
            operation_id=42,
            reply_correlation=0,
            deadline_ms=DEADLINE,
            source=OWNER_A,
            source_spot_id=None,
            metadata=None,
            payload=ADD,
        ),
        [
            ("header", "5a4c0127"),
            ("route kind", "01"),
            ("spot id", "03 632d31"),
            ("object generation", "0000000000000005"),
            ("owner generation", "0000000000000001"),
            ("target rid", HEX_B),
            ("target lifecycle", "0000000000000002"),
            ("operation id", "000000000000002a"),
            ("reply correlation", "0000000000000000"),
            ("deadline", HEX_DEADLINE),
            ("source rid", HEX_A),
            ("source lifecycle", "0000000000000003"),
            ("source spot id", "00"),
            ("metadata flag", "00"),
            *HEX_ADD,
        ],
    ),
    "message-activation": (
        SpotMessage(
            route=ActivationRoute(
                target_mesh="world",
                target=OWNER_B,
                spot_id="c-1",
                stable_type="counter",
                descriptor_version=4,
            ),
            operation_id=43,
            reply_correlation=99,
            deadline_ms=DEADLINE,
            source=OWNER_A,
            source_spot_id="r-1",
            metadata=b"hi",
            payload=ADD,
        ),
        [
            ("header", "5a4c0127"),
            ("route kind", "02"),
            ("target mesh", "05 776f726c64"),
            ("target rid", HEX_B),
            ("target lifecycle", "0000000000000002"),
            ("spot id", "03 632d31"),
            ("stable type", "07 636f756e746572"),
            ("descriptor version", "0000000000000004"),
            ("operation id", "000000000000002b"),
            ("reply correlation", "0000000000000063"),
            ("deadline", HEX_DEADLINE),
            ("source rid", HEX_A),
            ("source lifecycle", "0000000000000003"),
            ("source spot id", "03 722d31"),
            ("metadata flag", "01"),
            ("metadata", "00000002 6869"),
            *HEX_ADD,
        ],
    ),
    "message-follow": (
        SpotMessage(
            route=FollowRoute(
                spot_id="c-1",
                object_generation=5,
                source_owner_generation=2,
                target_owner_generation=4,
                target=OWNER_B,
                hops=3,
            ),
            operation_id=44,
            reply_correlation=100,
            deadline_ms=DEADLINE,
            source=OWNER_A,
            source_spot_id=None,
            metadata=None,
            payload=ADD,
        ),
        [
            ("header", "5a4c0127"),
            ("route kind", "03"),
            ("spot id", "03 632d31"),
            ("object generation", "0000000000000005"),
            ("source owner generation", "0000000000000002"),
            ("target owner generation", "0000000000000004"),
            ("target rid", HEX_B),
            ("target lifecycle", "0000000000000002"),
            ("hops", "03"),
            ("operation id", "000000000000002c"),
            ("reply correlation", "0000000000000064"),
            ("deadline", HEX_DEADLINE),
            ("source rid", HEX_A),
            ("source lifecycle", "0000000000000003"),
            ("source spot id", "00"),
            ("metadata flag", "00"),
            *HEX_ADD,
        ],
    ),
    "create": (
        UserSpotCreate(
            correlation=1,
            operation_id=2,
            source=OWNER_A,
            spot_id="r-1",
            stable_type="room",
            expected_store_version=1,
            object_generation=7,
            owner_generation=1,
            target=OWNER_B,
            owner_lease_expires_ms=DEADLINE + 30_000,
            pending_capacity=1,
            deadline_ms=DEADLINE,
        ),
        [
            ("header", "5a4c012f"),
            ("correlation", "0000000000000001"),
            ("operation id", "0000000000000002"),
            ("source rid", HEX_A),
            ("source lifecycle", "0000000000000003"),
            ("spot id", "03 722d31"),
            ("stable type", "04 726f6f6d"),
            ("store version", "0000000000000001"),
            ("object generation", "0000000000000007"),
            ("owner generation", "0000000000000001"),
            ("target rid", HEX_B),
            ("target lifecycle", "0000000000000002"),
            ("owner lease", "0000018bcfe5dd30"),
            ("pending capacity", "00000001"),
            ("deadline", HEX_DEADLINE),
        ],
    ),
    "close": (
        UserSpotClose(
            correlation=3,
            operation_id=4,
            source=OWNER_A,
            ref=REF,
            target=OWNER_B,
            expected_owner_generation=1,
            expected_store_version=2,
            deadline_ms=DEADLINE,
        ),
        [
            ("header", "5a4c0130"),
            ("correlation", "0000000000000003"),
            ("operation id", "0000000000000004"),
            ("source rid", HEX_A),
            ("source lifecycle", "0000000000000003"),
            *HEX_REF,
            ("target rid", HEX_B),
            ("target lifecycle", "0000000000000002"),
            ("owner generation", "0000000000000001"),
            ("store version", "0000000000000002"),
            ("deadline", HEX_DEADLINE),
        ],
    ),
    "relocate": (
        RelocateSpot(
            correlation=5,
            operation_id=6,
            source=OWNER_A,
            target=OWNER_B,
            spot_id="r-1",
            stable_type="room",
            mesh="world",
            object_generation=7,
            owner_generation=1,
            expected_store_version=9,
            payload=ROOT,
            deadline_ms=DEADLINE,
        ),
        [
            ("header", "5a4c013c"),
            ("correlation", "0000000000000005"),
            ("operation id", "0000000000000006"),
            ("source rid", HEX_A),
            ("source lifecycle", "0000000000000003"),
            ("target rid", HEX_B),
            ("target lifecycle", "0000000000000002"),
            ("spot id", "03 722d31"),
            ("stable type", "04 726f6f6d"),
            ("mesh", "05 776f726c64"),
            ("object generation", "0000000000000007"),
            ("owner generation", "0000000000000001"),
            ("store version", "0000000000000009"),
            ("root ref", "07 72656c3a722d31"),
            ("root sha256", "00112233445566778899aabbccddeeff" * 2),
            ("root size", "0000000000000400"),
            ("deadline", HEX_DEADLINE),
        ],
    ),
    "reply-create": (
        Reply(
            correlation=1,
            answers=Command.USER_SPOT_CREATE,
            outcome=CreateOutcome(
                state=WireCreateState.CREATED,
                ref=REF,
                reply=EncodedMessage("app:Total", b'{"value":2}'),
            ),
        ),
        [
            ("header", "5a4c0114"),
            ("correlation", "0000000000000001"),
            ("terminal result", "00"),
            ("failure code", "0000"),
            ("answers", "2f"),
            ("create state", "02"),
            *HEX_REF,
            ("reply flag", "01"),
            ("type name", "09 6170703a546f74616c"),
            ("body", "0000000b 7b2276616c7565223a327d"),
        ],
    ),
    "reply-close": (
        Reply(correlation=3, answers=Command.USER_SPOT_CLOSE, outcome=CloseOutcome(closed=True)),
        [
            ("header", "5a4c0114"),
            ("correlation", "0000000000000003"),
            ("terminal result", "00"),
            ("failure code", "0000"),
            ("answers", "30"),
            ("closed", "01"),
        ],
    ),
    "reply-message": (
        Reply(correlation=99, answers=Command.SPOT_MESSAGE, outcome=MessageOutcome(reply=None)),
        [
            ("header", "5a4c0114"),
            ("correlation", "0000000000000063"),
            ("terminal result", "00"),
            ("failure code", "0000"),
            ("answers", "27"),
            ("reply flag", "00"),
        ],
    ),
    "reply-failed": (
        Reply(
            correlation=99,
            answers=Command.SPOT_MESSAGE,
            outcome=Failure(code=NotFound.code, message="not found"),
        ),
        [
            ("header", "5a4c0114"),
            ("correlation", "0000000000000063"),
            ("terminal result", "01"),
            ("failure code", "0002"),
            ("answers", "27"),
            ("message", "0009 6e6f7420666f756e64"),
        ],
    ),
    "reply-relocate": (
        Reply(correlation=5, answers=Command.RELOCATE_SPOT, outcome=RelocateOutcome(ref=REF)),
        [
            ("header", "5a4c0114"),
            ("correlation", "0000000000000005"),
            ("terminal result", "00"),
            ("failure code", "0000"),
            ("answers", "3c"),
            *HEX_REF,
        ],
    ),
    "reply-relocate-failed": (
        Reply(
            correlation=5,
            answers=Command.RELOCATE_SPOT,
            outcome=Failure(code=StaleFence.code, message="sealed"),
        ),
        [
            ("header", "5a4c0114"),
            ("correlation", "0000000000000005"),
            ("terminal result", "01"),
            ("failure code", "000b"),
            ("answers", "3c"),
            ("message", "0006 7365616c6564"),
        ],
    ),
    "operation-relocate": (
        NodeOperation(correlation=8, operation_id=9, source=OWNER_A, target=OWNER_B,
                      action=NodeAction.RELOCATE, spot_id="r-1", to_node="b",
                      deadline_ms=DEADLINE),
        [
            ("header", "5a4c013d"),
            ("correlation", "0000000000000008"),
            ("operation id", "0000000000000009"),
            ("source rid", HEX_A),
            ("source lifecycle", "0000000000000003"),
            ("target rid", HEX_B),
            ("target lifecycle", "0000000000000002"),
            ("action", "01"),
            ("spot id", "03 722d31"),
            ("node", "01 62"),
            ("deadline", HEX_DEADLINE),
        ],
    ),
    "operation-drain": (
        NodeOperation(correlation=8, operation_id=9, source=OWNER_A, target=OWNER_B,
                      action=NodeAction.DRAIN, deadline_ms=DEADLINE),
        [
            ("header", "5a4c013d"),
            ("correlation", "0000000000000008"),
            ("operation id", "0000000000000009"),
            ("source rid", HEX_A),
            ("source lifecycle", "0000000000000003"),
            ("target rid", HEX_B),
            ("target lifecycle", "0000000000000002"),
            ("action", "02"),
            ("spot id", "00"),
            ("node", "00"),
            ("deadline", HEX_DEADLINE),
        ],
    ),
    "relay-done": (
        RelayDone(spot_id="r-1", object_generation=7, owner_generation=2),
        [
            ("header", "5a4c013e"),
            ("spot id", "03 722d31"),
            ("object generation", "0000000000000007"),
            ("owner generation", "0000000000000002"),
        ],
    ),
    "reply-operation": (
        Reply(correlation=8, answers=Command.NODE_OPERATION,
              outcome=NodeOperationOutcome(report=b'{"a":1}')),
        [
            ("header", "5a4c0114"),
            ("correlation", "0000000000000008"),
            ("terminal result", "00"),
            ("failure code", "0000"),
            ("answers", "3d"),
            ("report", "00000007 7b2261223a317d"),
        ],
    ),
}


def golden(name: str, **replace: str) -> bytes:
    """The golden bytes of ``name``, with fields (spaces as underscores) replaced by hex."""
    _, pieces = GOLDEN[name]
    fields = [field for field, _ in pieces]
    unknown = {key.replace("_", " ") for key in replace} - set(fields)
    assert not unknown, unknown
    return bytes.fromhex(
        "".join(replace.get(field.replace(" ", "_"), value) for field, value in pieces)
    )


def refused(data: bytes, needle: str = "", **limits: int) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        decode(data, **limits)
    assert needle in str(info.value)
    return info.value


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_bytes_are_pinned(name):
    frame, _ = GOLDEN[name]
    assert encode(frame).hex() == golden(name).hex()  # type: ignore[arg-type]
    assert decode(golden(name)) == frame


def test_every_command_has_a_golden_frame():
    commands = {golden(name)[3] for name in GOLDEN}
    assert commands == {int(command) for command in Command}
    assert {golden(name)[4] for name in GOLDEN if name.startswith("message")} == set(RouteKind)
    answered = {golden(name)[15] for name in GOLDEN if name.startswith("reply")}
    assert answered == {Command.SPOT_MESSAGE, Command.USER_SPOT_CREATE,
                        Command.USER_SPOT_CLOSE, Command.RELOCATE_SPOT, Command.NODE_OPERATION}


def test_wire_doc_lists_every_command_with_its_frame_class():
    page = (Path(__file__).resolve().parents[2] / "docs/wire.md").read_text("utf-8")
    classes = {
        Command.CHALLENGE: Challenge,
        Command.HELLO: Hello,
        Command.WELCOME: Welcome,
        Command.PING: Ping,
        Command.PONG: Pong,
        Command.REPLY: Reply,
        Command.SPOT_MESSAGE: SpotMessage,
        Command.USER_SPOT_CREATE: UserSpotCreate,
        Command.USER_SPOT_CLOSE: UserSpotClose,
        Command.RELOCATE_SPOT: RelocateSpot,
        Command.NODE_OPERATION: NodeOperation,
        Command.RELAY_DONE: RelayDone,
    }
    assert set(classes) == set(Command)
    for command, cls in classes.items():
        assert f"| {int(command)} | `{cls.__name__}` |" in page, command


# --------------------------------------------------------------------------- strategies

texts = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=63)
text8s = texts | st.sampled_from(["x" * 255, "é" * 127 + "x", "\U0001f600" * 63 + "abc"])
gens = st.integers(1, 2**63 - 1)
u64s = st.integers(0, 2**64 - 1)
ids = st.integers(1, 2**64 - 1)
rids = st.binary(min_size=16, max_size=16).filter(any).map(NodeRid)
owners = st.builds(OwnerFence, rids, gens)
refs = st.builds(SpotRef, spot_id=text8s, generation=gens, mesh=text8s, node_rid=rids)
payloads = st.builds(EncodedMessage, text8s, st.binary(max_size=200))
nonces = st.binary(min_size=32, max_size=32)
limits = st.integers(1024, 2**32 - 1)

handshake = {
    "node_id": text8s,
    "node_rid": rids,
    "lifecycle_generation": gens,
    "mesh": text8s,
    "max_frame_bytes": limits,
    "nonce": nonces,
    "mac": nonces,
}
roots = st.builds(
    RootReceipt,
    ref=text8s,
    sha256=st.binary(min_size=32, max_size=32).map(bytes.hex),
    size=st.integers(0, MAX_ROOT_BYTES),
)


@st.composite
def follow_routes(draw: st.DrawFn) -> FollowRoute:
    """A route kind 3: the target's owner generation is above the source's."""
    source = draw(st.integers(1, 2**63 - 2), label="source owner generation")
    return FollowRoute(
        spot_id=draw(text8s),
        object_generation=draw(gens),
        source_owner_generation=source,
        target_owner_generation=draw(st.integers(source + 1, 2**63 - 1)),
        target=draw(owners),
        hops=draw(st.integers(1, MAX_FOLLOW_HOPS)),
    )


routes = (
    st.builds(
        ReadyRoute, spot_id=text8s, object_generation=gens, owner_generation=gens, target=owners
    )
    | st.builds(
        ActivationRoute,
        target_mesh=text8s,
        target=owners,
        spot_id=text8s,
        stable_type=text8s,
        descriptor_version=gens,
    )
    | follow_routes()
)
create_outcomes = st.builds(
    CreateOutcome, state=st.just(WireCreateState.EXISTING), ref=refs, reply=st.none()
) | st.builds(
    CreateOutcome,
    state=st.sampled_from([WireCreateState.CREATED, WireCreateState.REJECTED]),
    ref=refs,
    reply=st.none() | payloads,
)
failures = st.builds(
    Failure,
    code=st.integers(1, 2**16 - 1),
    message=st.text(st.characters(exclude_categories=("Cs",)), max_size=100),
)

FRAMES = {
    "challenge": st.builds(Challenge, nonce=nonces),
    "hello": st.builds(Hello, **handshake),
    "welcome": st.builds(Welcome, **handshake),
    "ping": st.builds(Ping, token=u64s),
    "pong": st.builds(Pong, token=u64s),
    "message": st.builds(
        SpotMessage,
        route=routes,
        operation_id=ids,
        reply_correlation=u64s,
        deadline_ms=gens,
        source=owners,
        source_spot_id=st.none() | text8s,
        metadata=st.none() | st.binary(max_size=64),
        payload=payloads,
    ),
    "create": st.builds(
        UserSpotCreate,
        correlation=ids,
        operation_id=ids,
        source=owners,
        spot_id=text8s,
        stable_type=text8s,
        expected_store_version=gens,
        object_generation=gens,
        owner_generation=gens,
        target=owners,
        owner_lease_expires_ms=st.integers(0, 2**63 - 1),
        pending_capacity=st.integers(1, 2**32 - 1),
        deadline_ms=gens,
    ),
    "close": st.builds(
        UserSpotClose,
        correlation=ids,
        operation_id=ids,
        source=owners,
        ref=refs,
        target=owners,
        expected_owner_generation=gens,
        expected_store_version=gens,
        deadline_ms=gens,
    ),
    "relocate": st.builds(
        RelocateSpot,
        correlation=ids,
        operation_id=ids,
        source=owners,
        target=owners,
        spot_id=text8s,
        stable_type=text8s,
        mesh=text8s,
        object_generation=gens,
        owner_generation=gens,
        expected_store_version=gens,
        payload=roots,
        deadline_ms=gens,
    ),
    "operation": st.builds(
        NodeOperation, correlation=ids, operation_id=ids, source=owners, target=owners,
        action=st.just(NodeAction.RELOCATE), spot_id=text8s, to_node=st.none() | text8s,
        deadline_ms=gens,
    )
    | st.builds(
        NodeOperation, correlation=ids, operation_id=ids, source=owners, target=owners,
        action=st.just(NodeAction.DRAIN), deadline_ms=gens,
    ),
    "relay-done": st.builds(RelayDone, spot_id=text8s, object_generation=gens,
                            owner_generation=gens),
    "reply": st.builds(
        Reply,
        correlation=ids,
        answers=st.just(Command.USER_SPOT_CREATE),
        outcome=create_outcomes | failures,
    )
    | st.builds(
        Reply,
        correlation=ids,
        answers=st.just(Command.USER_SPOT_CLOSE),
        outcome=st.builds(CloseOutcome, closed=st.booleans()) | failures,
    )
    | st.builds(
        Reply,
        correlation=ids,
        answers=st.just(Command.SPOT_MESSAGE),
        outcome=st.builds(MessageOutcome, reply=st.none() | payloads) | failures,
    )
    | st.builds(
        Reply,
        correlation=ids,
        answers=st.just(Command.RELOCATE_SPOT),
        outcome=st.builds(RelocateOutcome, ref=refs) | failures,
    )
    | st.builds(
        Reply,
        correlation=ids,
        answers=st.just(Command.NODE_OPERATION),
        outcome=st.builds(NodeOperationOutcome, report=st.binary(max_size=200)) | failures,
    ),
}
frames = st.one_of(*FRAMES.values())


def decodes_or_refuses(data: bytes) -> None:
    """``data`` decodes to a frame whose encoding is ``data``, or is refused as remote."""
    try:
        frame = decode(data)
    except RemoteProtocolError:
        return
    assert encode(frame) == data  # the encoding is canonical
    assert decode(encode(frame)) == frame


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("kind", sorted(FRAMES))
@settings(max_examples=60)
@given(data=st.data())
def test_round_trip(kind, data):
    frame = data.draw(FRAMES[kind])
    assert decode(encode(frame)) == frame


def test_decode_accepts_bytearray_and_memoryview():
    raw = golden("message-activation")
    frame, _ = GOLDEN["message-activation"]
    assert decode(bytearray(raw)) == frame
    assert decode(memoryview(raw)) == frame


def test_largest_frames_fit_the_default_limits():
    long = "\U0001f600" * 63 + "abc"
    big = SpotMessage(
        route=ActivationRoute(
            target_mesh=long, target=OWNER_B, spot_id=long, stable_type=long, descriptor_version=1
        ),
        operation_id=2**64 - 1,
        reply_correlation=2**64 - 1,
        deadline_ms=2**63 - 1,
        source=OWNER_A,
        source_spot_id=long,
        metadata=b"m" * MAX_METADATA_BYTES,
        payload=EncodedMessage(long, b"b" * MAX_BODY_BYTES),
    )
    data = encode(big)
    assert len(data) <= DEFAULT_MAX_FRAME_BYTES
    assert decode(data) == big
    reply = Reply(
        correlation=1,
        answers=Command.USER_SPOT_CREATE,
        outcome=CreateOutcome(
            state=WireCreateState.REJECTED,
            ref=SpotRef(spot_id=long, generation=2**63 - 1, mesh=long, node_rid=RID_A),
            reply=EncodedMessage(long, b"b" * MAX_BODY_BYTES),
        ),
    )
    assert decode(encode(reply)) == reply


# --------------------------------------------------------------------------- fuzzing


@settings(max_examples=500)
@given(st.binary(max_size=600))
def test_fuzz_arbitrary_bytes_decode_or_refuse(data):
    decodes_or_refuses(data)


@settings(max_examples=500)
@given(st.sampled_from(sorted({golden(name)[:4] for name in GOLDEN})), st.binary(max_size=400))
@example(b"ZL\x01\x14", b"")
def test_fuzz_bytes_after_a_valid_header_decode_or_refuse(header, body):
    decodes_or_refuses(header + body)


MUTATIONS = ("flip", "set", "truncate", "extend", "insert", "delete")


def mutate(data: st.DataObject, frame: object, mutation: str, start: int = 0) -> bytes:
    """``frame``'s bytes with one ``mutation`` drawn at an offset >= ``start``."""
    raw = bytearray(encode(frame))
    at = data.draw(st.integers(start, len(raw) - 1), label="at")
    if mutation == "flip":
        raw[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    elif mutation == "set":
        raw[at] = data.draw(st.sampled_from([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF]), label="value")
    elif mutation == "truncate":
        del raw[at:]
    elif mutation == "extend":
        raw += data.draw(st.binary(min_size=1, max_size=16), label="extra")
    elif mutation == "insert":
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=4), label="inserted")
    else:
        del raw[at : at + data.draw(st.integers(1, 8), label="deleted")]
    return bytes(raw)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(frame=frames, mutation=st.sampled_from(MUTATIONS), data=st.data())
def test_fuzz_mutated_frames_decode_or_refuse(frame, mutation, data):
    decodes_or_refuses(mutate(data, frame, mutation))


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_every_truncation_and_extension_is_refused(name):
    raw = golden(name)
    for end in range(len(raw)):
        refused(raw[:end])
    refused(raw + b"\x00", "trailing")
    refused(raw + b"\x00" * 9, "trailing")


# --------------------------------------------------------------------------- refusals: header


@pytest.mark.parametrize("magic", [b"ZX", b"zl", b"\x00\x00", b"LZ"])
def test_unknown_magic_is_refused(magic):
    refused(magic + golden("ping")[2:], "bad magic")


@pytest.mark.parametrize("version", [0, 2, 255])
def test_unknown_version_is_refused(version):
    refused(golden("ping", header=f"5a4c{version:02x}04"), "unsupported wire version")


@pytest.mark.parametrize("command", [0, 6, 19, 21, 38, 40, 46, 49, 59, 63, 255])
def test_unknown_command_is_refused(command):
    refused(golden("ping", header=f"5a4c01{command:02x}"), "unknown command")


def test_empty_and_short_input_is_refused():
    refused(b"", "truncated")
    refused(b"Z", "truncated")
    refused(b"ZL\x01", "truncated")


def test_text_websocket_message_is_refused():
    refused("ZL", "text message")  # type: ignore[arg-type]


def test_non_bytes_input_is_refused():
    refused(12345, "bytes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- refusals: lengths


def test_text8_length_past_the_end_is_refused():
    refused(golden("hello", node_id="ff6e6f64652d61"), "truncated")
    refused(bytes.fromhex("5a4c010205") + b"ab", "truncated")


def test_blob32_length_past_the_end_is_refused():
    refused(golden("message-activation", body="000000087b226e223a327d"), "truncated")
    refused(golden("message-activation", metadata="000000036869"))


def test_body_above_the_cap_is_refused():
    huge_length = golden("message-ready", body="ffffffff7b226e223a327d")
    refused(huge_length, "above the 1048576-byte limit")
    refused(golden("message-ready"), "above the 6-byte limit", max_body_bytes=6)
    decode(golden("message-ready"), max_body_bytes=7)
    refused(golden("reply-create"), "above the 10-byte limit", max_body_bytes=10)


def test_metadata_above_the_cap_is_refused():
    too_long = f"{MAX_METADATA_BYTES + 1:08x}" + "00" * (MAX_METADATA_BYTES + 1)
    refused(golden("message-activation", metadata=too_long), "above the 16384-byte limit")


def test_frame_above_the_frame_cap_is_refused():
    big = SpotMessage(
        route=ReadyRoute(spot_id="c", object_generation=1, owner_generation=1, target=OWNER_B),
        operation_id=1,
        reply_correlation=0,
        deadline_ms=DEADLINE,
        source=OWNER_A,
        source_spot_id=None,
        metadata=None,
        payload=EncodedMessage("t", b"x" * 2000),
    )
    data = encode(big)
    refused(data, "above the 1024-byte frame limit", max_frame_bytes=1024)
    assert decode(data, max_frame_bytes=len(data)) == big
    refused(b"\x00" * (DEFAULT_MAX_FRAME_BYTES + 1), "frame limit")


# --------------------------------------------------------------------------- refusals: text


@pytest.mark.parametrize(
    "bad",
    [
        "ff",  # never valid in UTF-8
        "eda080",  # an encoded lone surrogate (U+D800)
        "c0af",  # overlong "/"
        "e282",  # truncated 3-byte sequence
        "f4908080",  # above U+10FFFF
        "80",  # lone continuation byte
    ],
)
def test_invalid_utf8_is_refused(bad):
    size = f"{len(bad) // 2:02x}"
    refused(golden("hello", node_id=size + bad), "not valid UTF-8")
    refused(golden("message-ready", spot_id=size + bad), "not valid UTF-8")
    refused(golden("message-ready", type_name=size + bad), "not valid UTF-8")
    refused(golden("message-activation", source_spot_id=size + bad), "not valid UTF-8")
    refused(golden("reply-failed", message="00" + size + bad), "not valid UTF-8")
    refused(golden("message-follow", spot_id=size + bad), "not valid UTF-8")
    refused(golden("relocate", mesh=size + bad), "not valid UTF-8")
    refused(golden("relocate", root_ref=size + bad), "not valid UTF-8")


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("hello", "node_id"),
        ("hello", "mesh"),
        ("welcome", "node_id"),
        ("message-ready", "spot_id"),
        ("message-ready", "type_name"),
        ("message-activation", "target_mesh"),
        ("message-activation", "stable_type"),
        ("create", "spot_id"),
        ("create", "stable_type"),
        ("close", "ref_spot_id"),
        ("close", "ref_mesh"),
        ("reply-create", "ref_mesh"),
        ("message-follow", "spot_id"),
        ("relocate", "spot_id"),
        ("relocate", "stable_type"),
        ("relocate", "mesh"),
        ("relocate", "root_ref"),
        ("reply-relocate", "ref_spot_id"),
    ],
)
def test_empty_required_text8_is_refused(name, field):
    refused(golden(name, **{field: "00"}), "is empty")


def test_empty_optional_text8_means_absent_and_empty_failure_message_is_allowed():
    frame = decode(golden("message-activation", source_spot_id="00"))
    assert isinstance(frame, SpotMessage)
    assert frame.source_spot_id is None
    failed = decode(golden("reply-failed", message="0000"))
    assert isinstance(failed, Reply)
    assert failed.outcome == Failure(code=2, message="")


def test_text8_of_255_bytes_is_accepted():
    long = "é" * 127 + "x"
    hello = Hello(
        node_id=long,
        node_rid=RID_A,
        lifecycle_generation=1,
        mesh=long,
        max_frame_bytes=1024,
        nonce=bytes(32),
        mac=bytes(32),
    )
    assert decode(encode(hello)) == hello


# --------------------------------------------------------------------------- refusals: values


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("hello", "node_rid"),
        ("message-ready", "target_rid"),
        ("message-ready", "source_rid"),
        ("create", "target_rid"),
        ("close", "ref_node_rid"),
        ("reply-create", "ref_node_rid"),
        ("message-follow", "target_rid"),
        ("relocate", "source_rid"),
        ("relocate", "target_rid"),
        ("reply-relocate", "ref_node_rid"),
    ],
)
def test_all_zero_rid_is_refused(name, field):
    refused(golden(name, **{field: "00" * 16}), "all-zero rid")


@pytest.mark.parametrize("value", [0, 2**63, 2**64 - 1])
@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("hello", "lifecycle"),
        ("message-ready", "object_generation"),
        ("message-ready", "owner_generation"),
        ("message-ready", "target_lifecycle"),
        ("message-ready", "source_lifecycle"),
        ("message-ready", "deadline"),
        ("message-activation", "descriptor_version"),
        ("create", "store_version"),
        ("create", "object_generation"),
        ("create", "owner_generation"),
        ("create", "deadline"),
        ("close", "ref_generation"),
        ("close", "owner_generation"),
        ("close", "store_version"),
        ("reply-create", "ref_generation"),
        ("message-follow", "object_generation"),
        ("message-follow", "source_owner_generation"),
        ("message-follow", "target_owner_generation"),
        ("message-follow", "target_lifecycle"),
        ("relocate", "source_lifecycle"),
        ("relocate", "target_lifecycle"),
        ("relocate", "object_generation"),
        ("relocate", "owner_generation"),
        ("relocate", "store_version"),
        ("relocate", "deadline"),
        ("reply-relocate", "ref_generation"),
    ],
)
def test_generation_out_of_range_is_refused(name, field, value):
    refused(golden(name, **{field: f"{value:016x}"}), "must be in 1..9223372036854775807")


def test_owner_lease_may_be_zero_but_not_2_pow_63():
    frame = decode(golden("create", owner_lease="00" * 8))
    assert isinstance(frame, UserSpotCreate)
    assert frame.owner_lease_expires_ms == 0
    refused(golden("create", owner_lease=f"{2**63:016x}"), "must be in 0..")


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("message-ready", "operation_id"),
        ("create", "correlation"),
        ("create", "operation_id"),
        ("close", "correlation"),
        ("close", "operation_id"),
        ("reply-close", "correlation"),
        ("message-follow", "operation_id"),
        ("relocate", "correlation"),
        ("relocate", "operation_id"),
        ("reply-relocate", "correlation"),
    ],
)
def test_zero_operation_id_or_correlation_is_refused(name, field):
    refused(golden(name, **{field: "00" * 8}), "reserved")


def test_zero_pending_capacity_is_refused():
    refused(golden("create", pending_capacity="00000000"), "pending capacity is 0")


def test_handshake_frame_limit_below_minimum_is_refused():
    refused(golden("hello", max_frame="000003ff"), "below the 1024-byte minimum")


@pytest.mark.parametrize(
    ("name", "fields", "needle"),
    [
        ("message-ready", {"route_kind": "00"}, "unknown route kind 0"),
        ("message-ready", {"route_kind": "04"}, "unknown route kind 4"),
        ("message-follow", {"route_kind": "ff"}, "unknown route kind 255"),
        ("message-ready", {"metadata_flag": "02"}, "metadata flag must be 0 or 1"),
        ("reply-close", {"closed": "02"}, "closed must be 0 or 1"),
        ("reply-message", {"reply_flag": "ff"}, "reply flag must be 0 or 1"),
        ("reply-create", {"reply_flag": "02"}, "create reply flag must be 0 or 1"),
        ("reply-create", {"create_state": "00"}, "unknown create state 0"),
        ("reply-create", {"create_state": "04"}, "unknown create state 4"),
        ("reply-close", {"terminal_result": "02"}, "unknown terminal result 2"),
        ("reply-close", {"failure_code": "0002"}, "an OK reply has failure code 2"),
        ("reply-failed", {"failure_code": "0000"}, "a FAILED reply has failure code 0"),
        ("reply-close", {"answers": "14"}, "cannot answer command 20"),
        ("reply-close", {"answers": "02"}, "cannot answer command 2"),
    ],
)
def test_unknown_enum_values_are_refused(name, fields, needle):
    refused(golden(name, **fields), needle)


def test_existing_create_result_with_a_reply_is_refused():
    refused(golden("reply-create", create_state="01"), "EXISTING create result carries")
    existing = decode(
        golden("reply-create", create_state="01", reply_flag="00", type_name="", body="")
    )
    assert isinstance(existing, Reply)
    assert existing.outcome == CreateOutcome(state=WireCreateState.EXISTING, ref=REF)


def test_refusals_are_remote_protocol_errors_with_a_message():
    error = refused(golden("ping", header="5a4c0109"))
    assert isinstance(error, ZLinkError)
    assert error.code == RemoteProtocolError.code
    assert "unknown command 9" in error.message


# --------------------------------------------------------------------------- encoding refusals


def _hello(**changes: object) -> Hello:
    fields: dict[str, object] = {
        "node_id": "n",
        "node_rid": RID_A,
        "lifecycle_generation": 1,
        "mesh": "w",
        "max_frame_bytes": 1024,
        "nonce": bytes(32),
        "mac": bytes(32),
        **changes,
    }
    return Hello(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [
        {"node_id": ""},
        {"node_id": "x" * 256},
        {"node_id": "\ud800"},
        {"node_id": b"n"},
        {"mesh": ""},
        {"node_rid": bytes(range(16))},
        {"lifecycle_generation": 0},
        {"lifecycle_generation": 2**63},
        {"lifecycle_generation": True},
        {"lifecycle_generation": 1.0},
        {"max_frame_bytes": 1023},
        {"max_frame_bytes": 2**32},
        {"nonce": bytes(31)},
        {"nonce": bytearray(32)},
        {"mac": bytes(33)},
    ],
)
def test_invalid_handshake_values_cannot_be_built(changes):
    with pytest.raises(LocalProtocolError):
        _hello(**changes)


def _message(**changes: object) -> SpotMessage:
    frame, _ = GOLDEN["message-activation"]
    assert isinstance(frame, SpotMessage)
    fields = {
        a: getattr(frame, a)
        for a in (
            "route",
            "operation_id",
            "reply_correlation",
            "deadline_ms",
            "source",
            "source_spot_id",
            "metadata",
            "payload",
        )
    }
    return SpotMessage(**{**fields, **changes})


@pytest.mark.parametrize(
    "changes",
    [
        {"route": OWNER_A},
        {"operation_id": 0},
        {"operation_id": 2**64},
        {"reply_correlation": -1},
        {"deadline_ms": 0},
        {"deadline_ms": 2**63},
        {"source": RID_A},
        {"source_spot_id": ""},
        {"metadata": bytearray(b"m")},
        {"metadata": b"m" * (MAX_METADATA_BYTES + 1)},
        {"payload": EncodedMessage("", b"{}")},
        {"payload": EncodedMessage("t", bytearray(b"{}"))},  # type: ignore[arg-type]
        {"payload": None},
    ],
)
def test_invalid_spot_message_values_cannot_be_built(changes):
    with pytest.raises(LocalProtocolError):
        _message(**changes)


def test_invalid_command_47_48_20_values_cannot_be_built():
    create, _ = GOLDEN["create"]
    close, _ = GOLDEN["close"]
    assert isinstance(create, UserSpotCreate)
    assert isinstance(close, UserSpotClose)
    for bad in (
        {"pending_capacity": 0},
        {"owner_lease_expires_ms": -1},
        {"correlation": 0},
        {"stable_type": "x" * 256},
    ):
        with pytest.raises(LocalProtocolError):
            attrs.evolve(create, **bad)
    for bad in ({"ref": OWNER_A}, {"expected_store_version": 0}, {"target": REF}):
        with pytest.raises(LocalProtocolError):
            attrs.evolve(close, **bad)
    with pytest.raises(LocalProtocolError, match="EXISTING"):
        CreateOutcome(state=WireCreateState.EXISTING, ref=REF, reply=ADD)
    with pytest.raises(LocalProtocolError):
        CreateOutcome(state=2, ref=REF)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        CloseOutcome(closed=1)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        Failure(code=0, message="x")
    with pytest.raises(LocalProtocolError):
        Failure(code=2**16, message="x")
    with pytest.raises(LocalProtocolError):
        Failure(code=2, message="é" * 40_000)
    with pytest.raises(LocalProtocolError, match="answers"):
        Reply(correlation=1, answers=Command.PING, outcome=MessageOutcome())
    with pytest.raises(LocalProtocolError, match="CloseOutcome"):
        Reply(correlation=1, answers=Command.USER_SPOT_CLOSE, outcome=MessageOutcome())
    with pytest.raises(LocalProtocolError):
        Reply(correlation=0, answers=Command.SPOT_MESSAGE, outcome=MessageOutcome())


def test_nested_core_values_validate_themselves():
    with pytest.raises(InvalidOperation):
        NodeRid(bytes(16))
    with pytest.raises(InvalidOperation):
        SpotRef(spot_id="", generation=1, mesh="w", node_rid=RID_A)


def test_encode_refuses_what_is_not_a_frame():
    with pytest.raises(LocalProtocolError, match="not a frame"):
        encode(REF)  # type: ignore[arg-type]


def test_encode_refuses_bodies_and_frames_above_the_limits():
    frame, _ = GOLDEN["message-ready"]
    with pytest.raises(LocalProtocolError, match="above the 6-byte limit"):
        encode(frame, max_body_bytes=6)  # type: ignore[arg-type]
    assert encode(frame, max_body_bytes=7) == golden("message-ready")  # type: ignore[arg-type]
    reply, _ = GOLDEN["reply-create"]
    with pytest.raises(LocalProtocolError, match="above the 10-byte limit"):
        encode(reply, max_body_bytes=10)  # type: ignore[arg-type]
    big = _message(payload=EncodedMessage("t", b"x" * 2000))
    with pytest.raises(LocalProtocolError, match="frame limit"):
        encode(big, max_frame_bytes=1024)


@pytest.mark.parametrize(
    "limits",
    [
        {"max_frame_bytes": 1023},
        {"max_frame_bytes": 2**32},
        {"max_frame_bytes": 4096.0},
        {"max_body_bytes": 0},
        {"max_body_bytes": True},
    ],
)
def test_bad_limits_are_configuration_errors(limits):
    with pytest.raises(InvalidConfiguration):
        encode(Ping(token=0), **limits)
    with pytest.raises(InvalidConfiguration):
        decode(golden("ping"), **limits)


# --------------------------------------------------------------------------- reply helpers


def test_reply_terminal_result_and_failure_code():
    ok, _ = GOLDEN["reply-close"]
    failed, _ = GOLDEN["reply-failed"]
    assert isinstance(ok, Reply)
    assert isinstance(failed, Reply)
    assert (ok.terminal_result, ok.failure_code) == (TerminalResult.OK, 0)
    assert (failed.terminal_result, failed.failure_code) == (TerminalResult.FAILED, 2)


def test_failure_round_trips_a_zlink_error():
    failure = Failure.from_error(NotFound("no Spot 'c-1'; create it first"))
    assert failure == Failure(code=2, message="no Spot 'c-1'; create it first")
    error = failure.to_error()
    assert type(error) is NotFound
    assert error.message == "no Spot 'c-1'; create it first"
    assert type(Failure(code=999, message="newer").to_error()) is ZLinkError


def test_failure_from_error_cuts_long_messages_on_a_character_boundary():
    failure = Failure.from_error(NotFound("é" * 40_000 + "\ud800"))
    assert len(failure.message.encode("utf-8")) <= 2**16 - 1
    assert failure.message == "é" * 32_767
    reply = Reply(correlation=1, answers=Command.SPOT_MESSAGE, outcome=failure)
    assert decode(encode(reply)) == reply
