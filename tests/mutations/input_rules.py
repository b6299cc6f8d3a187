"""The mutation gate's entries for what the runtime accepts from callers and peers:
identity formats (``core/identity.py``) and the mesh handshake's authentication
(``wire/handshake.py``, ``wire/_handshake_side.py``).

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from mutation import Mutation

__all__ = ("INPUT_RULES",)

_IDENTITY = "Identity: Spot IDs, types, Entry IDs, NodeRid, generations"
_MESH = "Mesh commands 39 / 47 / 48 / 20 and the handshake"
_HANDSHAKE = "tests/wire/test_handshake.py"

INPUT_RULES: tuple[Mutation, ...] = (
    Mutation(
        name="identity.entry_format_reserved",
        family=_IDENTITY,
        rule="A caller's Spot ID of the reserved Entry form is refused (InvalidOperation).",
        path="zlink_trio/core/identity.py",
        find="    spot_id = validate_spot_id(value)\n    if is_entry_spot_id(spot_id):",
        replace="    spot_id = validate_spot_id(value)\n    if False:",
        guards=["tests/core/test_identity.py::test_entry_format_is_reserved"],
    ),
    Mutation(
        name="handshake.hello_mac",
        family=_MESH,
        rule="A HELLO whose MAC does not check out under the cluster secret is refused.",
        path="zlink_trio/wire/handshake.py",
        find="            if not hmac.compare_digest(expected, frame.mac):",
        replace="            if False:",
        guards=[f"{_HANDSHAKE}::test_client_with_the_wrong_secret_is_refused_by_the_server"],
    ),
    Mutation(
        name="handshake.welcome_mac",
        family=_MESH,
        rule="A WELCOME whose MAC does not check out under the cluster secret is refused.",
        path="zlink_trio/wire/handshake.py",
        find="welcome_mac(self._secret, frame, self._hello)\n"
             "        if not hmac.compare_digest(expected, frame.mac):",
        replace="welcome_mac(self._secret, frame, self._hello)\n        if False:",
        guards=[f"{_HANDSHAKE}::test_server_with_the_wrong_secret_is_refused_by_the_client"],
    ),
    Mutation(
        name="handshake.replayed_hello",
        family=_MESH,
        rule="A HELLO signed for another link's challenge (a replay) is refused.",
        path="zlink_trio/wire/handshake.py",
        find="expected = hello_mac(self._secret, frame, self._challenge)",
        replace="expected = frame.mac",
        guards=[f"{_HANDSHAKE}::test_replayed_hello_against_a_new_challenge_is_refused"],
    ),
    Mutation(
        name="handshake.own_rid",
        family=_MESH,
        rule="A peer that claims this node's own NodeRid (a reflected or looped link) is "
             "refused.",
        path="zlink_trio/wire/_handshake_side.py",
        find="        if peer.node_rid == me.node_rid:",
        replace="        if False:",
        guards=[f"{_HANDSHAKE}::test_a_node_talking_to_itself_is_refused"],
    ),
)
