"""Starting a node's mesh links: ``NetworkOptions``, and the transport's lifetime.

Theory of operation
-------------------
:class:`NetworkOptions` (``open_node(network=...)``, or its fields as keywords) is
checked when it is built, before the store is touched, by :func:`mesh_settings`:

* ``listen`` is ``"host:port"`` (``"[v6]:port"`` for IPv6; port 0 = any free port) or
  ``None`` for a node with no links, which can only reach Spots it owns.  The default
  is ``"127.0.0.1:0"``.
* ``secret`` (``bytes`` or ``str``, at least 32 bytes) is the HMAC-SHA256 key every node
  of the cluster shares.  A node refuses to start on a non-loopback address without
  one.  On loopback a missing secret means a fixed, publicly known development key:
  it keeps a laptop demo working, and it authenticates nothing -- so anything that
  leaves the machine needs a real secret (and TLS, ``ssl_context=``).
* ``endpoint`` overrides the address the descriptor publishes (1..2048 UTF-8 bytes);
  ``max_links`` bounds the open links.

The transport has to be listening before the descriptor is claimed (the descriptor
publishes the bound port), but the handshake announces the lifecycle generation that
the claim issues.  So :class:`MeshEntry` is the transport's handler from the start and
refuses every link until :meth:`MeshEntry.attach` gives it the node's
:class:`~.peers.Peers` and the transport its final identity.
"""

from __future__ import annotations

import ipaddress
import ssl
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import attrs

from zlink_trio.core.descriptor import MAX_ENDPOINT_BYTES
from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.transport import TransportConfig, open_transport
from zlink_trio.wire.frames import DEFAULT_MAX_FRAME_BYTES
from zlink_trio.wire.handshake import MIN_SECRET_BYTES, LocalIdentity

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from zlink_trio.core.identity import NodeRid
    from zlink_trio.runtime.mesh.peers import InboundFrame, Peers
    from zlink_trio.transport import Link, MeshTransport
    from zlink_trio.wire.frames import Reply
    from zlink_trio.wire.handshake import PeerIdentity

__all__ = ("DEV_SECRET", "MeshEntry", "MeshSettings", "NetworkOptions", "mesh_settings",
           "open_mesh")

#: The development key used on loopback when no secret is given (public: not a secret).
DEV_SECRET: Final = b"zlink-trio development key: loopback only, authenticates nothing"


@attrs.frozen(kw_only=True)
class MeshSettings:
    """Validated mesh options of one node (``None`` host: no links)."""

    host: str | None
    port: int
    secret: bytes
    ssl_context: ssl.SSLContext | None
    client_ssl_context: ssl.SSLContext | None
    #: At most this many links open at once (inbound and outbound).
    max_links: int = 1024


def _split(listen: str) -> tuple[str, int]:
    host, sep, port_text = listen.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InvalidConfiguration(
            f"listen must be 'host:port' (e.g. '127.0.0.1:0', port 0 = any free port) or "
            f"None, got {listen!r}"
        )
    return host, int(port_text)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@attrs.frozen(kw_only=True)
class NetworkOptions:
    """How a node links to the other nodes of its Mesh (``open_node(network=...)``).

    ``listen``: the ``"host:port"`` its websocket links are served on (``"127.0.0.1:0"``:
    any free loopback port; ``None``: no links, so only Spots this node owns are
    reachable). ``secret`` (bytes or str, >= 32 bytes, the same on every node)
    authenticates the links; it is required on a non-loopback address.
    ``ssl_context`` makes the server speak TLS (``wss://``); ``client_ssl_context`` is
    used to dial ``wss://`` peers. ``endpoint`` overrides the ``ws://`` address the
    descriptor publishes (e.g. behind NAT). At most ``max_links`` (1024) links are open
    at once: a connection beyond it is refused, a call that would dial one more is
    ``Unavailable``. Raises :class:`InvalidConfiguration`, saying what to change, for
    options that cannot work together.
    """

    listen: str | None = "127.0.0.1:0"
    secret: bytes | str | None = None
    ssl_context: ssl.SSLContext | None = None
    client_ssl_context: ssl.SSLContext | None = None
    endpoint: str | None = None
    max_links: int = 1024

    def __attrs_post_init__(self) -> None:
        mesh_settings(self)
        endpoint = self.endpoint
        if endpoint is not None and not (isinstance(endpoint, str) and 1 <= len(
                endpoint.encode("utf-8", "replace")) <= MAX_ENDPOINT_BYTES):
            raise InvalidConfiguration(
                f"endpoint must be a str of 1..{MAX_ENDPOINT_BYTES} UTF-8 bytes, got "
                f"{endpoint!r}"
            )


