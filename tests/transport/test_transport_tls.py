"""Mesh links over TLS (``wss://``) between real transports on 127.0.0.1.

A throw-away CA from ``trustme`` signs a server certificate for ``127.0.0.1`` and
``localhost`` (and, for mutual TLS, a client certificate). Who may link is decided by
the SSL contexts given to ``TransportConfig``; every refusal must end the dial with
``Unavailable`` at once -- never by running into ``connect_timeout`` -- with a message
that names the cause, and leave no link on either side. Real clock, every test bounded by
``trio.fail_after``; nothing sleeps.
"""

from __future__ import annotations

import ssl

import pytest
import trio
import trustme
from transport_helpers import Recorder, config, reply, spot_message

from zlink_trio.core.errors import Unavailable
from zlink_trio.transport import open_transport

LIMIT = 10


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server_cert(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("127.0.0.1", "localhost")


def server_context(cert: trustme.LeafCert, *, client_ca: trustme.CA | None = None
                   ) -> ssl.SSLContext:
    """A server context with ``cert``; with ``client_ca`` it requires a client certificate."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        client_ca.configure_trust(ctx)
    return ctx


def client_context(ca: trustme.CA | None, *, cert: trustme.LeafCert | None = None
                   ) -> ssl.SSLContext:
    """A verifying client context trusting ``ca`` (only the system CAs when ``None``)."""
    ctx = ssl.create_default_context()
    if ca is not None:
        ca.configure_trust(ctx)
    if cert is not None:
        cert.configure_cert(ctx)
    return ctx


async def test_wss_link_exchanges_frames_both_ways(ca, server_cert):
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a", client_ssl_context=client_context(ca)), ha) as ta, \
                open_transport(config("b", server_ssl_context=server_context(server_cert)),
                               hb) as tb:
            assert tb.endpoint.startswith("wss://127.0.0.1:")
            assert ta.endpoint.startswith("ws://")
            link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            assert link.outbound
            assert link.peer.node_id == "b"
            for n in range(1, 51):
                link.send_nowait(spot_message(n))
            for n in range(1, 51):
                inbound, frame = await hb.frame_rx.receive()
                assert frame == spot_message(n)
            inbound.send_nowait(reply(7))
            got_link, got = await ha.frame_rx.receive()
            assert got_link is link
            assert got == reply(7)
            assert len(ta.links()) == 1
            assert len(tb.links()) == 1


async def test_wss_endpoint_named_by_localhost_verifies_too(ca, server_cert):
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a", client_ssl_context=client_context(ca)), ha) as ta, \
                open_transport(config("b", server_ssl_context=server_context(server_cert)),
                               hb) as tb:
            endpoint = tb.endpoint.replace("127.0.0.1", "localhost")
            link = await ta.link_to(tb._config.identity.node_rid, "b", endpoint)
            link.send_nowait(spot_message(1))
            _, frame = await hb.frame_rx.receive()
            assert frame == spot_message(1)


@pytest.mark.parametrize("trust", ["system-only", "other-ca"])
async def test_client_that_does_not_trust_the_ca_is_refused_and_leaves_no_link(
        ca, server_cert, trust):
    ha, hb = Recorder(), Recorder()
    untrusting = client_context(None if trust == "system-only" else trustme.CA())
    with trio.fail_after(LIMIT):
        async with open_transport(config("a", client_ssl_context=untrusting), ha) as ta, \
                open_transport(config("b", server_ssl_context=server_context(server_cert)),
                               hb) as tb:
            with pytest.raises(Unavailable, match=r"TLS handshake failed.*CERTIFICATE_VERIFY"):
                await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            assert ta.links() == []
            assert tb.links() == []
            assert hb.checked == []  # the HMAC handshake never started
            assert ha.checked == []
            # The server is unharmed: a client that trusts the CA links.
            async with open_transport(config("c", client_ssl_context=client_context(ca)),
                                      Recorder()) as tc:
                link = await tc.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
                assert not link.closed


async def test_certificate_for_another_host_name_is_refused(ca):
    ha, hb = Recorder(), Recorder()
    wrong_name = ca.issue_cert("node-b.example")
    with trio.fail_after(LIMIT):
        async with open_transport(config("a", client_ssl_context=client_context(ca)), ha) as ta, \
                open_transport(config("b", server_ssl_context=server_context(wrong_name)),
                               hb) as tb:
            with pytest.raises(Unavailable, match=r"TLS handshake failed.*not valid for"):
                await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            assert ta.links() == []
            assert tb.links() == []


async def test_plain_ws_client_against_a_tls_server_fails_cleanly(ca, server_cert):
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a", client_ssl_context=client_context(ca)), ha) as ta, \
                open_transport(config("b", server_ssl_context=server_context(server_cert)),
                               hb) as tb:
            plain = tb.endpoint.replace("wss://", "ws://")
            with pytest.raises(Unavailable, match=r"ws://127\.0\.0\.1:\d+: connection refused"):
                await ta.link_to(tb._config.identity.node_rid, "b", plain)
            assert ta.links() == []
            assert tb.links() == []
            assert hb.checked == []
            # The same client dialling the wss:// endpoint still links.
            link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            assert not link.closed


async def test_tls_client_against_a_plain_server_fails_cleanly(ca):
    ha, hb = Recorder(), Recorder()
    with trio.fail_after(LIMIT):
        async with open_transport(config("a", client_ssl_context=client_context(ca)), ha) as ta, \
                open_transport(config("b"), hb) as tb:
            secure = tb.endpoint.replace("ws://", "wss://")
            with pytest.raises(Unavailable, match=r"TLS handshake failed.*WRONG_VERSION"):
                await ta.link_to(tb._config.identity.node_rid, "b", secure)
            assert ta.links() == []
            assert tb.links() == []
            assert hb.checked == []


async def test_mutual_tls_links_with_a_client_certificate(ca, server_cert):
    ha, hb = Recorder(), Recorder()
    client_cert = ca.issue_cert("node-a")
    server_ctx = server_context(server_cert, client_ca=ca)
    with trio.fail_after(LIMIT):
        async with open_transport(
                config("a", client_ssl_context=client_context(ca, cert=client_cert)), ha) as ta, \
                open_transport(config("b", server_ssl_context=server_ctx), hb) as tb:
            link = await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            link.send_nowait(spot_message(1))
            inbound, frame = await hb.frame_rx.receive()
            assert frame == spot_message(1)
            assert inbound.peer.node_id == "a"


@pytest.mark.parametrize("offered", ["no-certificate", "certificate-of-another-ca"])
async def test_mutual_tls_refuses_a_client_without_an_accepted_certificate(
        ca, server_cert, offered):
    ha, hb = Recorder(), Recorder()
    server_ctx = server_context(server_cert, client_ca=ca)
    cert = None if offered == "no-certificate" else trustme.CA().issue_cert("node-a")
    with trio.fail_after(LIMIT):
        async with open_transport(
                config("a", client_ssl_context=client_context(ca, cert=cert)), ha) as ta, \
                open_transport(config("b", server_ssl_context=server_ctx), hb) as tb:
            # TLS 1.3: the client's handshake completes, the server refuses its (missing)
            # certificate and closes, so the client learns it while upgrading.
            with pytest.raises(Unavailable, match=r"wss://127\.0\.0\.1:\d+: .*refused or broken"):
                await ta.link_to(tb._config.identity.node_rid, "b", tb.endpoint)
            assert ta.links() == []
            assert tb.links() == []
            assert hb.checked == []
            assert ha.checked == []
