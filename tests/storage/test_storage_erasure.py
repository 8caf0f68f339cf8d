"""Deleted content leaves every file: the database, its WAL and shared-memory file.

``Store.replace_content`` (a deletion's redaction) and ``Store.forget_channel`` run
with ``secure_delete = ON`` and then empty the WAL (``storage/erasure.py``). Each
test reads every file of the data directory byte for byte for the deleted text while
the store is still open (a clean close would checkpoint and delete the WAL anyway).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from storage_testkit import mid, msg, open_with_channel, run

from storage import Batch, OwnState, Store, open_read_only
from storage.database import DB_FILENAME

SECRET = b"oops secret password hunter2"


def holders(data_dir: Path, needle: bytes = SECRET) -> list[str]:
    """The files of ``data_dir`` that contain ``needle``."""
    return sorted(p.name for p in data_dir.rglob("*") if p.is_file() and needle in p.read_bytes())


async def _fill(store: Store, secret: bytes) -> None:
    """Other lines, then the secret typed here (its outbox entry and its message)."""
    await store.insert_messages([msg(i, 10 + i) for i in range(50)])
    batch = Batch()
    batch.record_typed(await store.next_local_id(), msg("s", 100, content=secret,
                                                        state=OwnState.SENT))  # fmt: skip
    await store.commit_batch(batch)
    await store.insert_messages([msg(f"after{i}", 200 + i) for i in range(50)])


def test_replaced_content_is_in_no_file_once_the_call_returns(tmp_path: Path) -> None:
    """A short line and a long one (its overflow pages freed: ``FAST`` would leave
    them as they were in the file)."""
    long_secret = SECRET + b" " + b"x" * 40_000 + b" " + SECRET[::-1]

    async def body() -> None:
        data_dir = tmp_path / "d"
        async with await open_with_channel(data_dir) as store:
            await _fill(store, SECRET)
            await store.insert_messages([msg("long", 150, content=long_secret)])
            assert holders(data_dir) and holders(data_dir, SECRET[::-1])
            assert await store.replace_content(
                "general", [(mid("s"), "alice", b"gone"), (mid("long"), "alice", b"gone too")]
            ) == 2
            assert holders(data_dir) == [] and holders(data_dir, SECRET[::-1]) == []
            assert store.wipes == 1 and not store.wipe_pending
            # the rest is intact and readable
            kept = await store.get_messages("general", [mid(3), mid("s"), mid("after7")])
            assert kept[mid("s")].content == b"gone"
            assert kept[mid(3)].content == b"message 3"
            assert not any(e.damaged for e in await store.page("general", limit=200))
            await store.insert_messages([msg("later", 400)])  # the WAL is written again
            assert holders(data_dir) == []

    run(body)


def test_a_reader_on_an_older_snapshot_delays_the_wipe_until_it_is_done(
    tmp_path: Path,
) -> None:
    """A ``sdschat history`` reading beside the node holds the WAL: the redaction does
    not wait for it (the node's commits would stall), and the background checkpointer
    empties the WAL once the reader has gone."""

    async def body() -> None:
        data_dir = tmp_path / "d"
        async with await open_with_channel(data_dir) as store:
            await _fill(store, SECRET)
            reader = open_read_only(data_dir / DB_FILENAME)
            assert reader is not None
            try:
                reader.execute("BEGIN")
                assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 101
                started = time.monotonic()
                assert await store.replace_content("general",
                                                   [(mid("s"), "alice", b"gone")]) == 1
                assert time.monotonic() - started < 3  # not the 5 s busy timeout
                assert store.wipe_pending
                assert "sdschat.db-wal" in holders(data_dir)  # the truth, while it reads
                await store.insert_messages([msg("meanwhile", 300)])  # writing goes on
            finally:
                reader.rollback()
                reader.close()
            deadline = time.monotonic() + 30
            while store.wipe_pending:  # bounded: the checkpointer retries every second
                assert time.monotonic() < deadline, "the checkpointer never wiped the WAL"
                await asyncio.sleep(0.05)
            assert holders(data_dir) == []
            assert store.checkpointer is not None and store.checkpointer.wipes >= 1

    run(body)


def test_the_wipe_is_pending_until_a_pass_has_emptied_the_wal(tmp_path: Path) -> None:
    """While a reader holds the WAL, the checkpointer's passes fail one after another:
    at no moment in between does the store say the wipe is done (a caller who saw it
    done would find the deleted text still in the WAL)."""

    async def body() -> None:
        data_dir = tmp_path / "d"
        async with await open_with_channel(data_dir) as store:
            await _fill(store, SECRET)
            checkpointer = store.checkpointer
            assert checkpointer is not None
            reader = open_read_only(data_dir / DB_FILENAME)
            assert reader is not None
            try:
                reader.execute("BEGIN")
                reader.execute("SELECT count(*) FROM messages").fetchone()
                await store.replace_content("general", [(mid("s"), "alice", b"gone")])
                deadline = time.monotonic() + 60
                while checkpointer.wipe_tries < 3:  # each try waits 100 ms for the reader
                    assert time.monotonic() < deadline, "the checkpointer never tried"
                    assert store.wipe_pending and checkpointer.wipe_pending
                    await asyncio.sleep(0.005)
                assert checkpointer.wipes == 0
                assert "sdschat.db-wal" in holders(data_dir)
            finally:
                reader.rollback()
                reader.close()
            deadline = time.monotonic() + 30
            while store.wipe_pending:
                assert time.monotonic() < deadline, "the checkpointer never wiped the WAL"
                await asyncio.sleep(0.005)
            assert holders(data_dir) == []

    run(body)


def test_a_forgotten_channel_leaves_no_text_behind(tmp_path: Path) -> None:
    async def body() -> None:
        data_dir = tmp_path / "d"
        async with await open_with_channel(data_dir, "general", "other") as store:
            await _fill(store, SECRET)
            await store.insert_messages([msg("o", 5, channel="other")])
            await store.leave_channel("general")
            assert await store.forget_channel("general") == 101
            assert holders(data_dir) == []
            assert [e.message_id for e in await store.page("other", limit=5)] == [mid("o")]

    run(body)


def test_the_connection_keeps_fast_secure_delete_for_everything_else(tmp_path: Path) -> None:
    """Only the erasing transaction pays for zeroing freed pages: the recent window's
    pruning and the event log's export stay on ``FAST`` (2)."""

    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            await _fill(store, SECRET)
            await store.replace_content("general", [(mid("s"), "alice", b"gone")])

            def mode(db: sqlite3.Connection) -> int:
                return int(db.execute("PRAGMA secure_delete").fetchone()[0])

            assert await store._call(mode) == 2

    run(body)
