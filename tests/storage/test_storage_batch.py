"""Batches (atomicity), the outbox protocol, durability level, the event log, the archive."""

from __future__ import annotations

import asyncio
import enum
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from storage_testkit import mid, msg, open_with_channel, run

from storage import (
    ArchivedEnvelope,
    Batch,
    BatchAlreadyCommittedError,
    BatchResult,
    EventRow,
    OutboxStateError,
    OwnState,
    StorageError,
    Store,
    UnknownChannelError,
    event_row,
)
from storage.batch import existing_ids

# ----------------------------------------------------------------- stand-ins for sds.events


class Reason(enum.Enum):
    BAD_FILTER = "bad_filter"


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    message_id: str
    retrieval_hint: bytes | None


@dataclass(frozen=True, slots=True)
class MessageDelivered:
    channel_id: str
    message_id: str
    sender_id: str
    lamport: int
    content: bytes


@dataclass(frozen=True, slots=True)
class MessageSent:
    channel_id: str
    message_id: str
    lamport: int
    content: bytes
    data: bytes
    causal_history: tuple[str, ...]
    position: int


@dataclass(frozen=True, slots=True)
class MessagesMissing:
    channel_id: str
    missing: tuple[HistoryEntry, ...]


@dataclass(frozen=True)
class MessageDropped:
    channel_id: str
    reason: Reason
    data: bytes
    lamport_timestamp: int
    ids: frozenset[str]


class PlainEvent:
    """Not a dataclass: attributes are read from ``__dict__``."""

    def __init__(self) -> None:
        self.channel_id = "general"
        self.message_id = mid(5)
        self.count = 3


# ----------------------------------------------------------------- batches


def full_batch(local_id: int | None = None) -> Batch:
    batch = Batch()
    batch.insert_messages([msg(1, 10), msg(2, 11, sender="me", state=OwnState.QUEUED)])
    batch.set_own_state("general", [mid(2)], OwnState.SENT)
    batch.set_core_state("general", b"core-state-v2")
    batch.add_events([MessageDelivered("general", mid(1), "alice", 10, b"hi")], wall_ms=500)
    batch.enqueue_outgoing("general", b"typed later", created_ms=400)
    if local_id is not None:
        batch.mark_sent(local_id, mid(2), channel="general")
    return batch


async def snapshot(store: Store) -> tuple[object, ...]:
    return (
        await store.count_messages("general"),
        await store.load_core_state("general"),
        await store.count_events(),
        [p.local_id for p in await store.pending_outgoing()],
        await store.archive.stats(),
    )


