"""TLS and authentication against a node started with ``--tls-cert``,
``--tls-client-ca``, ``--auth`` and a bootstrap superuser."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import hermes
from hermes import Start
from hermes._proto import hermes_pb2 as pb

from conftest import Broker, hermes_bin

ADMIN_PASSWORD = "adminpass1"


class SecureNode:
    def __init__(self, broker: Broker, certs: Path) -> None:
        self.broker = broker
        self.addr = broker.grpc_addr
        self.certs = certs
        self.ca = str(certs / "ca.crt")

    def client(self, **kw) -> hermes.Client:
        kw.setdefault("ca_file", self.ca)
        return hermes.Client(self.addr, **kw)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory):
    certs = tmp_path_factory.mktemp("certs")
    subprocess.run(
        [str(hermes_bin()), "dev-certs", "--dir", str(certs), "--clients", "admin,alice"],
        check=True,
        capture_output=True,
    )
    pw = certs / "admin-password"
    pw.write_text(ADMIN_PASSWORD + "\n")
    pw.chmod(0o600)
    b = Broker(
        [
            "--tls-cert",
            str(certs / "node-1.crt"),
            "--tls-key",
            str(certs / "node-1.key"),
            "--tls-client-ca",
            str(certs / "ca.crt"),
            "--auth",
            "--superusers",
            "admin",
            "--bootstrap-user",
            "admin",
            "--bootstrap-password-file",
            str(pw),
        ],
        ca_file=str(certs / "ca.crt"),
    ).start()
    try:
        yield SecureNode(b, certs)
    finally:
        b.cleanup()


async def test_password_over_tls(secure: SecureNode, topic_name) -> None:
    async with secure.client(username="admin", password=ADMIN_PASSWORD) as c:
        me = await c.whoami()
        assert (me.principal, me.via, me.auth_required) == ("admin", "password", True)
        name = topic_name()
        await c.create_topic(name, partitions=2)
        async with await c.producer(name) as p:
            acks = [await p.send_and_wait(f"{i}".encode(), key=b"k") for i in range(5)]
        consumer = await c.subscribe(name, group=topic_name("g"), start=Start.earliest())
        got = [await consumer.next(timeout=10) for _ in range(5)]
        assert [(m.partition, m.offset) for m in got] == [(a.partition, a.offset) for a in acks]
        await consumer.close()


async def test_no_or_wrong_credentials_are_refused(secure: SecureNode) -> None:
    async with secure.client() as c:
        with pytest.raises(hermes.UnauthenticatedError) as ei:
            await c.list_topics()
        assert ei.value.code is hermes.ErrorCode.UNAUTHENTICATED and not ei.value.retriable
    async with secure.client(username="admin", password="wrong") as c:
        with pytest.raises(hermes.UnauthenticatedError):
            await c.list_topics()
        with pytest.raises(hermes.UnauthenticatedError):
            await c.subscribe("anything")


async def test_client_certificate_names_the_principal(secure: SecureNode, topic_name) -> None:
    async with secure.client(
        cert_file=str(secure.certs / "client-alice.crt"), key_file=str(secure.certs / "client-alice.key")
    ) as c:
        me = await c.whoami()
        assert (me.principal, me.via) == ("alice", "certificate")
        with pytest.raises(hermes.PermissionDeniedError) as ei:
            await c.create_topic(topic_name())  # no ACL allows alice to
        assert not ei.value.retriable


async def test_api_token(secure: SecureNode) -> None:
    async with secure.client(username="admin", password=ADMIN_PASSWORD) as admin:
        r = await admin._call("CreateToken", pb.CreateTokenRequest(description="python sdk test"))
    async with secure.client(token=r.token) as c:
        me = await c.whoami()
        assert (me.principal, me.via) == ("admin", "token")
        assert (await c.health()).status == "SERVING"


async def test_plaintext_or_unknown_ca_cannot_connect(secure: SecureNode) -> None:
    with pytest.raises(hermes.UnavailableError):
        await hermes.Client(secure.addr, connect_timeout=5).connect()
    # The system roots do not know the dev CA: the TLS handshake fails.
    with pytest.raises(hermes.UnavailableError):
        await hermes.Client(secure.addr, tls=True, connect_timeout=5).connect()
    with pytest.raises(hermes.InvalidArgumentError):
        hermes.Client(secure.addr, ca_file="/nonexistent/ca.crt")._make_channel()
