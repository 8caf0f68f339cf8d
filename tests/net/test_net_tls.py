"""TLS (wss://) for the relay and the store: real processes on 127.0.0.1, certificates made here.

A throwaway CA and server certificates are generated with ``cryptography`` at
test time (tests/net/tls_certs.py). Covered: two headless nodes chatting
through a wss:// relay with ``--cafile``; SIGHUP makes new connections get a
renewed certificate without a restart (a broken file keeps the old one); the
store's query listener over wss://; and the clear messages for a wss:// URL to
a plain relay, a ws:// URL to a TLS relay, and an untrusted certificate.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
from cryptography import x509

from net.relay_client import RelayClient
from net.store_client import StoreClient, StoreUnavailable
from tests.net.tls_certs import issue, make_ca
from tests.procs import ROOT, Cluster, Proc, T, running, sdschat


def _relay(c: Cluster, *flags: str, name: str = "relay") -> tuple[Proc, int]:
    p = c.start(sdschat("relay", "--port", "0", "--stats-interval", "0", *flags), name,
                stdin=False)
    return p, int(p.wait_log("relay_listening")["port"])


def _served_serial(port: int, cafile: Path) -> int:
    """The serial number of the certificate a new TLS connection to ``port`` is shown."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=T(10)) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _reason(url: str, cafile: str | None = None) -> str:
    """Why a RelayClient cannot connect to ``url`` (its first ``disconnected`` reason)."""

    async def go() -> str:
        client = RelayClient(url, [b"t" * 16], lambda _e: None, max_attempts=1,
                             connect_timeout=T(10), cafile=cafile)
        client.start()
        for _ in range(int(T(200))):  # bounded: ~T(20) s
            if client.last_reason is not None:
                break
            await asyncio.sleep(0.1)
        await client.close()
        return client.last_reason or ""

    return asyncio.run(go())


def test_two_nodes_chat_through_a_wss_relay(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    cert, key = issue(ca, tmp_path)
    with running(Cluster(tmp_path)) as c:
        relay, port = _relay(c, "--certfile", str(cert), "--keyfile", str(key))
        assert relay.wait_log("relay_listening")["tls"] is True
        url = f"wss://127.0.0.1:{port}"
        nodes = [c.headless(n, tmp_path / n, relay=url, extra=["--cafile", str(ca.path)])
                 for n in ("alice", "bob")]
        for p in nodes:
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 30,
                       "connected over wss://")
        nodes[0].send("over tls")
        nodes[1].wait_for(
            lambda: any(e["text"] == "over tls" for e in nodes[1].select("delivered")), 30,
            "the line delivered over wss://",
        )


