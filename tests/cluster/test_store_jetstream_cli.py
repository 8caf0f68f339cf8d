"""``sdschat store --jetstream`` as an operator runs it (issue 42 §1): credentials, TLS and
what may go without them exactly as ``relay --cluster``; refusals in one line with the
exit status; ``--migrate-to-jetstream`` moving a SQLite archive (arrival times and
writers kept, twice copies nothing twice). Real processes and nats-servers."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from nats_servers import NatsServers, free_port, start_nats
from store_js_helpers import CapturedLog, channel, js_archive, wait_for
from tls_certs import issue, make_ca

from storage import ArchivedEnvelope, Store
from tests.procs import ROOT, Cluster, T, running, sdschat

KEY = channel("js-cli")
PASSWORD = "st0re-Pa55"


def _store(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    argv = sdschat("store", "--stats-interval", "0", *args)
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=T(timeout),
                          check=False)  # fmt: skip


def _records(stderr: str) -> list[dict[str, object]]:
    out = []
    for line in stderr.splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--jetstream", "nats://10.9.8.7:4222"],
         "--jetstream nats://10.9.8.7:4222 has neither TLS nor credentials"),
        (["--replicas", "3"], "--replicas needs --jetstream"),
        (["--jetstream-cafile", "ca.pem"], "--jetstream-cafile needs --jetstream"),
        (["--jetstream", "nats://127.0.0.1:4222", "--replicas", "7"], "--replicas must be 1 to 5"),
        (["--jetstream", "http://127.0.0.1:4222"], "--jetstream must be a nats://HOST:PORT URL"),
        (["--jetstream", "nats://127.0.0.1:4222", "--jetstream-stream", "a.b"],
         "--jetstream-stream must be"),
        (["--migrate-to-jetstream"], "--migrate-to-jetstream needs --jetstream"),
    ],
)
def test_bad_jetstream_settings_are_a_usage_error(tmp_path: Path, flags: list[str],
                                                  message: str) -> None:  # fmt: skip
    out = _store("--data-dir", str(tmp_path / "d"), "--topic", KEY.topic.hex(), *flags)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr


def test_unreachable_jetstream_at_start_is_one_line_and_exit_1(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    out = _store("--data-dir", str(tmp_path / "d"), "--topic", KEY.topic.hex(), "--listen",
                 "127.0.0.1:0", "--jetstream", url, "--jetstream-timeout", "2")  # fmt: skip
    assert out.returncode == 1, out.stderr
    failed = [r for r in _records(out.stderr) if r.get("event") == "store_start_failed"]
    assert len(failed) == 1 and f"no NATS server of {url} answered" in str(failed[0]["error"])


@pytest.fixture(scope="module")
def secure_js(tmp_path_factory: pytest.TempPathFactory) -> tuple[NatsServers, Path, Path, Path]:
    """A JetStream server with TLS (clients verified) and a user with a password."""
    tmp = tmp_path_factory.mktemp("secure-js")
    ca = make_ca(tmp)
    cert, key = issue(ca, tmp, "nats")
    client_cert, client_key = issue(ca, tmp, "store-client", ("store",), client=True)
    extra = (f'tls {{ cert_file: "{cert}", key_file: "{key}", ca_file: "{ca.path}", '
             f"verify: true, timeout: 2 }}\n"
             f'authorization {{ user: store, password: "{PASSWORD}" }}\n')  # fmt: skip
    import ssl

    ctx = ssl.create_default_context(cafile=str(ca.path))
    ctx.load_cert_chain(str(client_cert), str(client_key))
    servers = start_nats(tmp, 1, jetstream=True, extra=extra, timeout=T(30),
                         client_options={"tls": ctx, "user": "store", "password": PASSWORD})
    try:
        yield servers, ca.path, client_cert, client_key  # type: ignore[misc]
    finally:
        servers.close()


def test_a_store_on_jetstream_over_tls_with_a_password_logs_no_secret(
    tmp_path: Path, secure_js: tuple[NatsServers, Path, Path, Path]
) -> None:
    servers, ca, cert, key = secure_js
    port = servers.servers[0].port
    tls = ["--jetstream-cafile", str(ca), "--jetstream-certfile", str(cert),
           "--jetstream-keyfile", str(key)]  # fmt: skip
    with running(Cluster(tmp_path)) as c:
        p = c.start(sdschat("store", "--data-dir", str(tmp_path / "d"), "--topic",
                            KEY.topic.hex(), "--listen", "127.0.0.1:0", "--stats-interval", "0",
                            "--jetstream", f"tls://store:{PASSWORD}@127.0.0.1:{port}", *tls),
                    "store", stdin=False)  # fmt: skip
        connected = p.wait_log("jetstream_connected", 30)
        p.wait_log("store_listening", 30)
        assert connected["tls"] is True
        assert connected["servers"] == [f"tls://store:***@127.0.0.1:{port}"]
        p.signal(15)
        assert p.wait(30) == 0
        assert PASSWORD not in p.stderr_path.read_text()
    wrong = _store("--data-dir", str(tmp_path / "d2"), "--topic", KEY.topic.hex(), "--listen",
                   "127.0.0.1:0", "--jetstream", f"tls://store:wrong@127.0.0.1:{port}", *tls)
    assert wrong.returncode == 1, wrong.stderr
    failed = [r for r in _records(wrong.stderr) if r.get("event") == "store_start_failed"]
    assert len(failed) == 1 and "refused the credentials" in str(failed[0]["error"])
    assert "--jetstream-token-file" in str(failed[0]["error"])
    assert "wrong" not in wrong.stderr.replace("refused", "")


def test_migrate_to_jetstream_keeps_arrival_times_and_writers_and_copies_once(
    tmp_path: Path, js1: NatsServers
) -> None:
    data = tmp_path / "sqlite-store"
    rows = []
    for n in range(1200):
        env = n.to_bytes(4, "big") + bytes(200)
        writer = [b"", b"kalice", b"hbob-host"][n % 3]
        rows.append(ArchivedEnvelope(hashlib.sha256(env).digest(), KEY.topic,
                                     1_700_000_000_000 + n * 7, env, writer))  # fmt: skip

    async def fill() -> None:
        async with await Store.open(data) as store:
            await store.archive.put_many(rows)

    asyncio.run(fill())
    args = ["--data-dir", str(data), "--topic", KEY.topic.hex(), "--jetstream", js1.urls[0],
            "--jetstream-stream", "MIGRATED", "--migrate-to-jetstream"]  # fmt: skip
    first = _store(*args, timeout=180)
    assert first.returncode == 0, first.stderr
    done = [r for r in _records(first.stderr) if r.get("event") == "migrate_done"]
    assert done == [{**done[0], "envelopes": 1200, "new": 1200, "already_there": 0}]
    again = _store(*args, timeout=180)
    assert again.returncode == 0, again.stderr
    done = [r for r in _records(again.stderr) if r.get("event") == "migrate_done"]
    assert done[0]["new"] == 0 and done[0]["already_there"] == 1200

    async def check() -> None:
        archive = js_archive(js1.urls, (KEY.topic,), CapturedLog(), stream="MIGRATED",
                             lease_s=3.0)  # fmt: skip
        await archive.open()
        try:
            got = await archive.range(KEY.topic, limit=2000, reader=object())
            assert [(r.hash, r.arrival_ms) for r in got] == [(r.hash, r.arrival_ms)
                                                               for r in rows]  # fmt: skip
            lease = archive.lease
            assert lease is not None

            async def known() -> bool:
                return lease.ready and len(lease.holdings or ()) == 1200

            await wait_for(known, 30, "the lease holder read the archive")
            sizes = sorted(lease.holdings.totals.values())  # type: ignore[union-attr]
            assert sizes == [400 * 204] * 3  # three writers (one of them nobody), kept apart
            attributed = [h.attributed for h in lease.holdings.totals]  # type: ignore[union-attr]
            assert sorted(attributed) == [False, True, True]
        finally:
            await archive.close()

    asyncio.run(asyncio.wait_for(check(), T(60)))
