"""Opening the database: migrations, refusal of newer/corrupt files, the data-dir lock."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
from pathlib import Path

import pytest
from storage_testkit import file_digest, msg, open_with_channel, python_child, run

from storage import (
    DB_FILENAME,
    LOCK_FILENAME,
    SCHEMA_VERSION,
    CorruptDatabaseError,
    DataDirLockedError,
    NewerSchemaError,
    StorageError,
    Store,
    StoreClosedError,
)
from storage.database import PAGE_SIZE, SMALL_PAGE_SIZE, inspect_file
from storage.schema import APPLICATION_ID, MIGRATIONS, migrate, schema_version

CHILD_TIMEOUT_S = 30


def page_size_of(db_path: Path) -> int:
    """The page size in the database header (big-endian u16 at offset 16; 1 means 65536)."""
    size = int.from_bytes(db_path.read_bytes()[16:18], "big")
    return 65536 if size == 1 else size

def make_db(data_dir: Path, messages: int = 0) -> Path:
    """Create a real database (with ``messages`` rows) and close it; return its path."""

    async def body() -> None:
        store = await open_with_channel(data_dir)
        async with store:
            await store.insert_messages(
                msg(i, 1000 + i, content=b"x" * 300) for i in range(messages)
            )

    run(body)
    return data_dir / DB_FILENAME


def test_new_data_dir_is_created_and_migrated(tmp_path: Path) -> None:
    data_dir = tmp_path / "nested" / "data"

    async def body() -> None:
        async with await Store.open(data_dir) as store:
            assert store.migrated_from == 0
            assert store.schema_version == SCHEMA_VERSION

    run(body)
    db_path = data_dir / DB_FILENAME
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    with sqlite3.connect(db_path) as db:
        assert schema_version(db) == SCHEMA_VERSION == len(MIGRATIONS)
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"identity", "channels", "messages", "outbox", "core_state", "events", "archive"} <= (
        tables
    )

    async def reopen() -> None:
        async with await Store.open(data_dir) as store:
            assert store.migrated_from == SCHEMA_VERSION

    run(reopen)


def test_appended_migration_runs_once_and_failed_one_rolls_back(tmp_path: Path) -> None:
    db_path = make_db(tmp_path / "d")

    def migration_2(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE messages ADD COLUMN edited_at INTEGER")

    def broken_3(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE half_done (x INTEGER)")
        raise RuntimeError("migration bug")

    v = SCHEMA_VERSION
    db = sqlite3.connect(db_path, isolation_level=None)
    try:
        assert migrate(db, db_path, (*MIGRATIONS, migration_2)) == (v, v + 1)
        assert schema_version(db) == v + 1
        assert migrate(db, db_path, (*MIGRATIONS, migration_2)) == (v + 1, v + 1)  # nothing
        with pytest.raises(RuntimeError):
            migrate(db, db_path, (*MIGRATIONS, migration_2, broken_3))
        assert schema_version(db) == v + 1
        assert (
            db.execute("SELECT name FROM sqlite_master WHERE name='half_done'").fetchone() is None
        )
        columns = {r[1] for r in db.execute("PRAGMA table_info(messages)")}
        assert "edited_at" in columns
    finally:
        db.close()


def test_a_new_file_gets_the_page_size_asked_for_and_an_existing_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    """``Store.open(page_size=...)``: small pages for small envelopes (a node's one-message
    transactions write whole pages to the WAL); the default stays 16 KB; a file made
    earlier keeps the size it was made with."""
    small, default = tmp_path / "small", tmp_path / "default"

    async def body() -> None:
        async with await open_with_channel(small) as store:  # default first: 16 KB
            pass
        async with await Store.open(default, page_size=SMALL_PAGE_SIZE) as store:
            await store.join_channel("general", b"topic-general", is_public=True, now_ms=1)
            await store.insert_messages([msg(i, i) for i in range(1, 50)])
        async with await Store.open(small, page_size=SMALL_PAGE_SIZE) as store:
            await store.insert_messages([msg(1, 1)])  # reopened: still 16 KB pages

    run(body)
    assert page_size_of(small / DB_FILENAME) == PAGE_SIZE == 16384
    assert page_size_of(default / DB_FILENAME) == SMALL_PAGE_SIZE == 4096


@pytest.mark.parametrize("page_size", [0, 1000, 256, 131072])
def test_a_bad_page_size_is_refused_before_anything_is_created(
    tmp_path: Path, page_size: int
) -> None:
    data_dir = tmp_path / "d"

    async def body() -> None:
        with pytest.raises(ValueError, match=f"power of two from 512 to 65536, not {page_size}"):
            await Store.open(data_dir, page_size=page_size)

    run(body)
    assert not data_dir.exists()


def test_newer_schema_is_refused_and_file_untouched(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    db_path = make_db(data_dir, messages=3)
    with sqlite3.connect(db_path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = file_digest(db_path)

    async def body() -> None:
        with pytest.raises(NewerSchemaError) as info:
            await Store.open(data_dir)
        assert info.value.found_version == SCHEMA_VERSION + 1
        assert info.value.supported_version == SCHEMA_VERSION
        assert f"schema version {SCHEMA_VERSION + 1}" in str(info.value)
        assert f"up to {SCHEMA_VERSION}" in str(info.value)
        # The lock was released: the next attempt fails the same way, not with "locked".
        with pytest.raises(NewerSchemaError):
            await Store.open(data_dir)

    run(body)
    assert file_digest(db_path) == before


@pytest.mark.parametrize("version", [-5, 0])
def test_invalid_schema_version_is_refused_and_file_untouched(
    tmp_path: Path, version: int
) -> None:
    """A populated file whose user_version is negative or 0 (never written by our
    migrations) is damaged: a clear refusal, not a traceback from a migration midway."""
    data_dir = tmp_path / "d"
    db_path = make_db(data_dir, messages=3)
    with sqlite3.connect(db_path) as db:
        db.execute(f"PRAGMA user_version = {version}")
    before = file_digest(db_path)

    async def body() -> None:
        with pytest.raises(CorruptDatabaseError, match=f"schema version {version} is not valid"):
            await Store.open(data_dir)

    run(body)
    assert file_digest(db_path) == before


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(os.urandom(16384), id="random-16k"),
        pytest.param(b"hello", id="tiny"),
        pytest.param(b"SQLite format 3\x00" + b"\xff" * 200, id="header-then-garbage"),
        pytest.param(b"not a database at all\n" * 500, id="text"),
    ],
)
def test_garbage_file_is_corrupt_and_untouched(tmp_path: Path, content: bytes) -> None:
    data_dir = tmp_path / "d"
    data_dir.mkdir()
    db_path = data_dir / DB_FILENAME
    db_path.write_bytes(content)

    async def body() -> None:
        with pytest.raises(CorruptDatabaseError) as info:
            await Store.open(data_dir)
        assert str(db_path) in str(info.value)

    run(body)
    assert db_path.read_bytes() == content
    assert sorted(p.name for p in data_dir.iterdir()) == sorted([DB_FILENAME, LOCK_FILENAME])


@pytest.mark.parametrize("cut", ["half-pages", "odd-bytes", "header-only"])
def test_truncated_file_is_corrupt_and_untouched(tmp_path: Path, cut: str) -> None:
    data_dir = tmp_path / "d"
    db_path = make_db(data_dir, messages=200)
    size = db_path.stat().st_size
    page = page_size_of(db_path)
    new_size = {
        "half-pages": (size // 2) // page * page,
        "odd-bytes": size - 1000,
        "header-only": 60,
    }
    with db_path.open("r+b") as f:
        f.truncate(new_size[cut])
    before = file_digest(db_path)

    async def body() -> None:
        with pytest.raises(CorruptDatabaseError, match="truncated"):
            await Store.open(data_dir)

    run(body)
    assert file_digest(db_path) == before


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    data_dir.mkdir()
    db_path = data_dir / DB_FILENAME
    with sqlite3.connect(db_path) as db:
        db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    before = file_digest(db_path)

    async def body() -> None:
        with pytest.raises(CorruptDatabaseError, match="not an sdschat one"):
            await Store.open(data_dir)

    run(body)
    assert file_digest(db_path) == before


def test_damaged_pages_fail_the_integrity_check(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    db_path = make_db(data_dir, messages=300)
    data = bytearray(db_path.read_bytes())
    page = page_size_of(db_path)
    pages = len(data) // page
    assert pages > 6
    for p in range(2, pages - 1, 2):  # scribble over every other page, keep the header page
        data[p * page + 8 : p * page + 200] = os.urandom(192)
    db_path.write_bytes(bytes(data))

    async def body() -> None:
        with pytest.raises(CorruptDatabaseError):
            store = await Store.open(data_dir, integrity_check=True)
            await store.close()

    run(body)


def test_check_integrity_passes_on_a_healthy_store(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            await store.insert_messages([msg(1, 5)])
            await store.check_integrity()

    run(body)


def test_second_opener_in_same_process_is_locked_out(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"

    async def body() -> None:
        first = await Store.open(data_dir)
        with pytest.raises(DataDirLockedError) as info:
            await Store.open(data_dir)
        assert info.value.holder_pid == os.getpid()
        assert isinstance(info.value, StorageError)
        await first.close()
        second = await Store.open(data_dir)  # released on close
        await second.close()

    run(body)


HOLD_LOCK = """
import asyncio, sys
from storage import Store

