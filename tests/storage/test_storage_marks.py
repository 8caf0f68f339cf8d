"""Schema 4: ``messages.recovered`` (a message that arrived late: ``↺ recovered``) and
``messages.missing_before`` (dependencies declared lost before it: "✗ N messages
lost") are stored with the message, read back after a reopen, and filled by the
migration of a schema-3 database from its event log."""

from __future__ import annotations

import gzip
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from storage_testkit import mid, msg, open_with_channel, run

from storage import DB_FILENAME, OwnState, Store, StoredMessage
from storage.doctor import diagnose
from storage.schema import SCHEMA_VERSION

FIXTURE = Path(__file__).parent / "data" / "schema3.sqlite.gz"
"""A database written by sdschat's schema-3 code (main at b42f88d) with
``data/make_schema3.py``: 30 messages on "general" (own ones: every fourth), a pending
outbox line, a core state, and the event log: a ``MessageDelivered`` row for each
message of the others; 7 and 21 arrived after they were declared lost (``was_lost``),
9 and 22 were delivered with ``missing_before`` 1; a ``MessagesMissing`` row names 10
and 11 before their delivery, another names 3 after it."""

WAS_LOST = {mid(7), mid(21)}
LATE = WAS_LOST | {mid(10), mid(11)}
MISSING_BEFORE = {mid(9): 1, mid(22): 1}


def fixture_dir(tmp_path: Path) -> Path:
    d = tmp_path / "old"
    d.mkdir(mode=0o700)
    (d / DB_FILENAME).write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    return d


def test_the_marks_are_stored_and_read_back_after_a_reopen(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"

    async def write() -> None:
        async with await open_with_channel(data_dir) as store:
            await store.insert_messages(
                [
                    msg(1, 1),
                    replace(msg(2, 2), recovered=True),
                    replace(msg(3, 3), missing_before=3),
                    replace(msg(4, 4), was_lost=True),  # lost, then came: late too
                ]
            )
            # a copy arriving again (other marks) changes nothing: the first one is kept
            await store.insert_messages([replace(msg(1, 1), recovered=True, missing_before=2)])

    async def read() -> None:
        async with await Store.open(data_dir) as store:
            marks = [(e.recovered, e.missing_before) for e in await store.page("general")]
            assert marks == [(False, 0), (True, 0), (False, 3), (True, 0)]
            found = await store.search("general", "message 3")
            assert [(e.recovered, e.missing_before) for e in found] == [(False, 3)]
            assert [(e.recovered, e.missing_before) async for e in store.iter_log("general")] == (
                marks
            )
            full = await store.get_messages("general", [mid(n) for n in range(1, 5)])
            assert [(full[mid(n)].recovered, full[mid(n)].missing_before) for n in range(1, 5)] == (
                marks
            )

    run(write)
    run(read)
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_negative_count_is_refused_before_anything_is_written() -> None:
    with pytest.raises(ValueError, match="missing_before"):
        StoredMessage("general", mid(1), "bob", 1, b"x", missing_before=-1)


def schema3_rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        return db.execute(
            "SELECT channel, message_id, sender_id, lamport, state, delivered_at, received_at, "
            "content, retrieval_hint, digest, was_lost FROM messages ORDER BY rowid"
        ).fetchall()


def test_a_schema_3_database_migrates_with_its_history_intact_and_the_marks_filled(
    tmp_path: Path,
) -> None:
    data_dir = fixture_dir(tmp_path)
    old = schema3_rows(data_dir / DB_FILENAME)
    assert len(old) == 30 and {r[1] for r in old if r[10] == 1} == WAS_LOST

    async def body() -> None:
        async with await Store.open(data_dir) as store:
            assert (store.migrated_from, store.schema_version) == (3, SCHEMA_VERSION)
            log = [e async for e in store.iter_log("general")]
            assert [(e.message_id, e.sender_id, e.lamport, e.content) for e in log] == [
                (r[1], r[2], r[3], r[7]) for r in sorted(old, key=lambda r: (r[3], r[1]))
            ]
            assert not any(e.damaged for e in log)
            assert {e.message_id: e.state for e in log} == {
                r[1]: None if r[4] is None else OwnState(r[4]) for r in old
            }
            assert {e.message_id for e in log if e.was_lost} == WAS_LOST
            # named missing before it came (10, 11) or declared lost (7, 21); 3 was named
            # only after its delivery: not late
            assert {e.message_id for e in log if e.recovered} == LATE
            assert {e.message_id: e.missing_before for e in log if e.missing_before} == (
                MISSING_BEFORE
            )
            full = await store.get_messages("general", [r[1] for r in old])
            for r in old:
                m = full[r[1]]
                assert (m.retrieval_hint, m.delivered_at, m.received_at) == (r[8], r[5], r[6])
                assert m.envelope is not None and m.recovered == (r[1] in LATE)
                assert m.missing_before == MISSING_BEFORE.get(r[1], 0)
            assert [p.content for p in await store.pending_outgoing()] == [
                b'{"v":1,"name":"alice","kind":"msg","text":"pending"}'
            ]
            assert await store.load_core_state("general") == b'{"version":1}'
            assert await store.count_events() == 22 + 2 + 2  # deliveries, lost, missing
            await store.check_integrity()
        report = diagnose(data_dir)
        assert report.healthy and report.messages == 30 and report.unchecked_rows == 0

    run(body)
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        digests = db.execute("SELECT digest FROM messages ORDER BY rowid").fetchall()
        assert [d[0] for d in digests] == [r[9] for r in old]  # rows untouched


def test_damaged_event_details_do_not_stop_the_migration(tmp_path: Path) -> None:
    """The fill reads the event log: a detail that is not JSON, a ``missing`` that is not
    a list of objects, a count that is not a number (file damage) are skipped."""
    data_dir = fixture_dir(tmp_path)
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        bad = [
            ("MessageDelivered", mid(1), '{"missing_before":5,'),
            ("MessageDelivered", mid(2), '{"missing_before":"5","was_lost":false}'),
            ("MessageDelivered", mid(5), '{"missing_before":-2,"was_lost":false}'),
            ("MessagesMissing", mid(6), '{"first":true,"missing":["' + mid(5) + '"]}'),
            ("MessagesMissing", mid(6), '{"first":true,"missing":[{"message_id":'),
        ]
        db.executemany(
            "INSERT INTO events (wall_ms, channel, kind, message_id, detail) "
            "VALUES (1, 'general', ?, ?, ?)",
            bad,
        )

    async def body() -> None:
        async with await Store.open(data_dir) as store:
            assert store.schema_version == SCHEMA_VERSION
            log = await store.page("general", limit=100)
            assert {e.message_id for e in log if e.recovered} == LATE
            assert {e.message_id: e.missing_before for e in log if e.missing_before} == (
                MISSING_BEFORE
            )

    run(body)


def test_a_schema_2_database_gets_the_late_mark_of_its_lost_messages(tmp_path: Path) -> None:
    """Migrations 3 and 4 in a row: a message that arrived after it was declared lost
    arrived late too."""
    d = tmp_path / "old2"
    d.mkdir(mode=0o700)
    fixture2 = Path(__file__).parent / "data" / "schema2.sqlite.gz"
    (d / DB_FILENAME).write_bytes(gzip.decompress(fixture2.read_bytes()))

    async def body() -> None:
        async with await Store.open(d) as store:
            assert (store.migrated_from, store.schema_version) == (2, SCHEMA_VERSION)
            log = await store.page("general", limit=100)
            assert {e.message_id for e in log if e.recovered} == WAS_LOST
            assert not any(e.missing_before for e in log)

    run(body)