def test_empty_batch_is_a_no_op(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            batch = Batch()
            assert await store.commit_batch(batch) == BatchResult()
            with pytest.raises(BatchAlreadyCommittedError):
                await store.commit_batch(batch)

    run(body)


def test_commit_batch_writes_everything(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            local_id = await store.enqueue_outgoing("general", b"message 2")
            batch = full_batch(local_id)
            result = await store.commit_batch(batch, now_ms=777)
            assert result.new_messages == (("general", mid(1)), ("general", mid(2)))
            assert result.is_new("general", mid(1))
            assert len(result.local_ids) == 1 and result.local_ids[0] > local_id
            assert result.own_states_updated == 1
            assert list(result.event_ids) == [1]
            assert await store.load_core_state("general") == b"core-state-v2"
            pending = await store.pending_outgoing()
            assert [(p.local_id, p.content, p.created_ms) for p in pending] == [
                (result.local_ids[0], b"typed later", 400)
            ]
            page = await store.page("general")
            assert [(e.message_id, e.state) for e in page] == [
                (mid(1), None),
                (mid(2), OwnState.SENT),
            ]
            with pytest.raises(BatchAlreadyCommittedError):
                await store.commit_batch(batch)

    run(body)


@pytest.mark.parametrize("failure", ["unknown-local-id", "unknown-channel", "sql-constraint"])
def test_failing_batch_leaves_nothing_behind(tmp_path: Path, failure: str) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            await store.insert_message(msg(0, 5))
            await store.save_core_state("general", b"core-state-v1")
            before = await snapshot(store)
            batch = full_batch()
            batch.archive_envelopes([ArchivedEnvelope(b"h" * 32, b"topic", 1, b"env")])
            if failure == "unknown-local-id":
                batch.mark_sent(12345, mid(2))
                expected: type[Exception] = OutboxStateError
            elif failure == "unknown-channel":
                batch.insert_message(msg(9, 9, channel="never-joined"))
                expected = UnknownChannelError
            else:
                # NOT NULL violation in the events table, which is written after the
                # messages, outbox, states and core state: all of those must roll back.
                batch.add_event_rows([EventRow(wall_ms=None, kind="Bad")])  # type: ignore[arg-type]
                expected = StorageError
            with pytest.raises(expected):
                await store.commit_batch(batch)
            assert await snapshot(store) == before
            assert not batch.committed

    run(body)


def test_outbox_protocol(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d", "general", "other") as store:
            a = await store.enqueue_outgoing("general", b"first", now_ms=1)
            b = await store.enqueue_outgoing("other", b"second", now_ms=2)
            c = await store.enqueue_outgoing("general", b"third", now_ms=3)
            assert [p.local_id for p in await store.pending_outgoing()] == [a, b, c]
            assert [p.content for p in await store.pending_outgoing("general")] == [
                b"first",
                b"third",
            ]
            sent = msg("a", 100, sender="me", state=OwnState.QUEUED, envelope=b"ENV-A")
            result = await store.record_sent(a, sent, core_state=b"after-a")
            assert result.is_new("general", sent.message_id)
            assert [p.local_id for p in await store.pending_outgoing()] == [b, c]
            assert await store.load_core_state("general") == b"after-a"
            assert await store.get_envelopes("general", [sent.message_id]) == {
                sent.message_id: b"ENV-A"
            }
            # Same id again: idempotent. A different id: refused, nothing changes.
            await store.mark_sent(a, sent.message_id)
            with pytest.raises(OutboxStateError, match="twice"):
                await store.mark_sent(a, mid("other-id"))
            with pytest.raises(OutboxStateError, match="belongs to channel"):
                await store.record_sent(b, msg("b", 101, sender="me", state=OwnState.QUEUED))
            with pytest.raises(OutboxStateError, match="no outbox entry"):
                await store.mark_sent(999, mid("x"))
            assert [p.local_id for p in await store.pending_outgoing()] == [b, c]
            assert await store.count_messages("general") == 1

    run(body)


def test_outbox_commits_are_fsynced_and_others_are_not(tmp_path: Path) -> None:
    statements: list[str] = []

    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            conn = store._conn
            assert conn is not None
            await conn.set_trace_callback(statements.append)

            statements.clear()
            local_id = await store.enqueue_outgoing("general", b"typed")
            assert statements[:2] == ["PRAGMA synchronous = FULL", "BEGIN IMMEDIATE"]
            assert statements[-2:] == ["COMMIT", "PRAGMA synchronous = NORMAL"]

            statements.clear()
            await store.record_sent(local_id, msg(1, 1, sender="me", state=OwnState.QUEUED))
            assert statements[0] == "PRAGMA synchronous = FULL"

            statements.clear()
            await store.insert_message(msg(2, 2))
            assert statements[0] == "BEGIN IMMEDIATE"
            assert not any("synchronous" in s for s in statements)

            statements.clear()
            batch = Batch(durable=True)
            batch.set_core_state("general", b"x")
            await store.commit_batch(batch)
            assert statements[0] == "PRAGMA synchronous = FULL"
            await conn.set_trace_callback(None)  # type: ignore[arg-type]

    run(body)


# ----------------------------------------------------------------- events


def test_event_row_reads_fields_by_name() -> None:
    delivered = event_row(MessageDelivered("general", mid(1), "alice", 42, b"hello"), 1000)
    assert delivered == EventRow(
        wall_ms=1000,
        kind="MessageDelivered",
        channel="general",
        message_id=mid(1),
        sender_id="alice",
        lamport=42,
        size_bytes=5,
        detail="{}",  # the content itself is never logged
    )

    sent = event_row(MessageSent("c", mid(2), 7, b"hey", b"W" * 120, (mid(0), mid(1)), 4), 9)
    assert (sent.size_bytes, sent.lamport, sent.sender_id) == (120, 7, None)
    assert json.loads(sent.detail) == {"content_bytes": 3, "causal_history_len": 2, "position": 4}

    missing = event_row(
        MessagesMissing("general", (HistoryEntry(mid(1), b"\x01\x02"), HistoryEntry(mid(2), None))),
        7,
    )
    assert (missing.kind, missing.channel, missing.message_id, missing.size_bytes) == (
        "MessagesMissing",
        "general",
        None,
        None,
    )
    assert json.loads(missing.detail) == {
        "missing": [
            {"message_id": mid(1), "retrieval_hint": "0102"},
            {"message_id": mid(2), "retrieval_hint": None},
        ]
    }

    dropped = event_row(MessageDropped("c", Reason.BAD_FILTER, b"\xff" * 9, 5, frozenset("ba")), 1)
    assert (dropped.lamport, dropped.size_bytes) == (5, 9)
    assert json.loads(dropped.detail) == {"reason": "bad_filter", "ids": ["a", "b"]}

    unknown_id = event_row(MessageDelivered("c", None, None, 1, b""), 1)  # type: ignore[arg-type]
    assert (unknown_id.message_id, unknown_id.sender_id, unknown_id.detail) == (None, None, "{}")

    plain = event_row(PlainEvent(), 2)
    assert (plain.kind, plain.channel, plain.message_id) == ("PlainEvent", "general", mid(5))
    assert json.loads(plain.detail) == {"count": 3}

    huge = event_row(MessageDelivered("c", "id", "s", 2**64 - 1, b""), 3)
    assert huge.lamport is None  # out of INTEGER range: kept in detail instead
    assert json.loads(huge.detail) == {"lamport": 2**64 - 1}


def test_event_log_round_trip_and_iteration(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            ids = await store.append_events(
                event_row(MessageDelivered("general", mid(i), "alice", i, b"x" * i), 100 + i)
                for i in range(25)
            )
            assert list(ids) == list(range(1, 26))
            batch = Batch()
            batch.add_event(PlainEvent(), 999)
            assert list((await store.commit_batch(batch)).event_ids) == [26]
            events = [e async for e in store.iter_events(page_size=4)]
            assert [e.id for e in events] == list(range(1, 27))
            assert events[3].lamport == 3 and events[3].size_bytes == 3
            assert events[3].wall_ms == 103 and events[3].kind == "MessageDelivered"
            assert events[-1].kind == "PlainEvent"
            tail = [e.id async for e in store.iter_events(after_id=20, limit=3, page_size=2)]
            assert tail == [21, 22, 23]
            assert [e.id for e in await store.events_page(24, 10)] == [25, 26]
            assert await store.events_page(26) == []
            assert await store.count_events() == 26
            assert await store.append_events([]) == range(0)
            assert await store.delete_events_through(10) == 10
            assert [e.id async for e in store.iter_events(limit=2)] == [11, 12]
            more = await store.append_events([EventRow(wall_ms=1, kind="After")])
            assert list(more) == [27]  # ids are never reused

    run(body)


# ----------------------------------------------------------------- archive


def envelope(n: int, topic: bytes, arrival_ms: int, size: int = 100) -> ArchivedEnvelope:
    return ArchivedEnvelope(bytes.fromhex(mid(n)), topic, arrival_ms, bytes([n % 256]) * size)


def test_archive_queries(tmp_path: Path) -> None:
    a, b = b"topic-a", b"topic-b"
    items = [envelope(i, a if i % 2 else b, 1000 + i // 3) for i in range(40)]

    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            assert await store.archive.put_many(items) == 40
            assert await store.archive.put_many(items[:5]) == 0  # already there
            assert await store.archive.put_many([]) == 0
            got = await store.archive.get_by_hashes([items[3].hash, items[4].hash, b"\0" * 32])
            assert got == {items[3].hash: items[3], items[4].hash: items[4]}
            expected = sorted((e for e in items if e.topic == a), key=lambda e: e.cursor)
            paged: list[ArchivedEnvelope] = []
            cursor = None
            for _ in range(20):
                page = await store.archive.range(a, cursor=cursor, limit=6)
                paged += page
                if len(page) < 6:
                    break
                cursor = page[-1].cursor
            assert paged == expected
            recent = await store.archive.range(a, since_ms=1010, limit=100)
            assert recent == [e for e in expected if e.arrival_ms >= 1010]
            assert await store.archive.range(b"nobody", limit=10) == []
            assert await store.archive.stats() == (40, 4000)

    run(body)


def test_archive_retention_by_age_and_size(tmp_path: Path) -> None:
    items = [envelope(i, b"t", 1000 + i, size=10 + i) for i in range(20)]

    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            await store.archive.put_many(items)
            assert await store.archive.delete_older_than(1005) == 5
            remaining = items[5:]
            assert await store.archive.stats() == (15, sum(len(e.envelope) for e in remaining))
            # Keep the newest that fit in 100 bytes: 29 + 28 + 27 = 84; adding 26 would exceed.
            assert await store.archive.trim_to_size(100) == 12
            kept = await store.archive.range(b"t", limit=100)
            assert [len(e.envelope) for e in kept] == [27, 28, 29]
            assert await store.archive.trim_to_size(1000) == 0
            assert await store.archive.trim_to_size(0) == 3
            assert await store.archive.stats() == (0, 0)

    run(body)


# ----------------------------------------------------------------- commit on the loop's thread


def test_commit_batch_now_commits_on_the_calling_thread_only_when_the_connection_is_idle(
    tmp_path: Path,
) -> None:
    """A node's small rounds commit on the loop's thread (no hand-over to aiosqlite's
    thread and back); never while a call runs on that thread (one connection)."""

    async def main() -> None:
        store = await open_with_channel(tmp_path, "general")
        try:
            # idle: committed here, now, on this thread; durable batches too
            b1 = Batch()
            b1.insert_message(msg(1, 10))
            threads: list[threading.Thread] = []
            db = store._conn._conn  # type: ignore[union-attr]
            db.set_trace_callback(lambda _sql: threads.append(threading.current_thread()))
            result = store.commit_batch_now(b1, now_ms=5)
            db.set_trace_callback(None)
            assert result is not None and result.is_new("general", mid(1))
            assert b1.committed and threads and set(threads) == {threading.current_thread()}
            assert await store.has_ids("general", [mid(1)]) == {mid(1)}
            b2 = Batch()
            b2.record_typed(await store.next_local_id(), msg(2, 20), 6)  # a typed line: fsynced
            assert b2.needs_fsync
            assert store.commit_batch_now(b2, now_ms=6) is not None
            assert await store.pending_outgoing() == []  # carried its message id
            # a call in flight on aiosqlite's thread: refused (None), nothing written
            started, release = threading.Event(), threading.Event()

            def slow(db: Any) -> None:
                started.set()
                release.wait(5)

            task = asyncio.ensure_future(store._call(slow))
            await asyncio.to_thread(started.wait, 5)
            b3 = Batch()
            b3.insert_message(msg(3, 30))
            assert store.commit_batch_now(b3, now_ms=7) is None
            assert not b3.committed
            release.set()
            await task
            assert await store.has_ids("general", [mid(3)]) == set()
            assert store.commit_batch_now(b3, now_ms=8) is not None  # idle again
            assert await store.has_ids("general", [mid(3)]) == {mid(3)}
        finally:
            await store.close()
        assert store.commit_batch_now(Batch(), now_ms=9) is None  # closed

    run(main)


@pytest.mark.parametrize("count", [0, 1, 2, 8, 9, 40])
def test_existing_ids_finds_the_stored_ones_among_few_or_many(tmp_path: Path, count: int) -> None:
    """A round's few ids are bound as parameters, many go as one JSON array: the same
    answer either way, in the asked channel only, duplicates and absent ids included."""

    async def main() -> None:
        store = await open_with_channel(tmp_path, "general", "other")
        try:
            await store.insert_messages([msg(i, i) for i in range(0, 40, 2)])  # even ids
            await store.insert_messages([msg(i, i, channel="other") for i in range(1, 40, 2)])
            asked = [mid(i) for i in range(count)] + [mid(0)] * (count > 0)
            db = store._conn._conn  # type: ignore[union-attr]
            assert existing_ids(db, "general", asked) == {mid(i) for i in range(0, count, 2)}
            assert existing_ids(db, "other", iter(asked)) == {mid(i) for i in range(1, count, 2)}
            assert existing_ids(db, "nowhere", asked) == set()
        finally:
            await store.close()

    run(main)


def test_a_batch_for_an_unknown_channel_is_refused_with_one_or_several_channels(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        store = await open_with_channel(tmp_path, "general")
        try:
            for channels in (["nowhere"], ["general", "nowhere"]):
                b = Batch()
                for i, ch in enumerate(channels):
                    b.insert_message(msg(100 + i, 1, channel=ch))
                with pytest.raises(UnknownChannelError, match="nowhere"):
                    await store.commit_batch(b, now_ms=1)
            assert await store.count_messages("general") == 0
        finally:
            await store.close()

    run(main)
