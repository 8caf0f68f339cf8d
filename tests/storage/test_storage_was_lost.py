"""Schema 3: ``messages.was_lost`` (a message that arrived after it was declared lost)
is stored with the message, read back after a reopen, and filled by the migration of a
schema-2 database from its event log."""

from __future__ import annotations

import gzip
import sqlite3
from dataclasses import replace
from pathlib import Path

from storage_testkit import mid, msg, open_with_channel, run

from storage import DB_FILENAME, OwnState, Store
from storage.doctor import diagnose
from storage.schema import SCHEMA_VERSION

FIXTURE = Path(__file__).parent / "data" / "schema2.sqlite.gz"
"""A database written by sdschat's schema-2 code (main at 0ffcbb9) with
``data/make_schema2.py``: 30 messages on "general", own ones acknowledged or sent, a
pending outbox line, a core state, and the event log: a ``MessageDelivered`` row for
each message of the others, ``"was_lost":true`` for messages 7 and 21."""

LATE = {mid(7), mid(21)}


def fixture_dir(tmp_path: Path) -> Path:
    d = tmp_path / "old"
    d.mkdir(mode=0o700)
    (d / DB_FILENAME).write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    return d


def test_the_flag_is_stored_and_read_back_after_a_reopen(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"

    async def write() -> None:
        async with await open_with_channel(data_dir) as store:
            await store.insert_messages(
                [msg(1, 1), replace(msg(2, 2), was_lost=True), msg(3, 3)]
            )
            # a copy arriving again (without the flag) changes nothing: first one kept
            await store.insert_messages([msg(2, 2)])

    async def read() -> None:
        async with await Store.open(data_dir) as store:
            assert [(e.message_id, e.was_lost) for e in await store.page("general")] == [
                (mid(1), False), (mid(2), True), (mid(3), False)
            ]
            assert [e.was_lost for e in await store.search("general", "message 2")] == [True]
            full = await store.get_messages("general", [mid(1), mid(2)])
            assert (full[mid(1)].was_lost, full[mid(2)].was_lost) == (False, True)

    run(write)
    run(read)
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def schema2_rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
        return db.execute(
            "SELECT channel, message_id, sender_id, lamport, state, delivered_at, received_at, "
            "content, retrieval_hint, digest FROM messages ORDER BY rowid"
        ).fetchall()


def test_a_schema_2_database_migrates_with_its_history_intact_and_the_marks_filled(
    tmp_path: Path,
) -> None:
    data_dir = fixture_dir(tmp_path)
    old = schema2_rows(data_dir / DB_FILENAME)
    assert len(old) == 30

    async def body() -> None:
        async with await Store.open(data_dir) as store:
            assert (store.migrated_from, store.schema_version) == (2, SCHEMA_VERSION)
            log = [e async for e in store.iter_log("general")]
            assert [(e.message_id, e.sender_id, e.lamport, e.content) for e in log] == [
                (r[1], r[2], r[3], r[7]) for r in sorted(old, key=lambda r: (r[3], r[1]))
            ]
            assert not any(e.damaged for e in log)
            assert {e.message_id: e.state for e in log} == {
                r[1]: None if r[4] is None else OwnState(r[4]) for r in old
            }
            # the two messages whose delivery event said was_lost, and only those
            assert {e.message_id for e in log if e.was_lost} == LATE
            full = await store.get_messages("general", [r[1] for r in old])
            for r in old:
                m = full[r[1]]
                assert (m.retrieval_hint, m.delivered_at, m.received_at) == (r[8], r[5], r[6])
                assert m.envelope is not None and m.was_lost == (r[1] in LATE)
            assert [p.content for p in await store.pending_outgoing()] == [
                b'{"v":1,"name":"alice","kind":"msg","text":"pending"}'
            ]
            assert await store.load_core_state("general") == b'{"version":1}'
            assert await store.count_events() == 22 + 2  # 22 deliveries, 2 MessageLost
            await store.check_integrity()
        report = diagnose(data_dir)
        assert report.healthy and report.messages == 30 and report.unchecked_rows == 0

    run(body)
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        digests = db.execute("SELECT digest FROM messages ORDER BY rowid").fetchall()
        assert [d[0] for d in digests] == [r[9] for r in old]  # rows untouched


def test_a_damaged_event_detail_does_not_stop_the_migration(tmp_path: Path) -> None:
    """The fill reads the event log: an event whose detail is not JSON (file damage)
    is skipped, the database still opens."""
    data_dir = fixture_dir(tmp_path)
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        db.execute(
            "INSERT INTO events (wall_ms, channel, kind, message_id, detail) "
            "VALUES (1, 'general', 'MessageDelivered', ?, '{\"was_lost\":true,')",
            (mid(1),),
        )

    async def body() -> None:
        async with await Store.open(data_dir) as store:
            assert store.schema_version == SCHEMA_VERSION
            log = await store.page("general", limit=100)
            assert {e.message_id for e in log if e.was_lost} == LATE

    run(body)
