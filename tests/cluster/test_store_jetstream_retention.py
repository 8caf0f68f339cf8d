"""Retention of a JetStream archive (issue 42 §1): the store's rule (storage/retention.py)
held on the stream by the one store peer holding the lease, on real nats-servers.

The JetStream engine deletes exactly what ``RetentionRule.evict`` says (the same
property the SQLite engine is held to in tests/store/test_store_retention_rule.py);
one peer at a time holds the lease and another takes it over when it goes; a flood
cannot push out the quiet members; the audit indexes what a dead archiving peer
left unindexed and deletes a second copy."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
from pathlib import Path

import nats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats_servers import NatsServers
from store_js_helpers import CapturedLog, channel, js_archive, js_peer, wait_for

from net import envelope_pb2
from net.envelope import ENVELOPE_VERSION, NONCE_BYTES
from net.identity import Identity
from net.store_client import StoreClient
from net.store_jetstream import ARRIVAL_HEADER, MSG_ID, WRITER_HEADER, subject_for
from storage import ArchivedEnvelope, RetentionRule
from storage.retention import Held, Holder
from tests.procs import T
from tests.store.store_helpers import sealed

T1, T2 = b"topic-one-16byte", b"topic-two-16byte"
PUBLIC = channel("js-lobby", None)


def _stream() -> str:
    return f"R{secrets.token_hex(6)}"


def run(coro: object, base: float = 120.0) -> object:
    async def bounded() -> object:
        return await asyncio.wait_for(coro, T(base))  # type: ignore[arg-type]

    return asyncio.run(bounded())


async def _drop(urls: list[str], stream: str) -> None:
    """Delete a test's stream and buckets (the module's server hosts many tests)."""
    nc = await nats.connect(urls[0])
    js = nc.jetstream()
    for name in (stream, f"KV_{stream}_INDEX", f"KV_{stream}_META", f"KV_{stream}_LEASE"):
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(name)
    await nc.close()


_writers = st.sampled_from([b"", b"hhost-a", b"hhost-b", b"ksigner"])
_items = st.lists(
    st.tuples(st.sampled_from([T1, T2]), _writers, st.integers(1, 400), st.integers(0, 50)),
    min_size=0, max_size=50,
)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(items=_items, max_bytes=st.integers(0, 8_000), age=st.sampled_from([0, 20]))
def test_the_jetstream_archive_deletes_exactly_what_the_rule_says(
    js1: NatsServers, items: list[tuple[bytes, bytes, int, int]], max_bytes: int, age: int
) -> None:
    """Random envelopes (topics, writers, sizes, arrival times with ties): after a run of
    the lease holder the stream holds exactly what ``rule.evict`` keeps."""
    rule = RetentionRule(max_bytes=max_bytes, max_age_ms=age)
    now = 50 if age else 0
    rows = []
    for n, (topic, writer, size, at) in enumerate(items):
        env = n.to_bytes(4, "big") + b"\x00" * size
        rows.append(ArchivedEnvelope(hashlib.sha256(env).digest(), topic, at, env, writer))
    stream = _stream()

    async def main() -> set[bytes]:
        archive = js_archive(js1.urls, (T1, T2), CapturedLog(), stream=stream, lease_s=3.0,
                             max_bytes=max_bytes)  # fmt: skip
        await archive.open()
        try:
            assert await archive.put(rows) == len(rows)
            lease = archive.lease
            assert lease is not None

            async def ready() -> bool:
                return lease.holding and lease.ready and len(lease.holdings or ()) == len(rows)

            await wait_for(ready, 30, "the lease holder knows every envelope")
            run_ = await archive.run_retention(rule, now)
            kept = await archive.by_hashes([r.hash for r in rows])
            assert (await archive.stats())[0] == len(kept)  # deleted from the stream
            assert run_.deleted == len(rows) - len(kept)
            return set(kept)
        finally:
            await archive.close()
            await _drop(js1.urls, stream)

    kept = run(main(), 60)
    held = [Held(Holder(r.topic, r.writer), len(r.envelope), r.arrival_ms, r.hash) for r in rows]
    gone = {h.key for h in rule.evict(held, now_ms=now)}
    assert kept == {r.hash for r in rows} - gone  # type: ignore[operator]


def test_one_peer_holds_the_lease_and_another_takes_it_over(
    tmp_path: Path, js3: NatsServers
) -> None:
    """Three store peers: one holds the lease; when it stops, another takes it within a
    lifetime and runs retention; the one left says nothing about it twice."""
    stream = _stream()

    async def main() -> None:
        log = CapturedLog()
        peers = [js_peer(tmp_path / f"p{i}", js3.urls, (T1,), log, stream=stream, lease_s=3.0)
                 for i in range(3)]  # fmt: skip
        for p in peers:
            await p.start()
        try:
            def holders() -> list[int]:
                return [i for i, p in enumerate(peers) if p.archive.lease is not None
                        and p.archive.lease.holding]  # type: ignore[attr-defined]

            async def one_holder() -> bool:
                return len(holders()) == 1

            await wait_for(one_holder, 20, "one lease holder")
            first = holders()[0]
            await peers[first].close()  # a clean stop hands the lease over at once
            rest = [p for i, p in enumerate(peers) if i != first]

            async def taken_over() -> bool:
                return sum(p.archive.lease.holding for p in rest  # type: ignore[attr-defined]
                           if p.archive.lease is not None) == 1  # type: ignore[attr-defined]

            await wait_for(taken_over, 10, "another peer took the lease")
            acquired = log.events("store_retention_lease_acquired")
            assert len(acquired) == 2 and acquired[0]["peer"] != acquired[1]["peer"]
        finally:
            for p in peers:
                await p.close()

    run(main())


def _garbage(topic: bytes, size: int) -> bytes:
    return envelope_pb2.Envelope(
        version=ENVELOPE_VERSION, topic=topic, nonce=os.urandom(NONCE_BYTES),
        ciphertext=os.urandom(size),
    ).SerializeToString()


def test_a_flood_through_two_peers_cannot_evict_the_quiet_members(
    tmp_path: Path, js3: NatsServers
) -> None:
    """A public channel archived by two store peers into one 256 KiB archive: 3 quiet
    members' 30 lines, one member's flood of 600 KB and 600 KB of garbage (through the
    other peer). The lease holder keeps every quiet line, and the archive within its
    limit; the flood and the garbage are what goes."""
    stream = _stream()
    max_bytes = 256 * 1024

    async def main() -> None:
        log = CapturedLog()
        keys = ((PUBLIC.topic, PUBLIC.key),)
        a = js_peer(tmp_path / "a", js3.urls, (PUBLIC.topic,), log, stream=stream,
                    max_bytes=max_bytes, public_channel_keys=keys,
                    retention_interval_s=3600)  # fmt: skip
        b = js_peer(tmp_path / "b", js3.urls, (PUBLIC.topic,), log, stream=stream,
                    max_bytes=max_bytes, public_channel_keys=keys,
                    retention_interval_s=3600)  # fmt: skip
        async with a, b:
            quiet = [Identity.generate() for _ in range(3)]
            lines = [sealed(q, PUBLIC, f"quiet {i}", i) for q in quiet for i in range(10)]
            honest = [h for _, h in lines]
            for env, _ in lines:
                await a.ingest(env)
            flooder = Identity.generate()
            for i in range(200):
                await a.ingest(sealed(flooder, PUBLIC, f"flood {i}", 100 + i, pad=3_000)[0])
                await b.ingest(_garbage(PUBLIC.topic, 3_000))
            await asyncio.gather(a.flush(), b.flush())
            holder = next(p for p in (a, b) if p.archive.lease.holding)  # type: ignore[attr-defined]
            lease = holder.archive.lease  # type: ignore[attr-defined]

            async def known() -> bool:  # (retention may have run already: woken by growth)
                return lease.ready and len(lease.holdings or ()) + lease.counters["deleted"] == 430

            await wait_for(known, 30, "the holder read every envelope")
            await holder.run_retention()
            async with StoreClient(b.url) as client:
                kept = await client.by_hash(honest)
            assert len(kept) == 30  # every quiet line, through the other peer too
            sizes = lease.holdings.totals
            assert sum(sizes.values()) <= max_bytes
            garbage = [n for h, n in sizes.items() if not h.attributed]
            assert garbage in ([], [0])  # the unattributed go first: none left
            assert lease.counters["deleted"] > 0

    run(main())


def test_the_audit_indexes_what_a_dead_peer_left_and_deletes_a_second_copy(
    tmp_path: Path, js1: NatsServers
) -> None:
    """Two messages as a store peer's crash or a lost race leave them (published here as
    a store peer publishes, by hand): one whose index entry was never made, and a second
    copy of an archived envelope (its Nats-Msg-Id in capitals: the dedup window lets it
    through as it would one published after the window). The lease holder's audit
    indexes the first (by-hash queries find it) and deletes the second copy."""
    stream = _stream()
    ident = Identity.generate()
    room = channel("js-room")
    lost_index, lost_hash = sealed(ident, room, "indexless", 1)
    twice, twice_hash = sealed(ident, room, "twice", 2)

    async def main() -> None:
        log = CapturedLog()
        peer = js_peer(tmp_path / "p", js1.urls, (room.topic,), log, stream=stream,
                       lease_s=3.0, audit_delay_s=0.5)  # fmt: skip
        async with peer:
            await peer.ingest(twice)
            await peer.flush()
            nc = await nats.connect(js1.urls[0])
            js = nc.jetstream()
            subject = subject_for(stream, room.topic)
            await js.publish(subject, lost_index, headers={
                MSG_ID: lost_hash.hex(), ARRIVAL_HEADER: "1700000000000", WRITER_HEADER: ""})
            await js.publish(subject, twice, headers={
                MSG_ID: twice_hash.hex().upper(), ARRIVAL_HEADER: "1700000000001",
                WRITER_HEADER: ""})
            await nc.close()
            assert (await peer.archive.stats())[0] == 3
            lease = peer.archive.lease  # type: ignore[attr-defined]

            async def audited() -> bool:
                return (lease.counters["index_repaired"] >= 1
                        and lease.counters["copies_deleted"] >= 1)  # fmt: skip

            await wait_for(audited, 30, "the audit repaired the index and deleted the copy")
            assert lease.counters == {**lease.counters, "index_repaired": 1, "copies_deleted": 1}
            assert (await peer.archive.stats())[0] == 2
            async with StoreClient(peer.url) as client:
                found = await client.by_hash([lost_hash, twice_hash])
                page = await client.by_time(room.topic)
            assert set(found) == {lost_hash, twice_hash}
            assert sorted(i.hash for i in page.items) == sorted([lost_hash, twice_hash])

    run(main())
