"""The background checkpointer copies the WAL into the database file off the writer's path."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from storage_testkit import msg, open_with_channel, run

from storage import Batch, Store
from storage.checkpoint import Checkpointer
from storage.database import DB_FILENAME, WAL_CHECKPOINT_BYTES

MESSAGES = 100
ENVELOPE_BYTES = 40_000  # 4 MB in all: far below the writer's own checkpoint threshold


def checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sdschat-checkpoint")]


async def write_messages(store: Store) -> None:
    for start in range(0, MESSAGES, 10):
        batch = Batch()
        batch.insert_messages(
            msg(n, n + 1, envelope=os.urandom(ENVELOPE_BYTES)) for n in range(start, start + 10)
        )
        await store.commit_batch(batch)


async def until(condition: Callable[[], bool], within_s: float) -> bool:
    """Poll ``condition`` until it holds (True) or ``within_s`` passed (False)."""
    deadline = time.monotonic() + within_s
    while not condition():  # bounded by the deadline
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def file_holds(path: Path, size: int, within_s: float) -> bool:
    return await until(lambda: path.stat().st_size >= size, within_s)


def test_the_wal_is_copied_into_the_file_while_the_store_is_open(tmp_path: Path) -> None:
    assert MESSAGES * ENVELOPE_BYTES < WAL_CHECKPOINT_BYTES / 8

    async def body() -> None:
        store = await open_with_channel(tmp_path)
        try:
            assert store.checkpointer is not None and store.checkpointer.alive
            await write_messages(store)
            # The writer never reached its own threshold: only the background
            # thread can have put the envelopes into the main file. Its counters
            # move when a pass has returned (the file may be extended to its
            # final size before the pages are copied, so its size alone says less).
            checkpointer = store.checkpointer
            assert await until(
                lambda: checkpointer.frames_copied * 16384 >= MESSAGES * ENVELOPE_BYTES, 60
            )
            assert checkpointer.passes >= 1
            assert (tmp_path / DB_FILENAME).stat().st_size >= MESSAGES * ENVELOPE_BYTES
            assert checkpointer.failures == 0
            assert await store.count_messages("general") == MESSAGES
        finally:
            await store.close()

    run(body)


def test_without_it_the_envelopes_stay_in_the_wal(tmp_path: Path) -> None:
    async def body() -> None:
        store = await Store.open(tmp_path, background_checkpoints=False)
        try:
            await store.join_channel("general", b"topic-general", is_public=True, now_ms=1)
            assert store.checkpointer is None
            assert not checkpoint_threads()
            await write_messages(store)
            assert not await file_holds(tmp_path / DB_FILENAME, MESSAGES * ENVELOPE_BYTES, 1.0)
        finally:
            await store.close()

    run(body)


def test_close_stops_the_thread_and_removes_the_wal(tmp_path: Path) -> None:
    async def body() -> None:
        store = await open_with_channel(tmp_path)
        checkpointer = store.checkpointer
        assert checkpointer is not None
        await write_messages(store)
        await store.close()
        assert not checkpointer.alive
        assert not checkpoint_threads()
        # The writer's connection closed last, alone: it copied the rest and
        # deleted the WAL.
        assert not (tmp_path / (DB_FILENAME + "-wal")).exists()
        reopened = await Store.open(tmp_path)
        try:
            assert await reopened.count_messages("general") == MESSAGES
        finally:
            await reopened.close()

    run(body)


def test_a_failing_checkpoint_is_counted_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "not-a-database"
    path.write_bytes(b"this is not SQLite" * 100)
    checkpointer = Checkpointer(path, delay_s=0.0)
    checkpointer.start()
    try:
        checkpointer.poke()
        deadline = time.monotonic() + 30
        while checkpointer.failures == 0 and time.monotonic() < deadline:  # bounded
            time.sleep(0.02)
        assert checkpointer.failures >= 1
        assert checkpointer.last_error is not None and "DatabaseError" in checkpointer.last_error
    finally:
        checkpointer.stop()
    assert not checkpointer.alive