def mesh_settings(network: NetworkOptions) -> MeshSettings:
    """Check the mesh options of ``open_node``; InvalidConfiguration says what to change."""
    listen, secret, max_links = network.listen, network.secret, network.max_links
    ssl_context, client_ssl_context = network.ssl_context, network.client_ssl_context
    if isinstance(max_links, bool) or not isinstance(max_links, int) or max_links < 1:
        raise InvalidConfiguration(f"max_links must be an int >= 1, got {max_links!r}")
    if listen is not None and not isinstance(listen, str):
        raise InvalidConfiguration(f"listen must be a 'host:port' str or None, got {listen!r}")
    for name, value in (("ssl_context", ssl_context), ("client_ssl_context",
                                                       client_ssl_context)):
        if value is not None and not isinstance(value, ssl.SSLContext):
            raise InvalidConfiguration(f"{name} must be an ssl.SSLContext or None, got "
                                       f"{value!r}")
    host, port = _split(listen) if listen is not None else (None, 0)
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if secret is None:
        if host is not None and not _is_loopback(host):
            raise InvalidConfiguration(
                f"refusing to listen on {listen!r} without a secret: any process that can "
                "reach it could join the mesh. Pass secret=<at least 32 random bytes shared "
                "by every node> (and ssl_context= for TLS), or listen on 127.0.0.1"
            )
        secret = DEV_SECRET
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
        raise InvalidConfiguration(
            f"secret must be bytes or str of at least {MIN_SECRET_BYTES} bytes (the same on "
            "every node); generate one with secrets.token_bytes(32)"
        )
    return MeshSettings(host=host, port=port, secret=secret, ssl_context=ssl_context,
                        client_ssl_context=client_ssl_context, max_links=max_links)


class MeshEntry:
    """The transport's handler: refuses links until :meth:`attach`, then is ``Peers``."""

    def __init__(self) -> None:
        self._peers: Peers | None = None

    def attach(self, peers: Peers, transport: MeshTransport, identity: LocalIdentity) -> None:
        """Start admitting links: the node's runtime exists and its lifecycle is known."""
        transport.set_identity(identity)
        peers.transport = transport
        self._peers = peers

    async def check_peer(self, peer: PeerIdentity) -> bool:
        """False until attached; then the node's own check."""
        return self._peers is not None and await self._peers.check_peer(peer)

    def frame_received(self, link: Link, frame: InboundFrame | Reply) -> None:
        """Hand to the node (links exist only once attached)."""
        if self._peers is not None:
            self._peers.frame_received(link, frame)

    def link_closed(self, link: Link) -> None:
        """Hand to the node."""
        if self._peers is not None:
            self._peers.link_closed(link)


def placeholder_identity(node_id: str, node_rid: NodeRid, mesh: str) -> LocalIdentity:
    """The identity the transport starts with (never shown: links wait for attach)."""
    return LocalIdentity(node_id=node_id, node_rid=node_rid, lifecycle_generation=1,
                         mesh=mesh, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES)


@asynccontextmanager
async def open_mesh(settings: MeshSettings, node_id: str, node_rid: NodeRid, mesh: str,
                    random_bytes: Callable[[int], bytes]
                    ) -> AsyncIterator[tuple[MeshEntry, MeshTransport | None]]:
    """Listen (unless ``settings.host`` is None) for the block; yields the handler and
    the transport (``None`` without links)."""
    entry = MeshEntry()
    if settings.host is None:
        yield entry, None
        return
    config = TransportConfig(
        identity=placeholder_identity(node_id, node_rid, mesh), secret=settings.secret,
        listen_host=settings.host, listen_port=settings.port,
        server_ssl_context=settings.ssl_context,
        client_ssl_context=settings.client_ssl_context, random_bytes=random_bytes,
        max_links=settings.max_links)
    async with open_transport(config, entry) as transport:
        yield entry, transport
