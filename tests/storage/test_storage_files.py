"""File segments indexed by file id (schema 7, issue 26 §5): a file's segments are one
index range, not a search of the log, on a new database and on one migrated from
schema 6 (``data/schema6.sqlite.gz``, made by ``data/make_schema6.py``)."""

from __future__ import annotations

import gzip
import os
import sqlite3
from pathlib import Path

from storage_testkit import mid, msg, open_with_channel, run

from app.chat.content import decode
from app.chat.file_quota import placeholder
from app.chat.files import split_file
from storage import DB_FILENAME, Store
from storage.doctor import diagnose
from storage.schema import SCHEMA_VERSION
from storage.store import FILE_SEGMENTS_SQL

FIXTURE = Path(__file__).parent / "data" / "schema6.sqlite.gz"
BOB, MALLORY, CAROL = "b" * 32, "m" * 32, "c" * 32
FILE_DATA = bytes(range(256)) * 500  # make_schema6.FILE_DATA


def fixture_dir(tmp_path: Path) -> Path:
    d = tmp_path / "old"
    d.mkdir(mode=0o700)
    (d / DB_FILENAME).write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    return d


def test_a_schema_6_database_migrates_with_its_segments_indexed(tmp_path: Path) -> None:
    data_dir = fixture_dir(tmp_path)
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 6
        old = db.execute("SELECT channel, message_id, sender_id, lamport, content FROM messages "
                         "ORDER BY channel, lamport").fetchall()  # fmt: skip
    assert len(old) == 20

    async def body() -> None:
        async with await Store.open(data_dir) as store:
            assert (store.migrated_from, store.schema_version) == (6, SCHEMA_VERSION)
            log = [e async for e in store.iter_log("general")]
            log += [e async for e in store.iter_log("other")]
            assert [(e.channel, e.message_id, e.sender_id, e.lamport, e.content)
                    for e in log] == [tuple(r) for r in old]  # fmt: skip
            assert not any(e.damaged for e in log)
            manifest = next(e for e in log if e.sender_id == BOB and decode(e.content).file)
            info = decode(manifest.content).file
            assert info is not None
            segs = await store.file_segments("general", BOB, info.file_id)
            # seg 0, 1, 2 and the second copy of 1, in SDS order; carol's line naming the
            # id and mallory's manifest and placeholder are not bob's segments
            assert [decode(e.content).segment_index for e in segs] == [0, 1, 2, 1]
            assert b"".join(decode(e.content).segment_data for e in segs[:3])[
                : info.size] == FILE_DATA  # fmt: skip
            ph = await store.file_segments("general", MALLORY, info.file_id)
            assert [decode(e.content).segment_index for e in ph] == [2**32 - 1]
            assert await store.file_segments("general", CAROL, info.file_id) == []
            assert await store.file_segments("other", BOB, info.file_id) == []
            await store.check_integrity()
        report = diagnose(data_dir)
        assert report.healthy and report.messages == 20

    run(body)


def test_new_segments_are_found_through_the_index_only(tmp_path: Path) -> None:
    parts = split_file("a.bin", os.urandom(100_000), "bob")
    info = decode(parts[0]).file
    assert info is not None

    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            rows = [msg(i, 100 + i, sender="bob", content=c) for i, c in enumerate(parts)]
            rows += [msg(f"x{i}", 200 + i, sender="carol",
                         content=f"see {info.file_id}".encode()) for i in range(5)]
            rows.append(msg("ph", 300, sender="bob", content=placeholder(info.file_id, "bob")))
            await store.insert_messages(rows)
            segs = await store.file_segments("general", "bob", info.file_id)
            assert [e.message_id for e in segs] == [mid(1), mid(2), mid(3), mid("ph")]
            assert await store.file_segments("general", "bob", info.file_id, limit=2) == segs[:2]

            def plan(db: sqlite3.Connection) -> str:
                return " ".join(str(r[3]) for r in db.execute(
                    "EXPLAIN QUERY PLAN " + FILE_SEGMENTS_SQL, ("general", "f", "b", 9)))

            shown = await store._call(plan)
            assert "USING INDEX messages_by_file" in shown and "SCAN" not in shown, shown
            # a deletion's overwrite (secure_delete) takes the row out of the file
            await store.replace_content("general", [(mid(2), "bob", b"deleted")])
            after = await store.file_segments("general", "bob", info.file_id)
            assert mid(2) not in [e.message_id for e in after]

    run(body)


def test_short_ids_resolve_through_the_primary_key(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            await store.insert_messages([msg(i, 10 + i) for i in range(300)])
            every = sorted(mid(i) for i in range(300))
            assert await store.ids_with_prefix("general", every[7][:10]) == [every[7]]
            assert await store.ids_with_prefix("general", every[7].upper()) == [every[7]]
            first = every[0][0]
            same = [m for m in every if m[0] == first]
            assert await store.ids_with_prefix("general", first, limit=1000) == same
            assert await store.ids_with_prefix("general", "ffffffff") == [
                m for m in every if m.startswith("ffffffff")]
            assert await store.ids_with_prefix("other", every[7][:10]) == []
            try:
                await store.ids_with_prefix("general", "xyz")
            except ValueError as exc:
                assert "hex" in str(exc)
            else:
                raise AssertionError("a non-hex prefix was accepted")

    run(body)


def test_search_of_one_author_reads_only_that_author(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            await store.insert_messages(
                [msg(i, 10 + i, sender="bob" if i % 2 else "alice", content=b"needle %d" % i)
                 for i in range(10)]
            )
            found = await store.search("general", "needle", sender_id="bob")
            assert [e.message_id for e in found] == [mid(i) for i in (9, 7, 5, 3, 1)]
            assert len(await store.search("general", "needle")) == 10

    run(body)


def test_doctor_finds_a_file_id_that_does_not_match_its_segment(tmp_path: Path) -> None:
    """The file id is not covered by the row's digest: doctor compares it with the
    content (a wrong one would hide the segment from its file)."""
    parts = split_file("a.bin", os.urandom(60_000), "bob")
    data_dir = tmp_path / "d"

    async def write() -> None:
        async with await open_with_channel(data_dir) as store:
            await store.insert_messages(
                [msg(i, 100 + i, sender="bob", content=c) for i, c in enumerate(parts)])

    run(write)
    assert diagnose(data_dir).healthy
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        db.execute("UPDATE messages SET file_id = ? WHERE message_id = ?", ("0" * 32, mid(1)))
    report = diagnose(data_dir)
    assert not report.healthy and report.damaged_rows == [("general", mid(1))]
