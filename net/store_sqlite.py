"""The SQLite engine of the store peer's archive (:class:`net.store_engine.Archive`): one
file on one machine, the default.

Envelopes live in the ``archive`` table of the store's data directory
(:mod:`storage.archive`: keyed by hash, indexed by ``(topic, arrival_ms, hash)``);
a range is an indexed scan, a count one indexed count. Retention deletes by the
store's rule (:meth:`storage.archive.EnvelopeArchive.trim`) and gives the freed
pages back to the file system (incremental vacuum, WAL truncated). The archive's
id is 16 random bytes kept in ``<data dir>/archive_id`` (made on first open), so a
client that moves its position between stores knows two SQLite stores apart.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from net.store_engine import ArchiveUnavailable, Cursor, RetentionRun
from storage import ArchivedEnvelope, DiskFullError, Store
from storage.retention import RetentionRule

__all__ = ["ARCHIVE_ID_FILE", "SqliteArchive"]

ARCHIVE_ID_FILE = "archive_id"
"""The file of a store's data directory that names its SQLite archive (32 hex digits)."""

_HASH_CHUNK = 32  # hashes per database call of a by-hash query


def _incremental_vacuum_mode(db: sqlite3.Connection) -> None:
    """Make the archive's file able to shrink: ``auto_vacuum = INCREMENTAL`` (a store
    made before it is rewritten once, by VACUUM, which that setting needs)."""
    if int(db.execute("PRAGMA auto_vacuum").fetchone()[0]) != 2:
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        db.execute("VACUUM")


def _file_bytes(db: sqlite3.Connection) -> int:
    page_size = int(db.execute("PRAGMA page_size").fetchone()[0])
    return page_size * int(db.execute("PRAGMA page_count").fetchone()[0])


def _give_back_free_pages(db: sqlite3.Connection) -> tuple[int, int]:
    """After retention deleted envelopes: return the free pages to the file system
    (incremental vacuum) and truncate the WAL; ``(file bytes before, after)``."""
    before = _file_bytes(db)
    # executescript steps the pragma to the end; execute() would free one page per call
    db.executescript("PRAGMA incremental_vacuum;")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return before, _file_bytes(db)


def _newest_arrival(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT coalesce(max(arrival_ms), 0) FROM archive").fetchone()[0])


def _read_archive_id(data_dir: Path) -> bytes:
    path = data_dir / ARCHIVE_ID_FILE
    try:
        return bytes.fromhex(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        pass
    new = secrets.token_bytes(16)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(new.hex() + "\n")
    os.replace(tmp, path)
    return new


class SqliteArchive:
    """The archive in ``data_dir``'s SQLite database (see the module docstring).

    Raises (from :meth:`open`): :class:`storage.DataDirLockedError`,
    :class:`storage.StorageError` (newer schema, damaged file, unusable directory).
    """

    engine = "sqlite"

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._store: Store | None = None
        self._id = b""

    @property
    def store(self) -> Store:
        """The open :class:`storage.Store` (its ``archive`` holds the envelopes)."""
        if self._store is None:
            raise RuntimeError("archive not open")
        return self._store

    @property
    def archive_id(self) -> bytes:
        return self._id

    async def open(self) -> None:
        self._store = await Store.open(self.data_dir)
        try:
            await self._store._call(_incremental_vacuum_mode)
            self._id = _read_archive_id(self.data_dir)
        except BaseException:
            await self._store.close()
            self._store = None
            raise

    async def close(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            await store.close()

    async def put(self, items: Sequence[ArchivedEnvelope]) -> int:
        try:
            return await self.store.archive.put_many(items)
        except DiskFullError as exc:
            raise ArchiveUnavailable(str(exc), full=True) from exc

    async def by_hashes(self, hashes: Sequence[bytes]) -> dict[bytes, ArchivedEnvelope]:
        found: dict[bytes, ArchivedEnvelope] = {}
        for start in range(0, len(hashes), _HASH_CHUNK):
            found.update(await self.store.archive.get_by_hashes(hashes[start:start + _HASH_CHUNK]))
        return found

    async def range(
        self,
        topic: bytes,
        *,
        since_ms: int = 0,
        cursor: Cursor | None = None,
        limit: int = 100,
        reader: object = None,
    ) -> list[ArchivedEnvelope]:
        return await self.store.archive.range(topic, since_ms=since_ms, cursor=cursor,
                                              limit=limit)  # fmt: skip

    async def count(
        self, topic: bytes, *, since_ms: int = 0, until_ms: int = 0, cursor: Cursor | None = None
    ) -> int:
        """One indexed count (``archive_by_topic``), on the store's connection."""
        sql = "SELECT count(*) FROM archive WHERE topic = ? AND arrival_ms >= ?"
        params: list[object] = [topic, since_ms]
        if cursor is not None:
            sql += " AND (arrival_ms, hash) > (?, ?)"
            params += [cursor[0], cursor[1]]
        if until_ms:
            sql += " AND arrival_ms < ?"
            params.append(until_ms)

        def query(db: sqlite3.Connection) -> int:
            return int(db.execute(sql, params).fetchone()[0])

        return await self.store._call(query)

    async def oldest_arrival(self) -> int:
        def query(db: sqlite3.Connection) -> int:
            return int(db.execute("SELECT coalesce(min(arrival_ms), 0) FROM archive")
                       .fetchone()[0])  # fmt: skip

        return await self.store._call(query)

    async def newest_arrival(self) -> int:
        return await self.store._call(_newest_arrival)

    async def stats(self) -> tuple[int, int]:
        return await self.store.archive.stats()

    async def run_retention(self, rule: RetentionRule, now_ms: int) -> RetentionRun:
        archive = self.store.archive
        deleted = 0
        cutoff = rule.age_cutoff(now_ms)
        if cutoff is not None:
            deleted += await archive.delete_older_than(cutoff)
        if rule.max_bytes > 0:
            _count, size = await archive.stats()
            if size > rule.max_bytes:
                deleted += await archive.trim(rule)
        if not deleted:
            return RetentionRun()
        before, after = await self.store._call(_give_back_free_pages)
        return RetentionRun(deleted, file_bytes_before=before, file_bytes=after,
                            vacuumed_bytes=max(0, before - after))  # fmt: skip

    def release(self, reader: object) -> None:
        return None
