"""Store peers backed by a JetStream archive (issue 42 §1), in-process, on real
nats-servers with JetStream on 127.0.0.1: stored once however many peers archive
it, the same answers from every peer (one started afterwards on an empty data
directory too), cursors that continue at another peer, the same answers as the
SQLite engine, and only ciphertext on NATS."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import nats
from nats_servers import NatsServers
from store_js_helpers import CapturedLog, channel, js_peer

from net.identity import Identity
from net.store_client import StoreClient
from net.store_config import StorePeerConfig
from net.store_jetstream import SUBJECT_PREFIX, subject_for, writer_id
from net.store_peer import StorePeer
from tests.procs import T
from tests.store.store_helpers import sealed

KEY = channel("js-room")


def _stream() -> str:
    return f"T{secrets.token_hex(6)}"


def run(coro: object, base: float = 120.0) -> object:
    async def bounded() -> object:
        return await asyncio.wait_for(coro, T(base))  # type: ignore[arg-type]

    return asyncio.run(bounded())


async def _all_pages(url: str, topic: bytes, page_size: int = 300) -> list[tuple[bytes, int]]:
    async with StoreClient(url, request_timeout=T(30)) as client:
        out = []
        async for page in client.pages(topic, page_size=page_size):
            out += [(i.hash, i.arrival_ms) for i in page.items]
        return out


def test_peers_of_one_archive_store_each_envelope_once_and_answer_alike(
    tmp_path: Path, js3: NatsServers
) -> None:
    """Two store peers archive the same relay traffic (and each some of its own): each
    envelope is in the stream once; both, and a third started afterwards on an empty
    data directory, give the same pages, the same by-hash answers and the same id."""
    ident = Identity.generate()
    shared = [sealed(ident, KEY, f"both {i}", i) for i in range(400)]
    only_a = [sealed(ident, KEY, f"a {i}", 1000 + i) for i in range(50)]
    only_b = [sealed(ident, KEY, f"b {i}", 2000 + i) for i in range(50)]
    stream = _stream()

    async def main() -> None:
        log = CapturedLog()
        a = js_peer(tmp_path / "a", js3.urls, (KEY.topic,), log, stream=stream)
        b = js_peer(tmp_path / "b", js3.urls[::-1], (KEY.topic,), log, stream=stream)
        async with a, b:
            for (env, _), (env_a, _), (env_b, _) in zip(shared, only_a * 8, only_b * 8,
                                                        strict=False):  # fmt: skip
                await asyncio.gather(a.ingest(env), b.ingest(env))
                await a.ingest(env_a)
                await b.ingest(env_b)
            await asyncio.gather(a.flush(), b.flush())
            unique = {h for _, h in shared + only_a + only_b}
            assert a.stats.archived + b.stats.archived == len(unique)
            assert (await a.archive.stats())[0] == len(unique)  # messages in the stream
            assert a.archive.replicas == 3  # a 3-server cluster: 3 copies by default
            pages_a = await _all_pages(a.url, KEY.topic)
            pages_b = await _all_pages(b.url, KEY.topic)
            assert pages_a == pages_b and {h for h, _ in pages_a} == unique
            assert len(pages_a) == len(unique)  # none twice
            c = js_peer(tmp_path / "c-empty", js3.urls[1:], (KEY.topic,), log, stream=stream)
            async with c:
                assert await _all_pages(c.url, KEY.topic, 1000) == pages_a
                async with StoreClient(c.url) as client:
                    found = await client.by_hash(sorted(unique))
                    info = await client.info()
                assert set(found) == unique
                assert info.engine == "jetstream"
                assert info.archive_id == a.archive.archive_id == b.archive.archive_id
                assert len(info.archive_id) == 16

    run(main())


def test_a_cursor_from_one_peer_continues_at_another(tmp_path: Path, js3: NatsServers) -> None:
    """Page 1 from peer A, the rest from peer B with A's cursor: every envelope once."""
    ident = Identity.generate()
    items = [sealed(ident, KEY, f"line {i}", i) for i in range(700)]
    stream = _stream()

    async def main() -> None:
        log = CapturedLog()
        a = js_peer(tmp_path / "a", js3.urls, (KEY.topic,), log, stream=stream)
        b = js_peer(tmp_path / "b", js3.urls, (KEY.topic,), log, stream=stream)
        async with a, b:
            for env, _ in items:
                await a.ingest(env)
            await a.flush()
            async with StoreClient(a.url) as ca, StoreClient(b.url) as cb:
                first = await ca.by_time(KEY.topic, page_size=250, want_total=True)
                assert first.total == 700 and first.next is not None
                rest = await cb.by_time(KEY.topic, cursor=first.next, page_size=1000,
                                        want_total=True)  # fmt: skip
                assert rest.total == 450 and rest.next is None
                got = [i.hash for i in first.items + rest.items]
                assert got == [h for _, h in items]  # in order, none lost, none twice
                # a page from where B's consumer is: more arrive, the same cursor goes on
                last = (rest.items[-1].arrival_ms, rest.items[-1].hash)
                for env, _ in [sealed(ident, KEY, f"late {i}", 5000 + i) for i in range(5)]:
                    await b.ingest(env)
                await b.flush()
                late = await cb.by_time(KEY.topic, cursor=last)
                assert len(late.items) == 5

    run(main())


