"""``sdschat store`` as a real process beside a real relay (and real headless nodes).

Everything on 127.0.0.1; every process is killed by PID in the cluster's close.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path

from store_helpers import ROOT, T, channel, cluster, run, sdschat, sealed, wait_until

from net.identity import Identity
from net.relay_client import RelayClient
from net.store_client import StoreClient, StoreUnavailable
from storage import DB_FILENAME, Store


async def _publish_all(url: str, envelopes: list[bytes], per_second: float) -> None:
    client = RelayClient(url, [], lambda _e: None, backoff_max=1.0)
    client.start()
    try:
        assert await client.wait_connected(T(10))
        gap = 1.0 / per_second
        for env in envelopes:
            for _ in range(100):  # bounded: the relay may be briefly unreachable
                if await client.publish(env):
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(gap)
    finally:
        await client.close()


async def _count(url: str, topic: bytes) -> int:
    async with StoreClient(url, connect_timeout=T(2), request_timeout=T(10)) as client:
        n = 0
        async for page in client.pages(topic, page_size=1000):
            n += len(page.items)
        return n


def _count_or_zero(url: str, topic: bytes) -> int:
    try:
        return run(_count(url, topic), 20)
    except StoreUnavailable:
        return 0


def test_store_process_archives_relay_traffic_and_survives_kill9(tmp_path: Path) -> None:
    key = channel("room", "secret")
    ident = Identity.generate()
    items = [sealed(ident, key, f"line {i}", i) for i in range(1200)]
    data = tmp_path / "store-data"
    with cluster(tmp_path) as c:
        _relay, relay_url = c.relay()
        store, store_url = c.store(relay_url, data, topics=(key.topic,))
        store.wait_log("relay_state")  # subscribing
        wait_until(
            lambda: any(
                r.get("state") == "connected" for r in store.log_records()
                if r.get("event") == "relay_state"
            ),
            15,
            "the store's relay subscription",
        )

        async def first_half() -> None:
            await _publish_all(relay_url, [e for e, _ in items[:600]], 2000)

        run(first_half(), 60)
        wait_until(lambda: _count_or_zero(store_url, key.topic) == 600, 20, "600 archived")

        async def found_hashes() -> set[bytes]:
            async with StoreClient(store_url) as client:
                return set(await client.by_hash([h for _, h in items]))

        before_kill = run(found_hashes())
        assert before_kill == {h for _, h in items[:600]}

        # kill -9 while the second half streams in
        async def second_half_with_kill() -> None:
            async def kill_soon() -> None:
                await asyncio.sleep(0.25)
                store.kill9()

            await asyncio.gather(
                _publish_all(relay_url, [e for e, _ in items[600:]], 1000), kill_soon()
            )

        run(second_half_with_kill(), 60)
        assert store.popen.returncode == -signal.SIGKILL

        # the archive is intact: SQLite's own check passes, nothing acknowledged is gone
        async def inspect() -> tuple[int, set[bytes]]:
            async with await Store.open(data, integrity_check=True) as s:
                count, _ = await s.archive.stats()
                got = await s.archive.get_by_hashes([h for _, h in items])
                return count, set(got)

        count, present = run(inspect())
        assert before_kill <= present
        assert count == len(present) >= 600

        # restart on the same directory; it keeps serving the old and archiving the new
        store2, store_url2 = c.store(relay_url, data, topics=(key.topic,), name="store2")
        wait_until(
            lambda: any(
                r.get("state") == "connected" for r in store2.log_records()
                if r.get("event") == "relay_state"
            ),
            15,
            "the restarted store's subscription",
        )
        late = [sealed(ident, key, f"late {i}", 5000 + i) for i in range(50)]
        run(_publish_all(relay_url, [e for e, _ in late], 500), 30)
        wait_until(
            lambda: _count_or_zero(store_url2, key.topic) == count + 50, 20, "late ones archived"
        )

        async def all_present() -> int:
            async with StoreClient(store_url2) as client:
                return len(await client.by_hash([h for _, h in items + late]))

        assert run(all_present()) == count + 50
        store2.signal(signal.SIGTERM)
        assert store2.wait(15) == 0
        final = [r for r in store2.log_records() if r.get("event") == "store_stats"]
        assert final and final[-1]["final"] is True and final[-1]["archived"] == 50


ALICE, BOB = "alice-canary-q7x", "bob-canary-k2w"


def test_store_database_holds_no_plaintext(tmp_path: Path) -> None:
    """Two real nodes chat in a public channel the store archives by name; grep its bytes."""
    name = "probe-channel-7f3a"
    texts = [f"plaintext-canary-{i:03d}-zebra" for i in range(20)]
    data = tmp_path / "store-data"
    with cluster(tmp_path) as c:
        _relay, relay_url = c.relay()
        store, store_url = c.store(relay_url, data, channels=(name,))
        # Long, unlikely names: a 3-byte "bob" turns up in ~1 MB of ciphertext by chance.
        alice = c.node(ALICE, tmp_path / "alice", channel=name, relay=relay_url)
        bob = c.node(BOB, tmp_path / "bob", channel=name, relay=relay_url)
        for p in (alice, bob):
            p.wait_for(
                lambda p=p: bool(p.select("connection", state="connected"))
                and bool(p.select("channel")),
                30,
                "connected and joined",
            )
        topic = bytes.fromhex(alice.select("channel")[0]["topic"])
        alice.send(*texts[:10])
        bob.send(*texts[10:])
        for p, others in ((alice, texts[10:]), (bob, texts[:10])):
            p.wait_for(
                lambda p=p, o=others: {e.get("text") for e in p.select("delivered")} >= set(o),
                60,
                "the other's lines",
            )
        wait_until(lambda: _count_or_zero(store_url, topic) >= 20, 30, "20 envelopes archived")
        alice.close_stdin()
        bob.close_stdin()
        assert alice.wait(30) == 0 and bob.wait(30) == 0
        store.signal(signal.SIGTERM)
        assert store.wait(15) == 0

    blob = b"".join(
        f.read_bytes() for f in sorted(data.iterdir()) if f.name.startswith(DB_FILENAME)
    )
    assert len(blob) > 20 * 1000  # it did archive the envelopes
    for text in [*texts, name, ALICE, BOB]:
        assert text.encode() not in blob, f"{text!r} found in the store's database"
    # control: the same grep finds the texts in a participant's own database
    node_blob = b"".join(
        f.read_bytes()
        for f in sorted((tmp_path / "alice").iterdir())
        if f.name.startswith(DB_FILENAME)
    )
    assert all(t.encode() in node_blob for t in texts)


def test_store_cli_usage_and_locked_data_dir(tmp_path: Path) -> None:
    def sdschat_store(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(sdschat("store", *args), cwd=ROOT, capture_output=True,
                              timeout=T(30))

    no_topic = sdschat_store("--data-dir", str(tmp_path / "a"), "--relay", "ws://127.0.0.1:9")
    assert no_topic.returncode == 2 and b"--topic" in no_topic.stderr
    bad_topic = sdschat_store("--data-dir", str(tmp_path / "a"), "--relay", "ws://x:1",
                              "--topic", "nothex")
    assert bad_topic.returncode == 2
    bad_age = sdschat_store("--data-dir", str(tmp_path / "a"), "--relay", "ws://x:1",
                            "--topic", "00" * 16, "--max-age", "soon")
    assert bad_age.returncode == 2 and b"duration" in bad_age.stderr
    with cluster(tmp_path) as c:
        first, _url = c.store("ws://127.0.0.1:9", tmp_path / "d", topics=(b"\x01" * 16,))
        second = sdschat_store("--data-dir", str(tmp_path / "d"), "--relay", "ws://127.0.0.1:9",
                               "--topic", "01" * 16, "--listen", "127.0.0.1:0")
        assert second.returncode == 3
        records = [json.loads(x) for x in second.stderr.decode().splitlines() if x.startswith("{")]
        assert any(r["event"] == "store_start_failed" for r in records)
        first.signal(signal.SIGINT)
        t0 = time.monotonic()
        assert first.wait(15) == 0
        assert time.monotonic() - t0 < T(10)
