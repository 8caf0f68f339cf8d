"""The store peer in-process: ingest, queries by hash and by time, refusals, retention."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import T, channel, run, sealed
from websockets.asyncio.client import connect

from net import envelope_pb2, store_pb2
from net.envelope import ENVELOPE_VERSION
from net.identity import Identity
from net.relay_log import RelayLogger
from net.store_client import StoreClient, StoreRequestError, StoreUnavailable
from net.store_config import (
    StorePeerConfig,
    parse_duration_ms,
    parse_host_port,
    parse_size,
    parse_topic,
)
from net.store_frames import (
    STORE_PROTOCOL_VERSION,
    decode_store_frame,
    encode_envelopes,
    encode_query_by_hash,
    encode_query_by_time,
)
from net.store_peer import StorePeer, check_envelope

KEY = channel("room")
OTHER = channel("elsewhere")
QUIET = RelayLogger("json", open(os.devnull, "w"))  # noqa: SIM115 (process lifetime)


def config(tmp: Path, **changes: object) -> StorePeerConfig:
    base = StorePeerConfig(
        data_dir=tmp / "store", topics=(KEY.topic,), listen=("127.0.0.1", 0),
        stats_interval_s=0,
    )
    return base.replace(**changes)


def envelopes(n: int, key=KEY, *, pad: int = 0, start: int = 0) -> list[tuple[bytes, bytes]]:
    ident = Identity.generate()
    return [sealed(ident, key, f"message {i}", i, pad=pad) for i in range(start, start + n)]


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


# ----------------------------------------------------------------- parsing


def test_config_parsers() -> None:
    assert parse_duration_ms("30d") == 30 * 86_400_000
    assert parse_duration_ms("90m") == 5_400_000
    assert parse_duration_ms("45") == 45_000
    assert parse_duration_ms("500ms") == 500
    assert parse_size("1G") == 1024**3
    assert parse_size("500M") == 500 * 1024**2
    assert parse_size("64kib") == 64 * 1024
    assert parse_size("0") == 0
    assert parse_host_port("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_host_port("[::1]:9000") == ("::1", 9000)
    assert parse_host_port(":9000") == ("127.0.0.1", 9000)
    assert parse_topic(KEY.topic.hex()) == KEY.topic
    for bad, fn in (("soon", parse_duration_ms), ("lots", parse_size),
                    ("host:port", parse_host_port), ("127.0.0.1:70000", parse_host_port),
                    ("zz", parse_topic), ("", parse_topic)):
        with pytest.raises(ValueError):
            fn(bad)
    with pytest.raises(ValueError):
        StorePeerConfig(data_dir=Path("."), default_page_size=10, max_page_size=5)
    with pytest.raises(ValueError):
        StorePeerConfig(data_dir=Path("."), relays=("http://x",))
    # NaN passed "<= 0" checks: retention never ran and SIGTERM could not stop the store
    for name in ("retention_interval_s", "flush_interval_s", "rate", "stats_interval_s"):
        for value in (math.nan, math.inf):
            with pytest.raises(ValueError, match=f"{name} must be a finite number"):
                StorePeerConfig(data_dir=Path("."), **{name: value})
    with pytest.raises(ValueError, match="stats_interval_s must be >= 0"):
        StorePeerConfig(data_dir=Path("."), stats_interval_s=-1)


def test_check_envelope_needs_no_key() -> None:
    env, _ = envelopes(1)[0]
    topics = frozenset({KEY.topic})
    assert check_envelope(env, topics) == (KEY.topic, None)
    assert check_envelope(env, frozenset({OTHER.topic})) == (None, "unknown_topic")
    assert check_envelope(b"\xff\xff", topics) == (None, "malformed")
    assert check_envelope(env + b"\x28\x01", topics) == (None, "malformed")  # unknown field
    parsed = envelope_pb2.Envelope.FromString(env)
    for version in (1, ENVELOPE_VERSION + 1):  # the retired format, and one from the future
        other = envelope_pb2.Envelope(
            version=version, topic=parsed.topic, nonce=parsed.nonce, ciphertext=parsed.ciphertext
        ).SerializeToString()
        assert check_envelope(other, topics) == (None, "unsupported_version")
    short_nonce = envelope_pb2.Envelope(
        version=ENVELOPE_VERSION, topic=parsed.topic, nonce=b"1", ciphertext=parsed.ciphertext
    ).SerializeToString()
    assert check_envelope(short_nonce, topics) == (None, "malformed")
    assert check_envelope(b"x" * (256 * 1024 + 1), topics) == (None, "oversized")


# ----------------------------------------------------------------- queries


def test_ingest_and_query_by_hash(tmp_path: Path) -> None:
    async def main() -> None:
        items = envelopes(600)
        async with StorePeer(config(tmp_path, max_hashes=50), logger=QUIET) as peer:
            for env, _ in items:
                await peer.ingest(env)
            await peer.ingest(items[0][0])  # duplicate, still buffered
            await peer.ingest(envelopes(1, OTHER)[0][0])  # not archived here
            async with StoreClient(peer.url) as client:
                info = await client.info()
                assert info.protocol_version == STORE_PROTOCOL_VERSION
                assert info.max_hashes == 50
                wanted = [h for _, h in items[::2]] + [b"\x01" * 32]
                found = await client.by_hash(wanted)  # 301 hashes: 7 pipelined batches
                assert set(found) == {h for _, h in items[::2]}
                for env, h in items[::2]:
                    assert found[h].envelope == env
                    assert hashlib.sha256(found[h].envelope).digest() == h
                assert await client.by_hash([]) == {}
                with pytest.raises(ValueError):
                    await client.by_hash([b"short"])
            await peer.flush()
            assert peer.stats.archived == 600
            assert peer.stats.duplicates == 1
            assert peer.stats.rejected == {"unknown_topic": 1}
            assert await peer.store.archive.stats() == (600, sum(len(e) for e, _ in items))

    run(main())


def test_query_by_time_pages_cover_the_range_once_in_order(tmp_path: Path) -> None:
    async def main() -> None:
        clock = Clock()
        items = envelopes(250)
        cfg = config(tmp_path, max_page_size=64, default_page_size=16)
        async with StorePeer(cfg, logger=QUIET, clock=clock) as peer:
            for i, (env, _) in enumerate(items):
                clock.now = 1_700_000_000_000 + i * 10  # 10 ms apart
                await peer.ingest(env)
            async with StoreClient(peer.url) as client:
                got: list[bytes] = []
                pages = 0
                totals = []
                async for page in client.pages(KEY.topic, page_size=64):
                    pages += 1
                    totals.append(page.total)
                    got.extend(item.hash for item in page.items)
                    assert page.store_time_ms == clock.now
                assert got == [h for _, h in items]
                assert pages == 4  # 64 + 64 + 64 + 58
                assert totals == [250, 0, 0, 0]  # the first page says how many in all
                # default page size, then continue from the cursor by hand
                first = await client.by_time(KEY.topic)
                assert len(first.items) == 16 and first.next is not None
                second = await client.by_time(KEY.topic, cursor=first.next)
                assert [i.hash for i in second.items] == [h for _, h in items[16:32]]
                # since / until select by arrival time
                window = await client.by_time(
                    KEY.topic,
                    since_ms=1_700_000_000_000 + 100,
                    until_ms=1_700_000_000_000 + 200,
                    page_size=64,
                )
                assert [i.hash for i in window.items] == [h for _, h in items[10:20]]
                assert window.next is None and window.total == 0  # not asked for
                counted = await client.by_time(KEY.topic, cursor=first.next, page_size=5,
                                               want_total=True)
                assert counted.total == 250 - 16 and len(counted.items) == 5
                assert [i.arrival_ms for i in window.items] == [
                    1_700_000_000_000 + 10 * k for k in range(10, 20)
                ]
                empty = await client.by_time(KEY.topic, since_ms=clock.now + 1)
                assert empty.items == () and empty.next is None

    run(main())


def test_large_answers_are_split_into_bounded_frames(tmp_path: Path) -> None:
    async def main() -> None:
        items = envelopes(40, pad=30_000)  # ~30 KB each, 1.2 MB in all
        cfg = config(tmp_path, response_frame_bytes=100_000, max_page_bytes=400_000)
        async with StorePeer(cfg, logger=QUIET) as peer:
            for env, _ in items:
                await peer.ingest(env)
            await peer.flush()
            async with connect(peer.url, max_size=2**20) as ws:
                await ws.send(encode_query_by_time(7, KEY.topic, page_size=1000))
                frames = []
                for _ in range(100):  # bounded
                    f = decode_store_frame(await ws.recv())
                    assert f.request_id == 7
                    frames.append(f)
                    if f.envelopes.final:
                        break
                assert len(frames) > 3
                assert all(len(f.SerializeToString()) < 100_000 + 40_000 for f in frames)
                n = sum(len(f.envelopes.envelopes) for f in frames)
                assert 13 <= n < 40  # the page stopped at max_page_bytes ...
                assert frames[-1].envelopes.HasField("next")  # ... and says where to go on
            async with StoreClient(peer.url) as client:
                got = [i for p in [p async for p in client.pages(KEY.topic)] for i in p.items]
                # all of them once, in the archive's order: (arrival time, hash)
                assert sorted(i.hash for i in got) == sorted(h for _, h in items)
                assert [(i.arrival_ms, i.hash) for i in got] == sorted(
                    (i.arrival_ms, i.hash) for i in got
                )

    run(main())


REFUSALS = [
    (b"\x0a\xff", "malformed"),  # undecodable
    (store_pb2.StoreFrame(request_id=1, info_request=store_pb2.InfoRequest())
     .SerializeToString(), "malformed"),  # no version
    (store_pb2.StoreFrame(version=9, request_id=1, info_request=store_pb2.InfoRequest())
     .SerializeToString(), "unsupported_version"),
    (store_pb2.StoreFrame(version=1, request_id=1).SerializeToString(), "malformed"),  # no body
    (encode_query_by_hash(1, []), "malformed"),
    (encode_query_by_hash(1, [b"\x00" * 32] * 11), "too_many_hashes"),
    (encode_query_by_hash(1, [b"\x00" * 31]), "bad_hash"),
    (encode_query_by_time(1, b""), "bad_topic"),
    (encode_query_by_time(1, b"t" * 65), "bad_topic"),
    (encode_query_by_time(1, OTHER.topic), "unknown_topic"),
    (encode_query_by_time(1, KEY.topic, page_size=101), "page_too_large"),
    (encode_query_by_time(1, KEY.topic, since_ms=10, until_ms=5), "bad_range"),
    (encode_query_by_time(1, KEY.topic, since_ms=2**63), "bad_range"),
    (encode_envelopes(1, [], final=True), "unexpected_frame"),
    (b"\x00" * 5000, "oversized"),
]


def test_refusals_carry_a_reason_and_keep_the_connection(tmp_path: Path) -> None:
    async def main() -> None:
        cfg = config(tmp_path, max_hashes=10, max_page_size=100, default_page_size=50,
                     max_request_bytes=4096,
                     max_frame=8192)
        async with StorePeer(cfg, logger=QUIET) as peer:
            async with connect(peer.url) as ws:
                for request, code in REFUSALS:
                    await ws.send(request)
                    frame = decode_store_frame(await ws.recv())
                    assert frame.WhichOneof("body") == "error", request
                    assert frame.error.code == code, (request, frame.error)
                    assert frame.error.reason
                await ws.send("a text frame")
                assert decode_store_frame(await ws.recv()).error.code == "malformed"
                # still serving
                await ws.send(encode_query_by_time(5, KEY.topic))
                ok = decode_store_frame(await ws.recv())
                assert ok.request_id == 5 and ok.envelopes.final
            # a frame above max_frame closes the connection with 1009
            async with connect(peer.url) as ws:
                await ws.send(b"\x00" * 9000)
                with pytest.raises(Exception):  # noqa: B017 (ConnectionClosedError)
                    await ws.recv()
                assert ws.close_code == 1009
            assert peer.stats.errors["oversized"] == 1
            async with StoreClient(peer.url) as client:
                with pytest.raises(StoreRequestError) as err:
                    await client.by_time(OTHER.topic)
                assert err.value.code == "unknown_topic"
                assert (await client.by_time(KEY.topic)).items == ()  # usable afterwards

    run(main())


def test_rate_limit_and_max_clients(tmp_path: Path) -> None:
    async def main() -> None:
        cfg = config(tmp_path, rate=1.0, burst=3, max_clients=1)
        async with StorePeer(cfg, logger=QUIET) as peer, connect(peer.url) as ws:
            codes = []
            for i in range(6):
                await ws.send(encode_query_by_time(i + 1, KEY.topic))
                f = decode_store_frame(await ws.recv())
                codes.append(f.error.code if f.WhichOneof("body") == "error" else "ok")
            assert codes[:3] == ["ok"] * 3 and "rate_limited" in codes[3:]
            async with connect(peer.url) as second:
                with pytest.raises(Exception):  # noqa: B017 (closed: store full)
                    await second.recv()
                assert second.close_code == 1013

    run(main())


def test_client_reports_an_unreachable_or_vanished_store(tmp_path: Path) -> None:
    async def main() -> None:
        client = StoreClient("ws://127.0.0.1:9", connect_timeout=T(2))
        with pytest.raises(StoreUnavailable):
            await client.info()
        peer = StorePeer(config(tmp_path), logger=QUIET)
        await peer.start()
        client = StoreClient(peer.url, request_timeout=T(5))
        await client.info()
        await peer.close()
        with pytest.raises(StoreUnavailable):
            await client.by_time(KEY.topic)
        await client.close()

    run(main())


# ----------------------------------------------------------------- retention


def test_retention_by_age_and_by_size(tmp_path: Path) -> None:
    async def main() -> None:
        clock = Clock()
        items = envelopes(100)
        size = len(items[0][0])
        cfg = config(tmp_path, max_age_ms=60_000, max_bytes=0)
        async with StorePeer(cfg, logger=QUIET, clock=clock) as peer:
            for i, (env, _) in enumerate(items):
                clock.now = 1_700_000_000_000 + i * 1_000  # one per second
                await peer.ingest(env)
            await peer.flush()
            clock.now = 1_700_000_000_000 + 99_000 + 30_000  # newest is 30 s old
            # cutoff = now - 60 s = T0 + 69 s: envelopes 0..68 go
            assert await peer.run_retention() == 69
            async with StoreClient(peer.url) as client:
                left = [i.hash for p in [p async for p in client.pages(KEY.topic)] for i in p.items]
                assert left == [h for _, h in items[69:]]
                info = await client.info()
                assert info.oldest_arrival_ms == 1_700_000_000_000 + 69_000
        # by size: reopen the same archive with a byte limit (retention runs at start)
        cfg2 = config(tmp_path, max_age_ms=0, max_bytes=10 * size + size // 2)
        async with StorePeer(cfg2, logger=QUIET, clock=clock) as peer:
            count, total = await peer.store.archive.stats()
            assert count == 10 and total <= cfg2.max_bytes
            async with StoreClient(peer.url) as client:
                left = [i.hash for i in (await client.by_time(KEY.topic)).items]
                assert left == [h for _, h in items[90:]]  # the newest survive
            assert peer.stats.retention_deleted == 31 - 10

    run(main())


def test_restart_keeps_the_archive(tmp_path: Path) -> None:
    async def main() -> None:
        items = envelopes(50)
        async with StorePeer(config(tmp_path), logger=QUIET) as peer:
            for env, _ in items:
                await peer.ingest(env)
        # close() flushed the buffer
        async with StorePeer(config(tmp_path), logger=QUIET) as peer:
            assert (await peer.store.archive.stats())[0] == 50
            async with StoreClient(peer.url) as client:
                found = await client.by_hash([h for _, h in items])
                assert len(found) == 50

    run(main())


# ----------------------------------------------------------------- wire format

_items = st.lists(
    st.tuples(st.binary(max_size=300), st.integers(0, 2**64 - 1)), max_size=5
)


@settings(max_examples=100, deadline=None)
@given(
    rid=st.integers(0, 2**64 - 1),
    items=_items,
    final=st.booleans(),
    cursor=st.none() | st.tuples(st.integers(0, 2**64 - 1), st.binary(min_size=32, max_size=32)),
    store_time=st.integers(0, 2**64 - 1),
    total=st.integers(0, 2**64 - 1),
)
def test_envelopes_frames_round_trip(
    rid: int,
    items: list[tuple[bytes, int]],
    final: bool,
    cursor: tuple[int, bytes] | None,
    store_time: int,
    total: int,
) -> None:
    frame = decode_store_frame(
        encode_envelopes(rid, items, final=final, next_cursor=cursor, store_time_ms=store_time,
                         total=total)
    )
    body = frame.envelopes
    assert frame.request_id == rid
    assert [(e.envelope, e.arrival_ms) for e in body.envelopes] == items
    assert body.final == final and body.store_time_ms == store_time and body.total == total
    got = (body.next.arrival_ms, body.next.hash) if body.HasField("next") else None
    assert got == cursor