async def main():
    store = await Store.open(sys.argv[1] if len(sys.argv) > 1 else {data_dir!r})
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await store.close()
    print("closed", flush=True)

asyncio.run(main())
"""


def test_lock_held_by_another_process(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    child = python_child(HOLD_LOCK.format(data_dir=str(data_dir)))
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"

        async def locked_out() -> None:
            with pytest.raises(DataDirLockedError) as info:
                await Store.open(data_dir)
            assert info.value.holder_pid == child.pid

        run(locked_out)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "closed"
        assert child.wait(CHILD_TIMEOUT_S) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(CHILD_TIMEOUT_S)

    async def now_free() -> None:
        async with await Store.open(data_dir):
            pass

    run(now_free)


def test_lock_of_a_killed_process_is_released(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    child = python_child(HOLD_LOCK.format(data_dir=str(data_dir)))
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(CHILD_TIMEOUT_S) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(CHILD_TIMEOUT_S)

    async def reopen() -> None:
        async with await Store.open(data_dir) as store:
            assert store.migrated_from == SCHEMA_VERSION

    run(reopen)


def test_use_after_close_raises(tmp_path: Path) -> None:
    async def body() -> None:
        store = await Store.open(tmp_path / "d")
        await store.close()
        await store.close()  # idempotent
        assert store.closed
        with pytest.raises(StoreClosedError):
            await store.list_channels()

    run(body)


def test_short_file_with_pending_wal_is_left_to_sqlite(tmp_path: Path) -> None:
    # A crash in the middle of a checkpoint leaves exactly this (page 1 already
    # copied, later pages still only in the WAL): it must not be called truncated.
    db_path = make_db(tmp_path / "d", messages=200)
    with db_path.open("r+b") as f:
        page = page_size_of(db_path)
        f.truncate((db_path.stat().st_size // 2) // page * page)
    with pytest.raises(CorruptDatabaseError, match="truncated"):
        inspect_file(db_path)
    db_path.with_name(DB_FILENAME + "-wal").write_bytes(b"\0" * 32)
    inspect_file(db_path)  # no longer our call


def test_store_reopens_after_a_writer_is_killed_among_commits_and_checkpoints(
    tmp_path: Path,
) -> None:
    # Many small commits so that automatic checkpoints happen while the child is killed.
    data_dir = tmp_path / "d"
    code = f"""
