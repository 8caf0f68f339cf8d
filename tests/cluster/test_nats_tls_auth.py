"""TLS and authentication between relays and NATS: a real nats-server that requires TLS
with client certificates (a throwaway CA made with ``cryptography``) and a user and
password, and one that requires a token; relays in-process and as ``sdschat relay``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from nats_servers import NatsServer, _wait_port, free_port
from net_helpers import Peer, T, channel, envelope, run, start_relay
from tls_certs import issue, make_ca

from net.relay_config import RelayConfig
from net.urls import check_nats_url, redact_url
from tests.procs import ROOT, sdschat

KEY = channel("tls-nats")
PASSWORD = "s3cret-Pa55"
TOKEN = "tok-9f8e7d6c5b4a"


@dataclass
class SecureNats:
    port: int
    ca: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that did not sign the server's certificate

    def url(self, userinfo: str = f"relay:{PASSWORD}", scheme: str = "tls") -> str:
        return f"{scheme}://{userinfo}@127.0.0.1:{self.port}"


class _ConfiguredNats(NatsServer):
    def __init__(self, name: str, conf: Path, port: int, log: Path) -> None:
        super().__init__(name, port, None, log)
        self.conf = conf

    def start(self, routes: list[int] | None = None, cluster_name: str = "") -> None:
        self.popen = subprocess.Popen(
            ["nats-server", "-c", str(self.conf), "-l", str(self.log)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )


@contextlib.contextmanager
def _nats(tmp: Path, name: str, body: str) -> Iterator[int]:
    """A nats-server on 127.0.0.1 with ``body`` as the rest of its config; yields its port."""
    port = free_port()
    conf = tmp / f"{name}.conf"
    conf.write_text(f"listen: 127.0.0.1:{port}\n{body}")
    server = _ConfiguredNats(name, conf, port, tmp / f"{name}.log")
    server.start()
    try:
        _wait_port(server, time.monotonic() + T(20))
        yield port
    finally:
        server.stop()


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNats]:
    """TLS with verified client certificates, and a user with a password."""
    tmp = tmp_path_factory.mktemp("secure-nats")
    ca = make_ca(tmp)
    other = make_ca(tmp, "other-ca")
    cert, key = issue(ca, tmp, "nats")
    client_cert, client_key = issue(ca, tmp, "relay-client", ("relay",), client=True)
    body = (
        f'tls {{\n  cert_file: "{cert}"\n  key_file: "{key}"\n  ca_file: "{ca.path}"\n'
        f"  verify: true\n  timeout: 2\n}}\n"
        f'authorization {{ user: relay, password: "{PASSWORD}" }}\n'
    )
    with _nats(tmp, "secure", body) as port:
        yield SecureNats(port, ca.path, client_cert, client_key, other.path)


def _tls_flags(s: SecureNats) -> dict[str, str]:
    return {
        "cluster_cafile": str(s.ca),
        "cluster_certfile": str(s.client_cert),
        "cluster_keyfile": str(s.client_key),
    }


def test_relays_share_envelopes_over_tls_with_client_certificates_and_a_password(
    secure: SecureNats,
) -> None:
    async def main() -> None:
        a, log_a = await start_relay(cluster=(secure.url(),), **_tls_flags(secure))
        b, _ = await start_relay(cluster=(secure.url(),), **_tls_flags(secure))
        try:
            connected = log_a.events("cluster_connected")[0]
            assert connected["tls"] is True
            assert connected["servers"] == [f"tls://relay:***@127.0.0.1:{secure.port}"]
            assert PASSWORD not in json.dumps(log_a.records)
            alice, bob = await Peer.open(a.url), await Peer.open(b.url)
            await alice.subscribe([KEY.topic])
            await bob.subscribe([KEY.topic])
            env = envelope(key=KEY, content=b"over TLS to NATS")
            await alice.publish(env)
            assert (await bob.recv_frame(10)).deliver.envelope == env
        finally:
            await a.close()
            await b.close()

    run(main(), base_timeout=40)


def _relay(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    # a long --cluster-timeout: a refusal must end the start at once, not at the timeout
    return subprocess.run(
        sdschat("relay", "--port", "0", "--cluster-timeout", "120", *args),
        cwd=ROOT, capture_output=True, text=True, timeout=T(timeout), check=False,
    )


def _one_line_failure(out: subprocess.CompletedProcess[str]) -> str:
    """The single ``relay_start_failed`` line's error; exit 1, no traceback, no secret."""
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and PASSWORD not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    record = json.loads(lines[0])
    assert record["event"] == "relay_start_failed"
    return str(record["error"])


def _cli_tls(s: SecureNats) -> list[str]:
    return ["--cluster-cafile", str(s.ca), "--cluster-certfile", str(s.client_cert),
            "--cluster-keyfile", str(s.client_key)]


def test_a_wrong_password_is_one_clear_line_and_exit_1(secure: SecureNats) -> None:
    out = _relay("--cluster", secure.url("relay:wrong"), *_cli_tls(secure))
    assert "refused the credentials (Authorization Violation)" in _one_line_failure(out)
    out = _relay("--cluster", secure.url("", "tls").replace("//@", "//"), *_cli_tls(secure))
    assert "refused the credentials" in _one_line_failure(out)  # none given
    # nothing listening: the start gives up at --cluster-timeout, in one line too
    out = _relay("--cluster", f"nats://relay:{PASSWORD}@127.0.0.1:{free_port()}",
                 "--cluster-timeout", "1")
    assert "no NATS server of nats://relay:***@127.0.0.1:" in _one_line_failure(out)