def test_sighup_reloads_the_certificate_for_new_connections(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    cert, key = issue(ca, tmp_path)
    first = x509.load_pem_x509_certificate(cert.read_bytes()).serial_number
    with running(Cluster(tmp_path)) as c:
        relay, port = _relay(c, "--certfile", str(cert), "--keyfile", str(key))
        assert _served_serial(port, ca.path) == first
        # renew in place (as certbot does), then SIGHUP
        (tmp_path / "renew").mkdir()
        new_cert, new_key = issue(ca, tmp_path / "renew")
        cert.write_bytes(new_cert.read_bytes())
        key.write_bytes(new_key.read_bytes())
        second = x509.load_pem_x509_certificate(cert.read_bytes()).serial_number
        assert second != first
        relay.signal(signal.SIGHUP)
        relay.wait_for(lambda: any(r.get("event") == "tls_reloaded"
                                   for r in relay.log_records()), 15, "tls_reloaded")
        assert _served_serial(port, ca.path) == second
        # a broken file on the next SIGHUP: logged, the current certificate stays
        key.write_text("not a key\n")
        relay.signal(signal.SIGHUP)
        relay.wait_for(lambda: any(r.get("event") == "tls_reload_failed"
                                   for r in relay.log_records()), 15, "tls_reload_failed")
        failed = next(r for r in relay.log_records() if r.get("event") == "tls_reload_failed")
        assert "--keyfile" in failed["error"]
        assert _served_serial(port, ca.path) == second
        assert relay.popen.poll() is None


def test_scheme_and_trust_mismatches_get_clear_messages(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    other = make_ca(tmp_path, "other")
    cert, key = issue(ca, tmp_path)
    with running(Cluster(tmp_path)) as c:
        _plain, plain_port = _relay(c, name="plain")
        _tls, tls_port = _relay(c, "--certfile", str(cert), "--keyfile", str(key), name="tls")

        why = _reason(f"wss://127.0.0.1:{plain_port}", str(ca.path))
        assert "speak TLS" in why and f"use ws://127.0.0.1:{plain_port}" in why, why
        why = _reason(f"ws://127.0.0.1:{tls_port}")
        assert f"use wss://127.0.0.1:{tls_port}" in why, why
        why = _reason(f"wss://127.0.0.1:{tls_port}", str(other.path))
        assert "certificate" in why and "--cafile" in why, why
        # the system trust store does not know the throwaway CA either
        why = _reason(f"wss://127.0.0.1:{tls_port}")
        assert "certificate" in why and "--cafile" in why, why
        assert "ConnectionResetError" not in why

        # a headless node shows the same sentence in its connection events
        node = c.headless("alice", tmp_path / "alice", relay=f"wss://127.0.0.1:{plain_port}",
                          extra=["--cafile", str(ca.path)])
        node.wait_for(
            lambda: any("use ws://" in (e.get("reason") or "")
                        for e in node.select("connection", state="disconnected")),
            30, "a disconnected event naming ws://",
        )


def test_store_serves_queries_over_wss(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    cert, key = issue(ca, tmp_path)
    with running(Cluster(tmp_path)) as c:
        store, _ = c.store(None, tmp_path / "store", topics=(b"t" * 16,),
                           extra=["--certfile", str(cert), "--keyfile", str(key)])
        rec = store.wait_log("store_listening")
        assert rec["tls"] is True
        port = int(rec["port"])

        async def go() -> tuple[int, str]:
            async with StoreClient(f"wss://127.0.0.1:{port}", cafile=str(ca.path)) as ok:
                info = await ok.info()
            try:
                async with StoreClient(f"ws://127.0.0.1:{port}") as plain:
                    await plain.info()
            except StoreUnavailable as exc:
                return info.max_hashes, str(exc)
            return info.max_hashes, ""

        max_hashes, why = asyncio.run(go())
        assert max_hashes > 0
        assert f"use wss://127.0.0.1:{port}" in why, why
        store.signal(signal.SIGHUP)
        store.wait_for(lambda: any(r.get("event") == "tls_reloaded"
                                   for r in store.log_records()), 15, "store tls_reloaded")


@pytest.mark.parametrize(
    ("flags", "expect"),
    [
        (["--certfile", "{tmp}/missing.pem"], "--certfile {tmp}/missing.pem: no such file"),
        (["--keyfile", "{tmp}/k.pem"], "--keyfile needs --certfile"),
    ],
)
def test_relay_bad_tls_files_are_reported(tmp_path: Path, flags: list[str], expect: str) -> None:
    flags = [f.format(tmp=tmp_path) for f in flags]
    out = subprocess.run(
        sdschat("relay", "--port", "0", *flags), cwd=ROOT, capture_output=True, timeout=T(60),
    )
    assert out.returncode in (1, 2)
    assert expect.format(tmp=tmp_path) in out.stderr.decode(), out.stderr.decode()


def test_join_rejects_a_missing_cafile(tmp_path: Path) -> None:
    out = subprocess.run(
        sdschat("join", "room", "--headless", "--relay", "wss://127.0.0.1:9", "--cafile",
                str(tmp_path / "nope.pem"), "--data-dir", str(tmp_path / "d")),
        cwd=ROOT, capture_output=True, timeout=T(60), stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2
    assert "--cafile" in out.stderr.decode() and "no such file" in out.stderr.decode()


def test_relay_with_tls_in_process(tmp_path: Path) -> None:
    """RelayServer(certfile=...) serves wss:// and reports it in its url."""
    from net.relay import RelayServer
    from net.relay_config import RelayConfig

    ca = make_ca(tmp_path)
    cert, key = issue(ca, tmp_path)

    async def go() -> tuple[str, bool]:
        async with RelayServer(RelayConfig(port=0, certfile=str(cert), keyfile=str(key))) as srv:
            client = RelayClient(srv.url, [b"t" * 16], lambda _e: None, cafile=str(ca.path))
            client.start()
            ok = await client.wait_connected(T(10))
            await client.close()
            return srv.url, ok

    url, ok = asyncio.run(go())
    assert url.startswith("wss://127.0.0.1:") and ok


def test_node_catches_up_from_a_wss_store_through_a_wss_relay(tmp_path: Path) -> None:
    """Everything over TLS: the store subscribes through the wss:// relay (its --cafile),
    alice posts while bob is away and leaves, bob then catches up from the wss:// store."""
    ca = make_ca(tmp_path)
    cert, key = issue(ca, tmp_path)
    tls = ["--certfile", str(cert), "--keyfile", str(key)]
    cafile = ["--cafile", str(ca.path)]
    with running(Cluster(tmp_path)) as c:
        _proc, port = _relay(c, *tls)
        relay_url = f"wss://127.0.0.1:{port}"
        store, _ = c.store(relay_url, tmp_path / "store", channels=("room",),
                           extra=[*tls, *cafile])
        store_url = f"wss://127.0.0.1:{int(store.wait_log('store_listening')['port'])}"
        store.wait_for(lambda: any(r.get("event") == "relay_state"
                                   and r.get("state") == "connected"
                                   for r in store.log_records()), 30, "store on the relay")
        alice = c.headless("alice", tmp_path / "alice", relay=relay_url, extra=cafile)
        alice.wait_for(lambda: bool(alice.select("connection", state="connected")), 30,
                       "alice connected")
        alice.send("one", "two", "three")
        alice.wait_for(lambda: len(alice.select("own", state="sent")) >= 3, 30, "sent")
        # the store has them once its by-time query returns them (wss:// with the CA)
        async def archived() -> int:
            async with StoreClient(store_url, cafile=str(ca.path)) as client:
                topic = bytes.fromhex(alice.select("channel")[0]["topic"])
                n = 0
                async for page in client.pages(topic):
                    n += len(page.items)
                return n

        for _ in range(int(T(100))):  # bounded: ~T(20) s
            if asyncio.run(archived()) >= 3:
                break
            time.sleep(0.2)
        assert asyncio.run(archived()) >= 3
        alice.close_stdin()
        assert alice.wait(30) == 0
        bob = c.headless("bob", tmp_path / "bob", relay=relay_url,
                         extra=[*cafile, "--store", store_url])
        bob.wait_for(lambda: any(e.get("state") == "done" for e in bob.select("catchup")), 60,
                     "catch-up done over wss://")
        bob.wait_for(lambda: {"one", "two", "three"} <= {e["text"] for e in
                                                          bob.select("delivered")},
                     30, "the three lines from the store")