import asyncio
from storage import Store, StoredMessage

async def main():
    import storage.database
    storage.database.WAL_CHECKPOINT_BYTES = 1 << 20  # checkpoint often: several in 2,000 commits
    store = await Store.open({str(data_dir)!r})
    await store.join_channel("general", b"t", is_public=True)
    print("ready", flush=True)
    for i in range(100_000):
        await store.insert_messages([StoredMessage(
            "general", f"{{i:064x}}", "s", i, b"x" * 100, envelope=b"e" * 3000)])
        if i % 50 == 0:
            print(i, flush=True)

asyncio.run(main())
"""
    child = python_child(code)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        for _ in range(40):  # ~2,000 commits: several automatic checkpoints
            child.stdout.readline()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(CHILD_TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(CHILD_TIMEOUT_S)

    async def reopen() -> None:
        async with await Store.open(data_dir, integrity_check=True) as store:
            count = await store.count_messages("general")
            assert count >= 1950
            ids = [e.lamport async for e in store.iter_log("general", page_size=1000)]
            assert ids == list(range(count))  # a prefix of what was written, no holes

    run(reopen)


def test_unusable_data_directory_is_a_storage_error(tmp_path: Path) -> None:
    """A file where the data directory should be, or a directory where the database
    should be: DataDirUnusableError naming what is wrong (callers exit 4), no OSError."""
    from storage import DataDirUnusableError

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    db_is_dir = tmp_path / "d"
    (db_is_dir / "sdschat.db").mkdir(parents=True)

    async def body() -> None:
        with pytest.raises(DataDirUnusableError, match="a_file is a file, not a directory"):
            await Store.open(a_file)
        with pytest.raises(DataDirUnusableError, match=r"sdschat\.db: is a directory"):
            await Store.open(db_is_dir)
        # the lock was released: the same error again, not "in use"
        with pytest.raises(DataDirUnusableError):
            await Store.open(db_is_dir)

    run(body)
    assert a_file.read_text() == "x"