def test_tls_refusals_are_one_clear_line_and_exit_1(secure: SecureNats) -> None:
    # a server certificate from a CA we were not told about
    out = _relay("--cluster", secure.url(), "--cluster-cafile", str(secure.other_ca),
                 "--cluster-certfile", str(secure.client_cert),
                 "--cluster-keyfile", str(secure.client_key))
    error = _one_line_failure(out)
    assert "TLS certificate of the NATS server not accepted" in error
    assert "--cluster-cafile" in error
    # no client certificate for a server that verifies clients
    out = _relay("--cluster", secure.url(), "--cluster-cafile", str(secure.ca))
    assert "requires a TLS client certificate" in _one_line_failure(out)
    # a file that does not load
    out = _relay("--cluster", secure.url(), "--cluster-cafile", str(secure.ca.parent / "nope"))
    assert "cannot load --cluster-cafile" in _one_line_failure(out)


def test_sdschat_relay_over_tls_with_a_password_starts_and_logs_no_secret(
    secure: SecureNats, tmp_path: Path
) -> None:
    err = tmp_path / "relay.err"
    with err.open("w") as f:
        proc = subprocess.Popen(
            sdschat("relay", "--port", "0", "--cluster", secure.url(), *_cli_tls(secure)),
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=f,
        )
    try:
        deadline = time.monotonic() + T(20)
        while "relay_listening" not in err.read_text():  # bounded by the deadline
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(T(10))
    text = err.read_text()
    assert proc.returncode == 0, text
    assert PASSWORD not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["tls"] for r in records if r["event"] == "cluster_connected"] == [True]


def test_a_token_from_a_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    with _nats(tmp_path, "token", f'authorization {{ token: "{TOKEN}" }}\n') as port:
        url = f"nats://127.0.0.1:{port}"

        async def main() -> None:
            server, log = await start_relay(cluster=(url,), cluster_token_file=str(token_file))
            try:
                assert log.events("cluster_connected")[0]["tls"] is False
                assert TOKEN not in json.dumps(log.records)
            finally:
                await server.close()

        run(main())
        # the token in the URL works too, and is not logged
        async def in_url() -> None:
            server, log = await start_relay(cluster=(f"nats://{TOKEN}@127.0.0.1:{port}",))
            try:
                assert log.events("cluster_connected")[0]["servers"] == [
                    f"nats://***@127.0.0.1:{port}"
                ]
            finally:
                await server.close()

        run(in_url())
        token_file.write_text("not-it")
        out = _relay("--cluster", url, "--cluster-token-file", str(token_file))
        assert "refused the credentials" in _one_line_failure(out)
        token_file.write_text("")
        out = _relay("--cluster", url, "--cluster-token-file", str(token_file))
        assert "must hold one token" in _one_line_failure(out)
        # TLS asked for (tls://) from a server without TLS: refused, never plain text
        out = _relay("--cluster", f"tls://{TOKEN}@127.0.0.1:{port}")
        assert "does not use TLS, though TLS was asked for" in _one_line_failure(out)
        assert "no credential was sent to it" in out.stderr


def test_cluster_tls_flags_are_checked_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="--cluster-keyfile needs --cluster-certfile"):
        RelayConfig(cluster=("nats://127.0.0.1:4222",), cluster_keyfile="k.pem")
    with pytest.raises(ValueError, match="--cluster-cafile needs --cluster"):
        RelayConfig(cluster_cafile="ca.pem")
    out = subprocess.run(
        sdschat("relay", "--cluster-token-file", "t"),
        cwd=ROOT, capture_output=True, text=True, timeout=T(30), check=False,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "sdschat relay: --cluster-token-file needs --cluster"


def test_nats_urls_are_checked_in_one_place_and_secrets_are_redacted() -> None:
    assert check_nats_url("nats://relay:pw@127.0.0.1:4222") == "nats://relay:pw@127.0.0.1:4222"
    with pytest.raises(ValueError, match=r"--cluster must be a nats://HOST:PORT URL, got "
                       r"'http://u:\*\*\*@h:1'"):
        check_nats_url("http://u:pw@h:1")
    with pytest.raises(ValueError, match="port 0"):
        RelayConfig(cluster=("tls://127.0.0.1:0",))
    assert redact_url("tls://relay:pw@h:4222") == "tls://relay:***@h:4222"
    assert redact_url("nats://TOKEN@h:4222/x") == "nats://***@h:4222/x"
    assert redact_url("nats://h:4222") == "nats://h:4222"


def test_no_credential_reaches_a_server_that_does_not_offer_tls() -> None:
    """A fake NATS server (plain TCP) that answers INFO without TLS, as a man in the middle
    stripping TLS would: the relay asked for TLS and must not send it the password."""
    received = bytearray()

    async def fake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b'INFO {"server_id":"fake","version":"2.9.10","proto":1,"host":"127.0.0.1",'
            b'"port":4222,"max_payload":1048576,"auth_required":true}\r\n'
        )
        await writer.drain()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                while chunk := await reader.read(4096):  # bounded by the timeout
                    received.extend(chunk)
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(fake, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(ConnectionError, match="does not use TLS"):
                await start_relay(
                    cluster=(f"tls://relay:{PASSWORD}@127.0.0.1:{port}",),
                    cluster_timeout=5.0,
                )
        finally:
            server.close()
            await server.wait_closed()

    run(main())
    assert PASSWORD.encode() not in received, bytes(received)

