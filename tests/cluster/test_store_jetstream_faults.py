"""Faults of a JetStream-backed store with real processes (issue 42 §2): a real 3-server
JetStream cluster on loopback (nats-server from Debian), store peers as ``sdschat
store`` processes, a relay, envelopes published through it.

* kill -9 of the store peer a node catches up from, and of one nats-server, in the
  middle of a 10,000-envelope catch-up: the node gets every envelope from the other
  store peer, none twice; a store peer started afterwards on an empty data directory
  answers all of them;
* a nats-server killed and restarted while envelopes are archived: nothing
  JetStream acknowledged is lost, and every replica holds the same;
* one server partitioned (its network namespace's link down): the other two go on,
  its side acknowledges nothing, and after healing every replica holds the same;
* a node given two store URLs whose first store is dead catches up from the second.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from nats_servers import NatsServer, NatsServers, restart, start_nats
from partition_netns import Namespace, available
from store_js_helpers import CapturedLog, channel, js_archive, wait_for

from net.identity import Identity
from net.relay_client import RelayClient
from net.store_client import StoreClient
from net.store_engine import ArchiveUnavailable
from net.store_sync import StoreSync
from storage import ArchivedEnvelope
from tests.cluster.js_writer import write_envelopes
from tests.procs import Cluster, Proc, T, history, running, sdschat
from tests.store.store_helpers import sealed

KEY = channel("js-faults")


def _store(c: Cluster, name: str, data: Path, jetstream: list[str], *, relay: str | None = None,
           extra: tuple[str, ...] = ()) -> tuple[Proc, str]:  # fmt: skip
    argv = sdschat("store", "--data-dir", str(data), "--topic", KEY.topic.hex(), "--listen",
                   "127.0.0.1:0", "--stats-interval", "0", "--max-age", "0", "--max-bytes", "0",
                   "--max-clients-per-ip", "0", *extra)  # fmt: skip
    if relay is not None:
        argv += ["--relay", relay]
    for url in jetstream:
        argv += ["--jetstream", url]
    p = c.start(argv, name, stdin=False)
    rec = p.wait_log("store_listening", 60)
    return p, f"ws://127.0.0.1:{int(rec['port'])}"


async def _publish(url: str, envelopes: list[bytes]) -> None:
    client = RelayClient(url, [], lambda _e: None, backoff_max=1.0)
    client.start()
    try:
        assert await client.wait_connected(T(20))
        for i, env in enumerate(envelopes):
            for _ in range(200):  # bounded: the relay's rate limit may refuse a moment
                if await client.publish(env):
                    break
                await asyncio.sleep(0.02)
            if i % 500 == 499:
                await asyncio.sleep(0.1)  # about 3,000/s: within the relay's rate
    finally:
        await client.close()


async def _count(url: str) -> int:
    try:
        async with StoreClient(url, connect_timeout=T(5), request_timeout=T(30)) as client:
            page = await client.by_time(KEY.topic, page_size=1, want_total=True)
            return page.total
    except Exception:
        return -1


def test_a_catch_up_survives_kill9_of_its_store_peer_and_of_a_nats_server(tmp_path: Path) -> None:
    n = 10_000
    ident = Identity.generate()
    items = [sealed(ident, KEY, f"line {i}", i) for i in range(n)]
    published = {h for _, h in items}
    with start_nats(tmp_path / "nats", 3, jetstream=True, timeout=T(60)) as js, \
            running(Cluster(tmp_path)) as c:  # fmt: skip
        urls = js.urls
        _relay, relay_url = c.relay()
        a, url_a = _store(c, "store-a", tmp_path / "a", urls, relay=relay_url)
        b, url_b = _store(c, "store-b", tmp_path / "b", [urls[1], urls[2], urls[0]],
                          relay=relay_url)  # fmt: skip
        for p in (a, b):
            p.wait_for(lambda p=p: any(r.get("state") == "connected" for r in p.log_records()
                                       if r.get("event") == "relay_state"), 30, "subscribed")
        asyncio.run(asyncio.wait_for(_publish(relay_url, [e for e, _ in items]), T(300)))

        async def archived() -> bool:
            return await _count(url_b) == n

        asyncio.run(asyncio.wait_for(wait_for(archived, 300, "10,000 archived"), T(310)))
        a_connected = a.wait_log("jetstream_connected")["server"]
        b_server = next(s for s in js.servers if f":{s.port}" in
                        b.wait_log("jetstream_connected")["server"])  # fmt: skip
        assert b_server.port != int(str(a_connected).rsplit(":", 1)[1])

        delivered: list[bytes] = []
        killed: list[float] = []

        async def deliver(env: bytes) -> None:
            delivered.append(hashlib.sha256(env).digest())
            if len(delivered) == 3_000 and not killed:
                a.kill9()  # the store peer the node is catching up from
                b_server.kill9()  # and the nats-server the other store peer is connected to
                killed.append(time.monotonic())

        async def newcomer() -> StoreSync:
            sync = StoreSync([url_a, url_b], deliver=deliver, page_size=500,
                             catchup_attempts=20, backoff_base=0.2, backoff_max=2.0)
            try:
                assert await sync.catch_up("room", KEY.topic) == n
            finally:
                await sync.close()
            return sync

        sync = asyncio.run(asyncio.wait_for(newcomer(), T(600)))
        assert killed, "the kills happened during the catch-up"
        assert len(delivered) == n, f"{len(delivered)} delivered"  # none twice...
        assert set(delivered) == published  # ...and none lost
        assert sync.counters["failovers"] >= 1 and sync.counters["catchup_resumed"] >= 1
        assert sync.url == url_b

        # a store peer started afterwards, on an empty data directory, answers them all
        live = [u for s, u in zip(js.servers, urls, strict=True) if s is not b_server]
        _c, url_c = _store(c, "store-c", tmp_path / "c-empty", live)

        async def from_c() -> tuple[int, int]:
            async with StoreClient(url_c, request_timeout=T(60)) as client:
                got = 0
                async for page in client.pages(KEY.topic, page_size=1000):
                    got += len(page.items)
                found = await client.by_hash([h for _, h in items[::97]])
                return got, len(found)

        got, found = asyncio.run(asyncio.wait_for(from_c(), T(300)))
        assert got == n and found == len(items[::97])


async def _replica(url: str, stream: str) -> dict[int, str]:
    """``{sequence: envelope hash}`` as the server at ``url`` holds the stream (direct
    gets through a connection to it are answered by its own replica)."""
    nc = await nats.connect(url, connect_timeout=T(5), max_reconnect_attempts=0,
                            dont_randomize=True)  # fmt: skip
    try:
        js = nc.jetstream(timeout=T(10))
        info = await js.stream_info(stream)
        out = {}
        for seq in range(int(info.state.first_seq), int(info.state.last_seq) + 1):
            try:
                m = await js.get_msg(stream, seq=seq, direct=True)
            except nats.js.errors.NotFoundError:
                continue
            out[seq] = (m.headers or {}).get("Nats-Msg-Id", "")
        return out
    finally:
        await nc.close()


async def _current(url: str, stream: str, replicas: int) -> bool:
    try:
        nc = await nats.connect(url, connect_timeout=T(5), max_reconnect_attempts=0)
    except Exception:
        return False
    try:
        info = await nc.jetstream(timeout=T(5)).stream_info(stream)
        peers = (info.cluster.replicas or []) if info.cluster else []
        return (info.cluster is not None and info.cluster.leader is not None
                and len(peers) == replicas - 1 and all(p.current for p in peers))  # fmt: skip
    except Exception:
        return False
    finally:
        await nc.close()


def _server_named(servers: NatsServers, name: str | None) -> NatsServer:
    return next(s for s in servers.servers if s.name == name)


def test_a_restarted_nats_server_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """Batches archived while the stream's leader is killed (-9) and started again: every
    envelope of a batch JetStream acknowledged is there afterwards, on every replica;
    a batch refused meanwhile is archived when tried again (as the store peer does)."""
    ident = Identity.generate()
    envelopes = [sealed(ident, KEY, f"r {i}", i) for i in range(3000)]
    with start_nats(tmp_path / "nats", 3, jetstream=True, timeout=T(60)) as js:

        async def main() -> set[bytes]:
            archive = js_archive(js.urls, (KEY.topic,), CapturedLog(), stream="RESTART",
                                 retention=False, request_timeout=T(4))  # fmt: skip
            await archive.open()
            acked: set[bytes] = set()
            refused = 0
            leader: NatsServer | None = None
            try:
                for start in range(0, len(envelopes), 100):
                    batch = [ArchivedEnvelope(h, KEY.topic, 1_700_000_000_000 + start + i, e)
                             for i, (e, h) in enumerate(envelopes[start:start + 100])]
                    for _ in range(100):  # bounded: tried again while there is no leader
                        try:
                            await archive.put(batch)
                            acked |= {b.hash for b in batch}
                            break
                        except ArchiveUnavailable:
                            refused += 1
                            await asyncio.sleep(0.2)
                    if start == 1000:
                        info = await archive.js.stream_info("RESTART")
                        leader = _server_named(js, info.cluster.leader if info.cluster else None)
                        await asyncio.to_thread(leader.kill9)
                    if start == 2000 and leader is not None:
                        await asyncio.to_thread(restart, leader, js)
            finally:
                await archive.close()
            assert leader is not None
            for url in js.urls:
                await wait_for(lambda url=url: _current(url, "RESTART", 3), 120,
                               "every replica current")
            replicas = await _converged(js.urls, "RESTART", len(acked))
            held = {bytes.fromhex(v) for v in replicas[0].values()}
            assert len(replicas[0]) == len(held)  # each once
            return acked - held

        missing = asyncio.run(asyncio.wait_for(main(), T(600)))
        assert missing == set()


@pytest.mark.skipif(not available(), reason="needs root and ip for a network namespace")
def test_a_partitioned_server_acknowledges_nothing_and_heals_without_divergence(
    tmp_path: Path,
) -> None:
    """Servers 0 and 1 here, server 2 in a network namespace of the test's own. A writer
    here (as a store peer, connected before) and a writer process in the namespace
    (connected to server 2 only). The namespace's link goes down: the writer here goes
    on (two of three replicas), the one there has nothing acknowledged. The link comes
    back: server 2 catches up, its writer's envelopes are then taken, and every replica
    holds the same messages at the same sequences, each envelope once."""
    ident = Identity.generate()
    first = [sealed(ident, KEY, f"p1 {i}", i)[0] for i in range(200)]
    majority = [sealed(ident, KEY, f"p2 {i}", 1000 + i)[0] for i in range(200)]
    minority = [sealed(ident, KEY, f"p3 {i}", 2000 + i)[0] for i in range(30)]
    write_envelopes(tmp_path / "minority.bin", minority)
    with Namespace() as ns:
        placement = [("127.0.0.1", ns.outer, None), ("127.0.0.1", ns.outer, None),
                     (ns.inner, ns.inner, ns.name)]  # fmt: skip
        with start_nats(tmp_path / "nats", 3, jetstream=True, timeout=T(60),
                        placement=placement) as js, running(Cluster(tmp_path)) as c:  # fmt: skip
            root_urls = js.urls[:2]

            async def put(archive: Any, envs: list[bytes], base: int) -> None:
                batch = [ArchivedEnvelope(hashlib.sha256(e).digest(), KEY.topic, base + i, e)
                         for i, e in enumerate(envs)]  # fmt: skip
                for _ in range(300):  # bounded: a new leader may take a few seconds
                    try:
                        await archive.put(batch)
                        return
                    except ArchiveUnavailable:
                        await asyncio.sleep(0.2)
                raise AssertionError("the majority never took the writes")

            def wait_writer(what: str, cond: Any) -> None:
                writer.wait_for(cond, 120, what)

            async def main() -> list[dict[int, str]]:
                archive = js_archive(root_urls, (KEY.topic,), CapturedLog(), stream="PART",
                                     retention=False, replicas=3)  # fmt: skip
                await archive.open()
                try:
                    await put(archive, first, 1_700_000_000_000)
                    await wait_for(lambda: _current(root_urls[0], "PART", 3), 60, "current")
                    await asyncio.to_thread(wait_writer, "the writer in the namespace is ready",
                                            lambda: any(e.get("ready") for e in writer.events))
                    ns.cut()
                    await put(archive, majority, 1_700_000_100_000)  # two of three: taken
                    writer.send(str(tmp_path / "minority.bin"))
                    await asyncio.to_thread(wait_writer, "the cut-off writer tried",
                                            lambda: any(e.get("done") for e in writer.events))
                    cut_results = [e for e in writer.events if "batch" in e]
                    assert cut_results and all("error" in e for e in cut_results), cut_results
                    ns.heal()

                    async def healed() -> bool:
                        return all([await _current(u, "PART", 3) for u in js.urls])

                    await wait_for(healed, 180, "the cut-off server caught up")
                    writer.send(f"{tmp_path / 'minority.bin'} 60")  # its side takes writes
                    await asyncio.to_thread(wait_writer, "the writer tried again", lambda: sum(
                        1 for e in writer.events if e.get("done")) == 2)
                    after = [e for e in writer.events if "batch" in e][len(cut_results):]
                    assert after and all("acked" in e for e in after), after
                    return await _converged(js.urls, "PART", 430)
                finally:
                    await archive.close()

            writer = c.start(ns.exec([sys.executable, "-m", "tests.cluster.js_writer", "--url",
                                      js.urls[2], "--stream", "PART", "--topic",
                                      KEY.topic.hex(), "--timeout", "3"]), "ns-writer")  # fmt: skip
            held = asyncio.run(asyncio.wait_for(main(), T(600)))
            writer.close_stdin()
            want = {hashlib.sha256(e).hexdigest() for e in first + majority + minority}
            assert sorted(held[0].values()) == sorted(want)  # each once, none lost


async def _converged(urls: list[str], stream: str, count: int) -> list[dict[int, str]]:
    """Every replica's messages once they agree (bounded); never two different messages at
    one sequence on two replicas (that would be divergence, not lag)."""
    deadline = time.monotonic() + T(120)
    while True:  # bounded by the deadline
        held = [await _replica(u, stream) for u in urls]
        for seq in set().union(*held):
            ids = {h[seq] for h in held if seq in h}
            assert len(ids) == 1, f"sequence {seq} differs between replicas: {ids}"
        if all(len(h) == count for h in held) and held[0] == held[1] == held[2]:
            return held
        if time.monotonic() > deadline:
            raise AssertionError(f"replicas never agreed: {[len(h) for h in held]} messages")
        await asyncio.sleep(0.5)


def test_a_node_with_two_store_urls_catches_up_from_the_second(tmp_path: Path) -> None:
    """``sdschat join --store A --store B``: A (one store peer of the archive) is dead when
    the node starts; it catches up from B, every line once."""
    room = "js-two-stores-room"
    with start_nats(tmp_path / "nats", 3, jetstream=True, timeout=T(60)) as js, \
            running(Cluster(tmp_path)) as c:  # fmt: skip
        _relay, relay_url = c.relay()
        stores = []
        for name in ("store-a", "store-b"):
            argv = sdschat("store", "--data-dir", str(tmp_path / name), "--channel", room,
                           "--listen", "127.0.0.1:0", "--stats-interval", "0", "--relay",
                           relay_url)  # fmt: skip
            for url in js.urls:
                argv += ["--jetstream", url]
            p = c.start(argv, name, stdin=False)
            rec = p.wait_log("store_listening", 60)
            stores.append((p, f"ws://127.0.0.1:{int(rec['port'])}"))
        for p, _ in stores:
            p.wait_for(lambda p=p: any(r.get("state") == "connected" for r in p.log_records()
                                       if r.get("event") == "relay_state"), 30, "subscribed")
        alice = c.headless("alice", tmp_path / "alice", channel=room, relay=relay_url)
        alice.wait_for(lambda: bool(alice.select("connection", state="connected"))
                       and bool(alice.select("channel")), 30, "up")  # fmt: skip
        topic = bytes.fromhex(alice.select("channel")[0]["topic"])
        lines = [f"hello {i}" for i in range(40)]
        alice.send(*lines)

        async def archived() -> bool:
            return await _count_topic(stores[1][1], topic) >= 40

        asyncio.run(asyncio.wait_for(wait_for(archived, 120, "alice's lines archived"), T(130)))
        alice.close_stdin()
        assert alice.wait(30) == 0
        stores[0][0].kill9()
        bob = c.headless("bob", tmp_path / "bob", channel=room, relay=relay_url,
                         extra=["--store", stores[0][1], "--store", stores[1][1]])
        bob.wait_for(lambda: {e.get("text") for e in bob.select("delivered")} >= set(lines), 90,
                     "every line from the second store")  # fmt: skip
        texts = [e.get("text") for e in bob.select("delivered")]
        assert sorted(t for t in texts if t in set(lines)) == sorted(lines)  # each once
        bob.close_stdin()
        assert bob.wait(30) == 0
        assert len([h for h in history(tmp_path / "bob", room) if h["content"] in lines]) == 40


async def _count_topic(url: str, topic: bytes) -> int:
    try:
        async with StoreClient(url, connect_timeout=T(5), request_timeout=T(30)) as client:
            page = await client.by_time(topic, page_size=1, want_total=True)
            return page.total
    except Exception:
        return -1
