"""Replies that go back on a link: command 20 for a request another node sent.

:class:`LinkReply` is the completion of a request that arrived over a link (a direct
call, a relayed first message, a message that follows a relocated Spot): whoever
completes it -- the Spot's turn, a relay, an error path -- sends the one command 20
to the requester on the link the request came on.  A value is encoded with the
node's codec; an :class:`~zlink_trio.wire.codec.EncodedMessage` (a reply relayed from
another node) is passed through unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.core.errors import Unavailable, ZLinkError
from zlink_trio.runtime.calls.completion import Completion
from zlink_trio.runtime.observe.logs import MESH as LOGGER
from zlink_trio.wire.frames import (
    Command,
    EncodedMessage,
    Failure,
    Reply,
    encode_message_outcome,
    encode_reply,
)

if TYPE_CHECKING:
    from zlink_trio.runtime.mesh.peers import Peers
    from zlink_trio.runtime.state import NodeState
    from zlink_trio.transport import Link
    from zlink_trio.wire.frames import Outcome

__all__ = ("LinkReply", "failure_of", "send_reply")


def failure_of(error: BaseException) -> Failure:
    """The ``Failure`` outcome for ``error`` (a non-zlink error says the outcome is unknown)."""
    if isinstance(error, ZLinkError):
        return Failure.from_error(error)
    return Failure.from_error(Unavailable(
        f"the operation ended with {type(error).__name__} on the target; it may or may not "
        "have run"))


def send_reply(link: Link, reply: Reply, *, write: bool = False) -> None:
    """Queue ``reply`` on ``link``; a link that closed meanwhile is logged, not raised."""
    try:
        link.send_nowait(reply, write=write)
    except ZLinkError as exc:
        LOGGER.info("reply %d to node %r not sent: %s", reply.correlation,
                    link.peer.node_id, exc.message)


class LinkReply(Completion):
    """A request's completion whose result goes back to the requester as command 20.

    The replies of a link are counted while they are open (``Peers.serving``): the
    last open one is written at once by the task that completes it, the others are
    left to the link's writer, which joins the replies of one burst into one write.
    """

    __slots__ = ("_correlation", "_link", "_peers", "_rt")

    def __init__(self, rt: NodeState, peers: Peers, link: Link, correlation: int) -> None:
        super().__init__()
        self._rt = rt
        self._peers = peers
        self._link = link
        self._correlation = correlation
        serving = peers.serving
        serving[link] = serving.get(link, 0) + 1

    def _finish(self) -> None:
        super()._finish()
        link = self._link
        serving = self._peers.serving
        open_replies = serving.get(link, 1) - 1
        if open_replies > 0:
            serving[link] = open_replies
        else:
            serving.pop(link, None)
        outcome: Outcome
        if self._error is not None:
            outcome = failure_of(self._error)
        else:
            value = self._value
            try:
                encoded = (value if value is None or isinstance(value, EncodedMessage)
                           else self._rt.codec.encode(value))
                # A success is written from its fields (no Reply or outcome object).
                data = encode_reply(self._correlation, Command.SPOT_MESSAGE,
                                    encode_message_outcome(encoded))
            except ZLinkError as exc:
                outcome = Failure.from_error(exc)
            else:
                _send_encoded(link, self._correlation, data, write=open_replies <= 0)
                return
        send_reply(link, Reply(correlation=self._correlation, answers=Command.SPOT_MESSAGE,
                          outcome=outcome), write=open_replies <= 0)


def _send_encoded(link: Link, correlation: int, data: bytes, *, write: bool) -> None:
    """:func:`send_reply` for a reply already encoded."""
    try:
        link.send_encoded_nowait(data, write=write)
    except ZLinkError as exc:
        LOGGER.info("reply %d to node %r not sent: %s", correlation, link.peer.node_id,
                    exc.message)
