"""The store's retention rule (storage/retention.py, issue 39 §5): attributed envelopes
first, max-min fair per holder within each tier, oldest first within a holder; and the
SQLite archive deletes exactly what the pure rule says (so another engine calling the
rule keeps the same envelopes)."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import channel, run, sealed

from net.identity import Identity
from net.relay_log import RelayLogger
from net.store_config import StorePeerConfig
from net.store_peer import StorePeer
from net.store_proof import make_proof, write_key
from storage import ArchivedEnvelope, RetentionRule, Store
from storage.retention import Held, Holder, fair_cap

QUIET = RelayLogger("json", open(os.devnull, "w"))  # noqa: SIM115 (process lifetime)
T1, T2 = b"topic-one-16byte", b"topic-two-16byte"


def _held(writer: bytes, size: int, at: int, topic: bytes = T1) -> Held:
    key = hashlib.sha256(f"{writer!r}{at}".encode()).digest()
    return Held(Holder(topic, writer), size, at, key)


def test_everything_fits_or_no_limit_keeps_everything() -> None:
    items = [_held(b"ka", 100, 1), _held(b"", 100, 2)]
    assert RetentionRule(max_bytes=200).evict(items) == []
    assert RetentionRule(max_bytes=0).evict(items) == []
    assert RetentionRule().caps({Holder(T1, b"ka"): 10**12}) == {}
    with pytest.raises(ValueError, match=">= 0"):
        RetentionRule(max_bytes=-1)


def test_unattributed_envelopes_never_cost_an_attributed_one_its_place() -> None:
    honest = [_held(b"hhost", 100, i) for i in range(10)]  # 1,000 bytes, the oldest
    garbage = [_held(b"", 100, 100 + i) for i in range(3000)]  # newer, and 300 times more
    gone = RetentionRule(max_bytes=4_000).evict(honest + garbage)
    assert not [g for g in gone if g.holder.attributed]
    assert len(gone) == 3000 - 30  # the room the attributed leave: 3,000 bytes of garbage
    kept_garbage = set(garbage) - set(gone)
    assert min(g.arrival_ms for g in kept_garbage) == 100 + 2970  # the newest kept


def test_attributed_over_the_limit_leave_no_room_and_are_cut_fairly() -> None:
    quiet = [_held(b"kquiet", 100, i) for i in range(5)]  # 500 bytes
    flood = [_held(b"kflood", 100, 10 + i) for i in range(100)]  # 10,000 bytes
    garbage = [_held(b"", 100, 500 + i, T2) for i in range(10)]
    rule = RetentionRule(max_bytes=2_000)
    caps = rule.caps({Holder(T1, b"kquiet"): 500, Holder(T1, b"kflood"): 10_000,
                      Holder(T2): 1_000})  # fmt: skip
    assert caps == {Holder(T1, b"kflood"): 1_500, Holder(T2): 0}
    gone = set(rule.evict(quiet + flood + garbage))
    assert not gone & set(quiet)
    assert set(garbage) <= gone
    kept_flood = sorted(set(flood) - gone, key=lambda h: h.arrival_ms)
    assert [h.arrival_ms for h in kept_flood] == list(range(95, 110))  # its newest 15


def test_unattributed_holders_are_one_per_topic_and_share_the_room_fairly() -> None:
    a = [_held(b"", 100, i, T1) for i in range(50)]  # a flood on one topic
    b = [_held(b"", 100, 100 + i, T2) for i in range(5)]  # a quiet unattributed topic
    gone = set(RetentionRule(max_bytes=2_000).evict(a + b))
    assert not gone & set(b)
    assert len(set(a) - gone) == 15


def test_by_age_everyone_goes_alike() -> None:
    rule = RetentionRule(max_age_ms=1_000)
    assert rule.age_cutoff(5_000) == 4_000 and RetentionRule().age_cutoff(5_000) is None
    old, new = _held(b"ka", 1, 3_999), _held(b"", 1, 4_000)
    assert rule.evict([old, new], now_ms=5_000) == [old]


def test_the_fair_cap_fills_small_holders_first() -> None:
    assert fair_cap([10, 10, 10], 100) is None
    assert fair_cap([10, 500, 500], 100) == 45
    assert fair_cap([1, 1000], 0) == 0


_writers = st.sampled_from([b"", b"hhost-a", b"hhost-b", b"ksigner"])
_items = st.lists(
    st.tuples(st.sampled_from([T1, T2]), _writers, st.integers(1, 400), st.integers(0, 50)),
    min_size=0, max_size=60,
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(items=_items, max_bytes=st.integers(0, 8_000))
def test_the_sqlite_archive_deletes_exactly_what_the_rule_says(
    tmp_path_factory: pytest.TempPathFactory,
    items: list[tuple[bytes, bytes, int, int]],
    max_bytes: int,
) -> None:
    """Random envelopes (topics, writers, sizes, arrival times with ties): after
    ``archive.trim(rule)`` the archive holds exactly what ``rule.evict`` keeps."""
    rule = RetentionRule(max_bytes=max_bytes)
    data_dir = tmp_path_factory.mktemp("rule")
    rows = []
    for n, (topic, writer, size, at) in enumerate(items):
        env = n.to_bytes(4, "big") + b"\x00" * size
        rows.append(ArchivedEnvelope(hashlib.sha256(env).digest(), topic, at, env, writer))

    async def main() -> set[bytes]:
        store = await Store.open(data_dir)
        try:
            await store.archive.put_many(rows)
            await store.archive.trim(rule)
            kept = await store.archive.get_by_hashes([r.hash for r in rows])
            return set(kept)
        finally:
            await store.close()

    kept = asyncio.run(main())
    held = [Held(Holder(r.topic, r.writer), len(r.envelope), r.arrival_ms, r.hash) for r in rows]
    gone = {h.key for h in rule.evict(held)}
    assert kept == {r.hash for r in rows} - gone
    if max_bytes:
        assert sum(len(r.envelope) for r in rows if r.hash in kept) <= max_bytes
    attributed = sum(len(r.envelope) for r in rows if r.writer)
    if attributed <= max_bytes:  # the attributed fit: none of them went
        assert all(r.hash in kept for r in rows if r.writer)


def test_a_flood_on_an_unproven_topic_cannot_evict_a_proven_topic(tmp_path: Path) -> None:
    """One store, two topics: a members or passphrase channel given a write key (its
    envelopes come by Put with proofs, attributed to the sending host) and a private
    channel archived by topic only (everything unattributed). 2 MB of garbage on the
    second topic. Before: the unattributed topic was one writer with an equal share and
    pushed the proven envelopes down to it (39 of 60 kept); now they are all kept."""

    async def main() -> None:
        proven_key, open_key = channel("proven-room"), channel("open-room")
        wkey = write_key(proven_key.key, proven_key.topic)
        cfg = StorePeerConfig(tmp_path / "store", topics=(proven_key.topic, open_key.topic),
                              listen=("127.0.0.1", 0), stats_interval_s=0, max_bytes=256_000,
                              max_age_ms=0, retention_interval_s=3600, flush_max=16,
                              write_keys=((proven_key.topic, wkey),))  # fmt: skip
        from test_store_fair_eviction import _garbage, _put_from

        member = Identity.generate()
        async with StorePeer(cfg, logger=QUIET) as peer:
            mine = [sealed(member, proven_key, f"m{i}", i, pad=3_000) for i in range(60)]
            await _put_from(peer.port, "127.0.0.2",
                            [(env, make_proof(wkey, proven_key.topic, env)) for env, _ in mine])
            for _ in range(400):  # 2 MB on the other topic, from the relay feed
                await peer.ingest(_garbage(open_key.topic, 5_000))
            await peer.flush()
            await peer.run_retention()
            kept = await peer.store.archive.get_by_hashes([d for _, d in mine])
            assert len(kept) == len(mine), f"{len(kept)} of {len(mine)} proven envelopes kept"
            _count, size = await peer.store.archive.stats()
            assert size <= 256_000
            sizes = await peer.store.archive.writer_bytes()
            assert 0 < sizes[(open_key.topic, b"")] <= 256_000 - sizes[
                (proven_key.topic, b"h127.0.0.0/8")]

    run(main(), 60)