def test_the_jetstream_engine_answers_what_the_sqlite_engine_answers(
    tmp_path: Path, js1: NatsServers
) -> None:
    """The same envelopes at the same arrival times into a SQLite store and a JetStream
    store: every by-time query (since, until, cursor, pages, totals) answers the same."""
    ident = Identity.generate()
    items = [sealed(ident, KEY, f"m {i}", i) for i in range(300)]
    times = iter(range(1_700_000_000_000, 1_700_000_000_000 + 10**7, 1000))
    stream = _stream()

    async def main() -> None:
        clock_s = iter(list(range(1_700_000_000_000, 1_700_000_000_000 + 10**7, 1000)))
        clock_j = iter(list(range(1_700_000_000_000, 1_700_000_000_000 + 10**7, 1000)))
        sql = StorePeer(StorePeerConfig(tmp_path / "sql", topics=(KEY.topic,),
                                        listen=("127.0.0.1", 0), stats_interval_s=0,
                                        max_age_ms=0, max_bytes=0),
                        logger=CapturedLog(), clock=lambda: next(clock_s))  # fmt: skip
        jet = js_peer(tmp_path / "js", js1.urls, (KEY.topic,), CapturedLog(), stream=stream,
                      clock=lambda: next(clock_j))  # fmt: skip
        async with sql, jet:
            for env, _ in items:
                await sql.ingest(env)
                await jet.ingest(env)
            await sql.flush()
            await jet.flush()
            t0 = next(times)
            async with StoreClient(sql.url) as cs, StoreClient(jet.url) as cj:
                queries = [dict(), dict(since_ms=t0 + 50_000), dict(since_ms=t0 + 50_500),
                           dict(since_ms=t0 + 10**9), dict(since_ms=t0 + 20_000,
                                                           until_ms=t0 + 90_000),
                           dict(page_size=7), dict(since_ms=t0 + 299_000)]  # fmt: skip
                for q in queries:
                    ps = await cs.by_time(KEY.topic, want_total=True, **q)  # type: ignore[arg-type]
                    pj = await cj.by_time(KEY.topic, want_total=True, **q)  # type: ignore[arg-type]
                    assert [(i.hash, i.arrival_ms) for i in pj.items] == [
                        (i.hash, i.arrival_ms) for i in ps.items], q
                    assert (pj.total, pj.next) == (ps.total, ps.next), q
                    if ps.next is not None:
                        ns = await cs.by_time(KEY.topic, cursor=ps.next, **q)  # type: ignore[arg-type]
                        nj = await cj.by_time(KEY.topic, cursor=pj.next, **q)  # type: ignore[arg-type]
                        assert [i.hash for i in nj.items] == [i.hash for i in ns.items], q
                assert (await cj.info()).oldest_arrival_ms == (await cs.info()).oldest_arrival_ms

    run(main())


def test_nats_sees_only_ciphertext_and_hashes(tmp_path: Path, js1: NatsServers) -> None:
    """Someone who records everything NATS carries on the store's subjects (an
    operator, anyone with NATS credentials) gets the envelopes exactly as a relay
    carries them (ciphertext naming its topic, as a relay sees it), subjects that are
    hashes of the topic, the envelope hash, an arrival time and a writer hash: no text,
    no signer key, no channel name anywhere, no topic outside the envelopes."""
    public = channel("js-public-room", None)  # the store verifies its signers
    ident = Identity.generate()
    secret_words = [f"attack at dawn {i}" for i in range(20)]
    items = [sealed(ident, public, w, i) for i, w in enumerate(secret_words)]
    stream = _stream()

    async def main() -> None:
        nc = await nats.connect(js1.urls[0])
        captured: list[tuple[str, bytes, dict[str, str]]] = []

        async def record(msg: nats.aio.msg.Msg) -> None:
            captured.append((msg.subject, msg.data, dict(msg.headers or {})))

        await nc.subscribe(f"{SUBJECT_PREFIX}>", cb=record)
        await nc.flush()
        log = CapturedLog()
        peer = js_peer(tmp_path / "p", js1.urls, (public.topic,), log, stream=stream,
                       public_channel_keys=((public.topic, public.key),))  # fmt: skip
        async with peer:
            for env, _ in items:
                await peer.ingest(env)
            await peer.flush()
            for _ in range(200):  # bounded: until the subscription has all of them
                if len(captured) >= len(items):
                    break
                await asyncio.sleep(0.05)
        await nc.close()
        assert sorted(d for _, d, _ in captured) == sorted(e for e, _ in items)
        signer = b"k" + ident.public_key
        meta = b"".join(s.encode() + repr(h).encode() for s, _, h in captured)
        payloads = b"".join(d for _, d, _ in captured)
        for word in secret_words:
            assert word.encode() not in payloads and word.encode() not in meta
        # the envelope names its topic (relays route by it); nothing else does
        for leak in (public.topic, public.topic.hex().encode(), public.channel.encode(),
                     ident.public_key, ident.public_key.hex().encode()):
            assert leak not in meta
        assert ident.public_key not in payloads and public.channel.encode() not in payloads
        assert {s for s, _, _ in captured} == {subject_for(stream, public.topic)}
        writers = {h["Sdschat-Writer"] for _, _, h in captured}
        assert writers == {writer_id(signer)} and len(writer_id(signer)) == 32

    run(main())
