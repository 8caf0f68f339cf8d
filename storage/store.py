"""The :class:`Store`: one sdschat data directory's SQLite database, used from asyncio.

Every public method is *one* awaited call: the whole operation (all its rows,
its transaction) runs as a single function on aiosqlite's connection thread.
aiosqlite costs ~65 µs per awaited call, so callers batch: pass many ids or
rows at once, and put everything one core call produced into one
:class:`~storage.batch.Batch`.

Calls are serialised on the one connection, so transactions never
interleave. A call whose awaiting task is cancelled still runs to the end
(commit or rollback) on the connection thread: atomic either way.

Usage::

    async with await Store.open(data_dir) as store:
        await store.join_channel("general", topic, is_public=True)
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

import aiosqlite

from .archive import EnvelopeArchive
from .batch import Batch, BatchResult, RecentWindow, apply_batch, existing_ids
from .checkpoint import Checkpointer
from .database import (
    DB_FILENAME,
    PAGE_SIZE,
    VALID_PAGE_SIZES,
    inspect_file,
    last_run_unclean,
    prepare,
    transaction,
    translate_error,
    wall_ms,
)
from .erasure import erasing, wipe_wal
from .errors import (
    CorruptDatabaseError,
    DataDirUnusableError,
    StoreClosedError,
    ValueOutOfRangeError,
)
from .lock import DataDirLock
from .records import (
    DAMAGED_CONTENT,
    Channel,
    Cursor,
    EventRow,
    Identity,
    LogEntry,
    OwnState,
    PendingMessage,
    StoredEvent,
    StoredMessage,
    check_lamport,
    decode_causal_history,
    message_digest,
    recent_checksum,
    segment_file_id,
)
from .schema import DEFAULT_RECENT_WINDOW

T = TypeVar("T")

_LOG_COLUMNS = (
    "channel, message_id, sender_id, lamport, content, state, delivered_at, received_at, digest, "
    "was_lost, recovered, missing_before"
)
_FULL_COLUMNS = (
    "m.channel, m.message_id, m.sender_id, m.lamport, m.state, m.delivered_at, m.received_at, "
    "m.content, m.retrieval_hint, m.digest, r.causal_history, r.envelope, m.was_lost, "
    "m.recovered, m.missing_before"
)

#: The segment rows of one file of one author, in SDS order: a range of the
#: ``messages_by_file`` index (schema 7); ``INDEXED BY`` makes SQLite refuse rather
#: than fall back to a scan of the log.
FILE_SEGMENTS_SQL = (
    f"SELECT {_LOG_COLUMNS} FROM messages INDEXED BY messages_by_file "
    "WHERE channel = ? AND file_id = ? AND sender_id = ? ORDER BY lamport, message_id LIMIT ?"
)

logger = logging.getLogger(__name__)


def row_intact(channel: str, message_id: str, sender_id: str, lamport: int, content: bytes,
               digest: bytes | None) -> bool:
    """Whether a message row still matches its stored digest."""
    return digest is not None and message_digest(
        channel, message_id, sender_id, lamport, content
    ) == digest
_EVENT_COLUMNS = "id, wall_ms, kind, channel, message_id, sender_id, lamport, size_bytes, detail"


def log_entry(row: tuple[Any, ...]) -> LogEntry:
    """A :class:`LogEntry` from a row of ``_LOG_COLUMNS``, checked against its digest.

    A row that fails the check (file damage) is returned with ``damaged=True``
    and :data:`DAMAGED_CONTENT` (logged as a warning), never with its bytes as
    text. A row whose state is not a valid state is damaged too.
    """
    content = bytes(row[4])
    was_lost = row[9] == 1
    recovered, missing_before = row[10] == 1, _count(row[11])
    try:
        intact = row_intact(row[0], row[1], row[2], row[3], content, row[8])
        state = None if row[5] is None else OwnState(row[5])
    except (TypeError, ValueError, UnicodeError, OverflowError):
        intact, state = False, None
    if not intact:
        logger.warning(
            "damaged message row in channel %r: %r (run sdschat doctor)", row[0], row[1]
        )
        return LogEntry(
            channel=str(row[0]),
            message_id=str(row[1]),
            sender_id=str(row[2]),
            lamport=row[3] if isinstance(row[3], int) else -1,
            content=DAMAGED_CONTENT,
            state=None,
            delivered_at=row[6] if isinstance(row[6], int) else None,
            received_at=row[7] if isinstance(row[7], int) else 0,
            damaged=True,
            was_lost=was_lost,
            recovered=recovered,
            missing_before=missing_before,
        )
    return LogEntry(
        channel=row[0],
        message_id=row[1],
        sender_id=row[2],
        lamport=row[3],
        content=content,
        state=state,
        delivered_at=row[6],
        received_at=row[7],
        was_lost=was_lost,
        recovered=recovered,
        missing_before=missing_before,
    )


def _count(value: object) -> int:
    """A stored count (``missing_before``): 0 for anything but an int >= 0 (damage)."""
    return value if isinstance(value, int) and value >= 0 else 0


_log_entry = log_entry


def _check_limit(limit: int) -> None:
    if limit < 0:
        raise ValueError("limit must be >= 0")


def _check_cursor(cursor: Cursor | None) -> None:
    # -1 is allowed: (-1, "") sorts before every message.
    if cursor is not None and cursor[0] != -1:
        check_lamport(cursor[0])


async def _run_on(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn(sqlite3 connection)`` on aiosqlite's connection thread: one awaited call.

    aiosqlite's public API awaits once per statement; ``Connection._execute``
    (present since aiosqlite's first releases, and what every public method
    uses) runs an arbitrary function in the thread that owns the connection.
    This is the only place storage relies on it.

    ``fn`` is handed over in a box the thread empties as it calls it: aiosqlite's
    thread keeps the last function it ran referenced while it waits for the next
    one, and ``fn`` holds what it writes (a commit's batch, with every channel's
    exported core state: 15 MB with 5,000 own lines pending), which stayed in memory
    until the next call.
    """
    execute = cast(Callable[[Callable[[], T]], Awaitable[T]], conn._execute)
    box = [fn]

    def once() -> T:
        return box.pop()(conn._conn)

    return await execute(once)


def _os_reason(error: OSError, where: Path) -> str:
    """``"sdschat.db is a directory"``, ``"read-only file system"``: what an OSError means here."""
    if isinstance(error, FileExistsError) and not where.is_dir():
        return f"{where.name} is a file, not a directory"
    what = error.strerror or type(error).__name__
    name = Path(error.filename).name if error.filename else where.name
    return f"{name}: {what[0].lower()}{what[1:]}" if what else name


class Store:
    """An open sdschat database (``<data_dir>/sdschat.db``) holding the data-dir lock.

    Open with ``await Store.open(data_dir)``; close with ``await store.close()``
    or use it as an async context manager. See the module docstring for the
    cost model and :mod:`storage.batch` for the send protocol.
    """

    def __init__(
        self,
        data_dir: Path,
        conn: aiosqlite.Connection,
        lock: DataDirLock,
        migrated_from: int,
        schema_version: int,
        recent_window: int = DEFAULT_RECENT_WINDOW,
        integrity_checked: bool = False,
    ) -> None:
        """Use :meth:`open`."""
        self.data_dir = data_dir
        self.path = data_dir / DB_FILENAME
        self.migrated_from = migrated_from
        """Schema version found at open (0 for a new file)."""
        self.schema_version = schema_version
        """Schema version of the file now."""
        self._conn: aiosqlite.Connection | None = conn
        self._lock = lock
        self.recent = RecentWindow(recent_window)
        """How many of each channel's newest messages keep envelope and causal history."""
        self.integrity_checked = integrity_checked
        """Whether :meth:`open` ran ``PRAGMA quick_check`` (asked, or the last run was unclean)."""
        self.checkpointer: Checkpointer | None = None
        """Copies the WAL into the file in the background (see :mod:`storage.checkpoint`)."""
        self.archive = EnvelopeArchive(self._call, self.commit_batch)
        """The store peer's envelope archive (:class:`~storage.archive.EnvelopeArchive`)."""
        # Calls handed to aiosqlite's thread, and calls it finished: each counter is
        # written by one thread only (the loop, the connection's thread), so equal
        # counts mean the connection is idle (see :meth:`commit_batch_now`).
        self._submitted = 0
        self._finished = 0
        self.wipes = 0
        """WAL wipes right after an erasure (:mod:`storage.erasure`) that succeeded."""
        self._wipe_owed = False

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        data_dir: str | os.PathLike[str],
        *,
        integrity_check: bool | None = None,
        background_checkpoints: bool = True,
        recent_window: int = DEFAULT_RECENT_WINDOW,
        page_size: int = PAGE_SIZE,
    ) -> Store:
        """Open (creating if needed) the database of ``data_dir`` and lock the directory.

        Creates ``data_dir`` (mode 0700) and ``sdschat.db`` (mode 0600) if
        missing, checks the file, migrates it to the current schema.
        ``integrity_check=True`` also runs ``PRAGMA quick_check`` (reads the
        whole file: a second or so for a large history; :meth:`check_integrity`
        does the same later); the default (``None``) runs it when the last
        process that used the file did not close it (it left its WAL behind:
        ``kill -9``, a crash, power loss). ``recent_window``: how many of each
        channel's newest messages keep their envelope and causal history
        (:class:`~storage.batch.RecentWindow`); older ones keep a compact row.
        ``background_checkpoints`` (the default) copies the WAL into the file on
        a thread of its own instead of in the middle of a commit
        (:class:`~storage.checkpoint.Checkpointer`). ``page_size``: SQLite's page
        size if the file is new (:data:`~storage.database.PAGE_SIZE`, 16 KB, suits
        large envelopes; :data:`~storage.database.SMALL_PAGE_SIZE` small ones); an
        existing file keeps its own.

        Raises :class:`ValueError` (``page_size`` not a power of two from 512 to
        65536, before anything is created),
        :class:`~storage.errors.DataDirLockedError` (another instance holds the
        directory), :class:`~storage.errors.CorruptDatabaseError`
        (not an sdschat database, truncated, damaged) or
        :class:`~storage.errors.NewerSchemaError`; in the last two cases the
        file has not been modified.
        """
        if page_size not in VALID_PAGE_SIZES:
            raise ValueError(
                f"page size must be a power of two from 512 to 65536, not {page_size}"
            )
        directory = Path(data_dir)
        path = directory / DB_FILENAME
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            lock = DataDirLock.acquire(directory)
        except OSError as e:
            raise DataDirUnusableError(directory, _os_reason(e, directory)) from e
        try:
            try:
                inspect_file(path)
                if integrity_check is None:
                    integrity_check = path.exists() and last_run_unclean(path)
                if not path.exists():
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except OSError as e:
                raise DataDirUnusableError(directory, _os_reason(e, path)) from e
            try:
                # check_same_thread=False: commit_batch_now uses the connection from
                # the loop's thread while aiosqlite's thread is idle (never both at once).
                conn = await aiosqlite.connect(path, isolation_level=None, check_same_thread=False)
            except sqlite3.Error as e:
                raise translate_error(e, path) from e
            try:
                found, now = await _run_on(
                    conn, lambda db: prepare(db, path, integrity_check=integrity_check,
                                      page_size=page_size)
                )
            except sqlite3.Error as e:
                await conn.close()
                raise translate_error(e, path) from e
            except BaseException:
                await conn.close()
                raise
        except BaseException:
            lock.release()
            raise
        store = cls(
            directory, conn, lock, found, now, recent_window, integrity_checked=integrity_check
        )
        if background_checkpoints:
            store.checkpointer = Checkpointer(path)
            store.checkpointer.start()
        return store

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._conn is None

    async def close(self) -> None:
        """Close the database and release the data-dir lock (idempotent)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        checkpointer, self.checkpointer = self.checkpointer, None
        try:
            if checkpointer is not None:
                # First: the last connection to close copies what is left and
                # deletes the WAL, which it can only do alone.
                await asyncio.to_thread(checkpointer.stop)
            with contextlib.suppress(sqlite3.Error):  # an optimisation hint only
                await _run_on(conn, lambda db: db.execute("PRAGMA optimize"))
            await conn.close()
        except BaseException:
            # Cancelled (or failed) while closing: still end aiosqlite's worker
            # thread, which is not a daemon and would keep the process alive.
            if checkpointer is not None:
                checkpointer.stop(timeout=0)
            conn.stop()
            raise
        finally:
            self._lock.release()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise StoreClosedError(f"store {self.path} is closed")

        def counted(db: sqlite3.Connection) -> T:
            try:
                return fn(db)
            finally:
                self._finished += 1  # on the connection's thread, after the last use

        self._submitted += 1
        try:
            return await _run_on(conn, counted)
        except sqlite3.Error as e:
            raise translate_error(e, self.path) from e
        except OverflowError as e:  # an int column value outside SQLite's signed 64 bits
            raise ValueOutOfRangeError(f"{e} (SQLite integers are signed 64-bit)") from e
        finally:
            if self.checkpointer is not None:
                self.checkpointer.poke()

    async def check_integrity(self) -> None:
        """Run ``PRAGMA quick_check``; raise :class:`CorruptDatabaseError` if it finds damage."""

        def check(db: sqlite3.Connection) -> list[str]:
            return [str(r[0]) for r in db.execute("PRAGMA quick_check")]

        problems = await self._call(check)
        if problems != ["ok"]:
            raise CorruptDatabaseError(
                self.path, "integrity check failed: " + "; ".join(problems[:5])
            )

    # ------------------------------------------------------------------ identity

    async def save_identity(self, identity: Identity) -> None:
        """Store (replace) this data directory's identity."""

        def save(db: sqlite3.Connection) -> None:
            with transaction(db, durable=True):
                db.execute(
                    "INSERT INTO identity (id, display_name, sender_id, public_key, key_file, "
                    "updated_ms) VALUES (1,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET "
                    "display_name = excluded.display_name, sender_id = excluded.sender_id, "
                    "public_key = excluded.public_key, key_file = excluded.key_file, "
                    "updated_ms = excluded.updated_ms",
                    (
                        identity.display_name,
                        identity.sender_id,
                        bytes(identity.public_key),
                        identity.key_file,
                        wall_ms(),
                    ),
                )

        await self._call(save)

    async def load_identity(self) -> Identity | None:
        """This data directory's identity, or ``None`` before the first :meth:`save_identity`."""

        def load(db: sqlite3.Connection) -> Identity | None:
            row = db.execute(
                "SELECT display_name, sender_id, public_key, key_file FROM identity WHERE id = 1"
            ).fetchone()
            return None if row is None else Identity(*row)

        return await self._call(load)

    # ------------------------------------------------------------------ channels

    async def join_channel(
        self, name: str, topic: bytes, *, is_public: bool, now_ms: int | None = None
    ) -> Channel:
        """Join ``name`` (or rejoin it: clears ``left_at``, updates topic and ``joined_at``).

        Messages, outbox entries and core state of a channel can only be
        written once it has been joined.
        """
        at = wall_ms() if now_ms is None else now_ms

        def join(db: sqlite3.Connection) -> Channel:
            with transaction(db):
                db.execute(
                    "INSERT INTO channels (name, topic, is_public, joined_at, left_at) "
                    "VALUES (?,?,?,?,NULL) ON CONFLICT (name) DO UPDATE SET "
                    "topic = excluded.topic, is_public = excluded.is_public, "
                    "joined_at = CASE WHEN left_at IS NULL THEN joined_at "
                    "ELSE excluded.joined_at END, left_at = NULL",
                    (name, bytes(topic), int(is_public), at),
                )
                return _get_channel(db, name) or Channel(name, topic, is_public, at)

        return await self._call(join)

    async def leave_channel(self, name: str, now_ms: int | None = None) -> bool:
        """Mark ``name`` as left (its history stays). False if not currently joined."""
        at = wall_ms() if now_ms is None else now_ms

        def leave(db: sqlite3.Connection) -> bool:
            with transaction(db):
                return (
                    db.execute(
                        "UPDATE channels SET left_at = ? WHERE name = ? AND left_at IS NULL",
                        (at, name),
                    ).rowcount
                    == 1
                )

        return await self._call(leave)

    async def forget_channel(self, name: str) -> int:
        """Delete everything stored of channel ``name`` (it must have been left):
        messages, outbox, core state, its events, the channel row, overwritten
        (:mod:`storage.erasure`: zeroed in the file, the WAL emptied). Returns the number
        of messages deleted. The identity stays.

        Raises:
            ValueError: ``name`` is joined now (leave it first) or unknown here.
        """

        def forget(db: sqlite3.Connection) -> int:
            with erasing(db):
                row = db.execute("SELECT left_at FROM channels WHERE name = ?", (name,)).fetchone()
                if row is None:
                    raise ValueError(f"this data directory holds no channel {name!r}")
                if row[0] is None:
                    raise ValueError(f"#{name} is joined: /leave it first")
                n = db.execute("DELETE FROM messages WHERE channel = ?", (name,)).rowcount
                for table in ("recent", "outbox", "core_state", "events"):
                    db.execute(f"DELETE FROM {table} WHERE channel = ?", (name,))
                db.execute("DELETE FROM channels WHERE name = ?", (name,))
            self._wipe(db)
            return int(n)

        return await self._call(forget)

    async def list_channels(self, *, include_left: bool = False) -> list[Channel]:
        """Joined channels by name (and, with ``include_left``, those left)."""
        sql = "SELECT name, topic, is_public, joined_at, left_at FROM channels"
        if not include_left:
            sql += " WHERE left_at IS NULL"
        sql += " ORDER BY name"

        def query(db: sqlite3.Connection) -> list[Channel]:
            return [Channel(r[0], r[1], bool(r[2]), r[3], r[4]) for r in db.execute(sql)]

        return await self._call(query)

    async def get_channel(self, name: str) -> Channel | None:
        """The channel ``name`` (joined or left), or ``None`` if never joined."""
        return await self._call(lambda db: _get_channel(db, name))

    # ------------------------------------------------------------------ messages

    async def insert_messages(self, messages: Iterable[StoredMessage]) -> list[bool]:
        """Add messages to their channels' logs; one bool per input: True if it was new.

        Idempotent: a message whose ``(channel, message_id)`` is stored already
        (or appears earlier in the same call) is ignored and reported False,
        which is how replays are detected.
        """
        batch = Batch()
        batch.insert_messages(messages)
        if not batch.messages:
            return []
        result = await self.commit_batch(batch)
        remaining = set(result.new_messages)
        flags = []
        for m in batch.messages:
            key = (m.channel, m.message_id)
            flags.append(key in remaining)
            remaining.discard(key)
        return flags

    async def insert_message(self, message: StoredMessage) -> bool:
        """Add one message; True if it was new (see :meth:`insert_messages`)."""
        return (await self.insert_messages([message]))[0]

    async def page(
        self,
        channel: str,
        *,
        before: Cursor | None = None,
        after: Cursor | None = None,
        limit: int = 50,
    ) -> list[LogEntry]:
        """A page of ``channel``'s log, in SDS order (ascending ``(lamport, message_id)``).

        * neither cursor: the newest ``limit`` messages;
        * ``before``: the ``limit`` messages just before that cursor (scrolling up);
        * ``after``: the ``limit`` messages just after it (scrolling down);
        * both: the first ``limit`` strictly between them.

        Cursors are exclusive; use ``entry.cursor`` of the first/last entry. One
        index range scan: milliseconds at any history size.
        """
        _check_limit(limit)
        _check_cursor(before)
        _check_cursor(after)
        where = "channel = ?"
        params: list[object] = [channel]
        if before is not None:
            where += " AND (lamport, message_id) < (?, ?)"
            params += [before[0], before[1]]
        if after is not None:
            where += " AND (lamport, message_id) > (?, ?)"
            params += [after[0], after[1]]
        descending = after is None
        order = "lamport DESC, message_id DESC" if descending else "lamport, message_id"
        sql = f"SELECT {_LOG_COLUMNS} FROM messages WHERE {where} ORDER BY {order} LIMIT ?"
        params.append(limit)

        def query(db: sqlite3.Connection) -> list[LogEntry]:
            rows = [_log_entry(r) for r in db.execute(sql, params)]
            if descending:
                rows.reverse()
            return rows

        return await self._call(query)

    async def iter_log(self, channel: str, *, page_size: int = 500) -> AsyncIterator[LogEntry]:
        """The whole log of ``channel`` in SDS order, fetched ``page_size`` rows per call."""
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        cursor: Cursor = (-1, "")
        while True:
            rows = await self.page(channel, after=cursor, limit=page_size)
            for row in rows:
                yield row
            if len(rows) < page_size:
                return
            cursor = rows[-1].cursor

    async def count_messages(self, channel: str) -> int:
        """Number of messages stored for ``channel``."""

        def query(db: sqlite3.Connection) -> int:
            row = db.execute("SELECT count(*) FROM messages WHERE channel = ?", (channel,))
            return int(row.fetchone()[0])

        return await self._call(query)

    async def has_ids(self, channel: str, message_ids: Iterable[str]) -> set[str]:
        """The subset of ``message_ids`` stored in ``channel`` (one query for any number).

        For dependency checks beyond the core's in-memory window.
        """
        ids = list(message_ids)
        if not ids:
            return set()
        return await self._call(lambda db: existing_ids(db, channel, ids))

    async def sender_ids(self, channel: str, sender_id: str) -> list[str]:
        """The ids of every message of ``sender_id`` stored in ``channel`` (a members
        channel's removal names them: its cut)."""

        def query(db: sqlite3.Connection) -> list[str]:
            rows = db.execute("SELECT message_id FROM messages WHERE channel = ? AND sender_id = ?",
                              (channel, sender_id))  # fmt: skip
            return [str(r[0]) for r in rows]

        return await self._call(query)

    async def get_envelopes(self, channel: str, message_ids: Iterable[str]) -> dict[str, bytes]:
        """Stored envelopes by message id (ids unknown, without an envelope, or older
        than the recent window and not pinned are absent)."""
        ids = json.dumps(list(message_ids))

        def query(db: sqlite3.Connection) -> dict[str, bytes]:
            return {
                r[0]: r[1]
                for r in db.execute(
                    "SELECT message_id, envelope FROM recent WHERE channel = ? "
                    "AND envelope IS NOT NULL "
                    "AND message_id IN (SELECT value FROM json_each(?))",
                    (channel, ids),
                )
            }

        return await self._call(query)

    async def get_messages(
        self, channel: str, message_ids: Iterable[str]
    ) -> dict[str, StoredMessage]:
        """Full stored messages by id: causal history and envelope only while the message
        is in the recent window (or pinned), ``()``/``None`` after. A row that fails
        its digest has :data:`DAMAGED_CONTENT` as content and no envelope."""
        ids = json.dumps(list(message_ids))

        def query(db: sqlite3.Connection) -> dict[str, StoredMessage]:
            out: dict[str, StoredMessage] = {}
            for r in db.execute(
                f"SELECT {_FULL_COLUMNS} FROM messages m LEFT JOIN recent r "
                "ON r.channel = m.channel AND r.message_id = m.message_id "
                "WHERE m.channel = ? AND m.message_id IN (SELECT value FROM json_each(?))",
                (channel, ids),
            ):
                content = bytes(r[7])
                intact = row_intact(r[0], r[1], r[2], r[3], content, r[9])
                if not intact:
                    logger.warning("damaged message row in channel %r: %r", r[0], r[1])
                out[r[1]] = StoredMessage(
                    channel=r[0],
                    message_id=r[1],
                    sender_id=r[2],
                    lamport=r[3],
                    state=None if r[4] is None else OwnState(r[4]),
                    delivered_at=r[5],
                    received_at=r[6],
                    content=content if intact else DAMAGED_CONTENT,
                    retrieval_hint=r[8],
                    causal_history=decode_causal_history(r[10]) if intact else (),
                    envelope=r[11] if intact else None,
                    was_lost=r[12] == 1,
                    recovered=r[13] == 1,
                    missing_before=_count(r[14]),
                )
            return out

        return await self._call(query)

    async def search(
        self,
        channel: str,
        text: str,
        *,
        before: Cursor | None = None,
        limit: int = 50,
        sender_id: str | None = None,
    ) -> list[LogEntry]:
        """Messages of ``channel`` whose content contains ``text``, NEWEST FIRST.

        Case-insensitive for ASCII (SQL ``LIKE``; ``%`` and ``_`` in ``text``
        are literal). Next page: ``before=result[-1].cursor``. Scans the
        channel's rows (no full-text index): tens of ms per 100,000 messages,
        plus the reading of every large content (file segments). With
        ``sender_id``, only that author's messages: others' contents are not read.
        """
        _check_limit(limit)
        _check_cursor(before)
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        sql = (
            f"SELECT {_LOG_COLUMNS} FROM messages WHERE channel = ? "
            + ("AND sender_id = ? " if sender_id is not None else "")
            + "AND CAST(content AS TEXT) LIKE ? ESCAPE '\\'"
        )
        params: list[object] = [channel]
        if sender_id is not None:
            params.append(sender_id)
        params.append(pattern)
        if before is not None:
            sql += " AND (lamport, message_id) < (?, ?)"
            params += [before[0], before[1]]
        sql += " ORDER BY lamport DESC, message_id DESC LIMIT ?"
        params.append(limit)

        def query(db: sqlite3.Connection) -> list[LogEntry]:
            return [_log_entry(r) for r in db.execute(sql, params)]

        return await self._call(query)

    async def file_segments(
        self, channel: str, sender_id: str, file_id: str, *, limit: int = 400
    ) -> list[LogEntry]:
        """The stored segment rows of file ``file_id`` sent by ``sender_id``, in SDS
        order (oldest first), at most ``limit``: one range of the ``messages_by_file``
        index (schema 7), whatever the log's size and whoever else names the id."""
        _check_limit(limit)

        def query(db: sqlite3.Connection) -> list[LogEntry]:
            return [
                _log_entry(r)
                for r in db.execute(FILE_SEGMENTS_SQL, (channel, file_id, sender_id, limit))
            ]

        return await self._call(query)

    async def oldest_file(
        self, channel: str, sender_id: str, *, min_bytes: int = 128, limit: int = 400
    ) -> tuple[str, list[tuple[str, int]]] | None:
        """The oldest file of ``sender_id`` in ``channel`` that still holds segment data:
        ``(file id, [(message id, content bytes), ...])`` of its segment rows larger than
        ``min_bytes`` (an emptied segment is smaller), in SDS order, at most ``limit``;
        ``None`` when nothing of theirs is held. Reads the ``messages_by_file`` index and
        row headers, not the segments' bytes (for eviction, ``app/chat/file_quota.py``)."""

        def query(db: sqlite3.Connection) -> tuple[str, list[tuple[str, int]]] | None:
            row = db.execute(
                "SELECT file_id FROM messages INDEXED BY messages_by_file "
                "WHERE channel = ? AND file_id IS NOT NULL AND sender_id = ? "
                "AND length(content) > ? ORDER BY lamport, message_id LIMIT 1",
                (channel, sender_id, min_bytes),
            ).fetchone()
            if row is None:
                return None
            rows = db.execute(
                "SELECT message_id, length(content) FROM messages INDEXED BY messages_by_file "
                "WHERE channel = ? AND file_id = ? AND sender_id = ? AND length(content) > ? "
                "ORDER BY lamport, message_id LIMIT ?",
                (channel, row[0], sender_id, min_bytes, limit),
            ).fetchall()
            return str(row[0]), [(str(m), int(n)) for m, n in rows]

        return await self._call(query)

    async def ids_with_prefix(self, channel: str, prefix: str, *, limit: int = 2) -> list[str]:
        """Ids of ``channel``'s stored messages that start with ``prefix`` (lowercase
        hex), at most ``limit``, in id order: one range of the primary key (resolving a
        short id a person typed without reading the log)."""
        _check_limit(limit)
        low = prefix.lower()
        if not low or any(c not in "0123456789abcdef" for c in low):
            raise ValueError(f"not a hex id prefix: {prefix!r}")
        high = low + "g"  # above every hex continuation of the prefix

        def query(db: sqlite3.Connection) -> list[str]:
            return [
                str(r[0])
                for r in db.execute(
                    "SELECT message_id FROM messages WHERE channel = ? AND message_id >= ? "
                    "AND message_id < ? ORDER BY message_id LIMIT ?",
                    (channel, low, high, limit),
                )
            ]

        return await self._call(query)

    async def replace_content(
        self,
        channel: str,
        replacements: Iterable[tuple[str, str, bytes]],
        *,
        forget_envelopes: bool = False,
    ) -> int:
        """Overwrite the content of stored messages (a deletion by their author: the text
        must not stay on disk); ``replacements`` are (message id, author's sender id, new
        content). Only a row of that author changes (its digest follows); the outbox copy
        of an own message too. The old bytes are overwritten (:mod:`storage.erasure`:
        ``secure_delete = ON`` for this transaction, then the WAL copied into the file
        and truncated), so no file of the data directory holds them once this returns
        (unless a reader on an older snapshot held the WAL up: the background
        checkpointer then empties it as soon as it can, :attr:`wipe_pending`). With
        ``forget_envelopes`` their envelopes (in the recent window) go too: nothing of
        the old bytes is served again (an evicted file segment). How many rows."""
        items = list(replacements)

        def replace(db: sqlite3.Connection) -> int:
            changed = 0
            with erasing(db):
                for mid, sender, content in items:
                    row = db.execute(
                        "SELECT lamport FROM messages WHERE channel = ? AND message_id = ? "
                        "AND sender_id = ?",
                        (channel, mid, sender),
                    ).fetchone()
                    if row is None:
                        continue
                    digest = message_digest(channel, mid, sender, int(row[0]), content)
                    changed += db.execute(
                        "UPDATE messages SET content = ?, digest = ?, file_id = ? "
                        "WHERE channel = ? AND message_id = ? AND sender_id = ?",
                        (content, digest, segment_file_id(content), channel, mid, sender),
                    ).rowcount
                    db.execute(
                        "UPDATE outbox SET content = ? WHERE channel = ? AND message_id = ?",
                        (content, channel, mid),
                    )
                    if forget_envelopes:
                        kept = db.execute(
                            "SELECT causal_history FROM recent WHERE channel = ? "
                            "AND message_id = ? AND envelope IS NOT NULL",
                            (channel, mid),
                        ).fetchone()
                        if kept is not None:
                            db.execute(
                                "UPDATE recent SET envelope = NULL, checksum = ? "
                                "WHERE channel = ? AND message_id = ?",
                                (recent_checksum(kept[0], None), channel, mid),
                            )
            if changed:
                self._wipe(db)
            return changed

        return await self._call(replace) if items else 0

    def _wipe(self, db: sqlite3.Connection) -> None:
        """After an erasing transaction (on the connection's thread): the WAL's older
        frames hold the deleted bytes; empty it now, or have the checkpointer retry."""
        if wipe_wal(db):
            self.wipes += 1
            self._wipe_owed = False
            return
        if self.checkpointer is not None:  # asked first: wipe_pending reads both
            self.checkpointer.wipe_soon()
        self._wipe_owed = True

    @property
    def wipe_pending(self) -> bool:
        """Whether deleted bytes may still be in the WAL: a wipe after an erasure was
        held up by a reader and has not been finished by the checkpointer yet."""
        if not self._wipe_owed:
            return False
        if self.checkpointer is not None and not self.checkpointer.wipe_pending:
            self._wipe_owed = False
        return self._wipe_owed

    async def update_own_state(
        self, channel: str, message_ids: Iterable[str], state: OwnState | str
    ) -> int:
        """Set the state of our own messages; returns how many rows changed.

        Rows of others' messages (no state) are never touched. Storage records
        what the core decided; it does not police transitions.
        """
        batch = Batch()
        batch.set_own_state(channel, message_ids, state)
        if not batch.own_states:
            return 0
        return (await self.commit_batch(batch)).own_states_updated

    # ------------------------------------------------------------------ outbox

    async def enqueue_outgoing(
        self, channel: str, content: bytes, *, now_ms: int | None = None
    ) -> int:
        """Record a typed message durably (fsynced) BEFORE anything is broadcast; its local id.

        See :mod:`storage.batch` for the whole send protocol.
        """
        batch = Batch()
        batch.enqueue_outgoing(channel, content, now_ms)
        return (await self.commit_batch(batch)).local_ids[0]

    async def mark_sent(self, local_id: int, message_id: str) -> None:
        """Record that outbox entry ``local_id`` became SDS message ``message_id`` (fsynced).

        Prefer :meth:`record_sent` (or :meth:`Batch.record_sent`), which stores
        the message and the core state in the same transaction.
        """
        batch = Batch()
        batch.mark_sent(local_id, message_id)
        await self.commit_batch(batch)

    async def record_sent(
        self,
        local_id: int,
        message: StoredMessage,
        *,
        core_state: bytes | None = None,
        events: Iterable[EventRow] = (),
    ) -> BatchResult:
        """Store our produced message, the outbox transition, the core state and events at once.

        Shorthand for a :class:`Batch` with :meth:`Batch.record_sent`; commit
        this BEFORE handing the envelope to the transport.
        """
        batch = Batch()
        batch.record_sent(local_id, message)
        if core_state is not None:
            batch.set_core_state(message.channel, core_state)
        batch.add_event_rows(events)
        return await self.commit_batch(batch)

    async def next_local_id(self) -> int:
        """The outbox id the next typed line gets (ids are never reused, even after a
        deletion): for :meth:`Batch.record_typed`, whose caller numbers lines itself."""

        def query(db: sqlite3.Connection) -> int:
            row = db.execute(
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0), "
                "coalesce((SELECT max(local_id) FROM outbox), 0))"
            ).fetchone()
            return int(row[0]) + 1

        return await self._call(query)

    async def pending_outgoing(self, channel: str | None = None) -> list[PendingMessage]:
        """Typed messages not yet produced by the core, oldest first (resume these at start)."""
        sql = "SELECT local_id, channel, content, created_ms FROM outbox WHERE message_id IS NULL"
        params: tuple[object, ...] = ()
        if channel is not None:
            sql += " AND channel = ?"
            params = (channel,)
        sql += " ORDER BY local_id"

        def query(db: sqlite3.Connection) -> list[PendingMessage]:
            return [PendingMessage(*r) for r in db.execute(sql, params)]

        return await self._call(query)

    async def own_failed(self, channel: str, limit: int = 1_000) -> list[tuple[str, bytes]]:
        """Our messages in ``channel`` whose sending failed, newest first, at most
        ``limit``: ``(message_id, content)`` (what ``/retry`` sends again)."""

        def query(db: sqlite3.Connection) -> list[tuple[str, bytes]]:
            rows = db.execute(
                "SELECT message_id, content, sender_id, lamport, digest FROM messages "
                "WHERE channel = ? AND state = ? ORDER BY lamport DESC, message_id DESC LIMIT ?",
                (channel, OwnState.FAILED.value, limit),
            )
            return [
                (str(r[0]), bytes(r[1]))
                for r in rows
                if row_intact(channel, r[0], r[2], r[3], bytes(r[1]), r[4])
            ]

        return await self._call(query)

    # ------------------------------------------------------------------ core state, batches

    async def save_core_state(self, channel: str, state: bytes) -> None:
        """Replace ``channel``'s exported core state (prefer a :class:`Batch` with its outputs)."""
        batch = Batch()
        batch.set_core_state(channel, state)
        await self.commit_batch(batch)

    async def load_core_state(self, channel: str) -> bytes | None:
        """``channel``'s last saved core state, or ``None``."""

        def query(db: sqlite3.Connection) -> bytes | None:
            row = db.execute("SELECT state FROM core_state WHERE channel = ?", (channel,))
            found = row.fetchone()
            return None if found is None else bytes(found[0])

        return await self._call(query)

    async def commit_batch(self, batch: Batch, *, now_ms: int | None = None) -> BatchResult:
        """Write all of ``batch`` in one transaction (one awaited call): all of it or nothing.

        ``now_ms`` (default: wall clock) fills ``received_at``/``created_ms``/
        ``sent_ms`` left unset. Fsynced when ``batch.needs_fsync``. On any
        error nothing is written and the batch may be retried; after success
        the batch is spent (:class:`~storage.errors.BatchAlreadyCommittedError`).
        """
        if not len(batch) and not batch.committed:
            batch.committed = True
            return BatchResult()
        at = wall_ms() if now_ms is None else now_ms

        def commit(db: sqlite3.Connection) -> BatchResult:
            with transaction(db, durable=batch.needs_fsync):
                return apply_batch(db, batch, at, self.recent)

        result = await self._call(commit)
        batch.committed = True
        return result

    @property
    def idle(self) -> bool:
        """Open, and no call in flight on aiosqlite's thread (:meth:`commit_batch_now` works)."""
        return self._conn is not None and self._submitted == self._finished

    def commit_batch_now(self, batch: Batch, *, now_ms: int | None = None) -> BatchResult | None:
        """:meth:`commit_batch` on the calling thread, without awaiting: ``None`` (nothing
        done) when a call is in flight on aiosqlite's thread or the store is closed.

        For small batches on a latency-bound path (a node's round of a few
        messages): handing a transaction to aiosqlite's thread and back costs two
        thread switches, each waiting for the GIL while the loop runs Python code
        (up to ``sys.getswitchinterval()``, 5 ms), which a round's own commit does
        not need. Same transaction, same durability (``needs_fsync``: synchronous
        FULL), same errors; it blocks the loop for the commit (tens of
        microseconds for a small batch without fsync, ~0.2 ms with one here), so
        large batches should still go through :meth:`commit_batch`.
        """
        conn = self._conn
        if conn is None or not self.idle:
            return None
        if not len(batch) and not batch.committed:
            batch.committed = True
            return BatchResult()
        at = wall_ms() if now_ms is None else now_ms
        db = conn._conn  # the sqlite3 connection; idle in aiosqlite's thread (see above)
        try:
            with transaction(db, durable=batch.needs_fsync):
                result = apply_batch(db, batch, at, self.recent)
        except sqlite3.Error as e:
            raise translate_error(e, self.path) from e
        except OverflowError as e:
            raise ValueOutOfRangeError(f"{e} (SQLite integers are signed 64-bit)") from e
        finally:
            if self.checkpointer is not None:
                self.checkpointer.poke()
        batch.committed = True
        return result

    # ------------------------------------------------------------------ event log

    async def append_events(self, rows: Iterable[EventRow]) -> range:
        """Append event rows; returns the ids they got (prefer a :class:`Batch`)."""
        batch = Batch()
        batch.add_event_rows(rows)
        if not batch.events:
            return range(0)
        return (await self.commit_batch(batch)).event_ids

    async def events_page(self, after_id: int = 0, limit: int = 1000) -> list[StoredEvent]:
        """Up to ``limit`` events with id > ``after_id``, in log order."""
        _check_limit(limit)

        def query(db: sqlite3.Connection) -> list[StoredEvent]:
            return [
                StoredEvent(*r)
                for r in db.execute(
                    f"SELECT {_EVENT_COLUMNS} FROM events WHERE id > ? ORDER BY id LIMIT ?",
                    (after_id, limit),
                )
            ]

        return await self._call(query)

    async def iter_events(
        self, after_id: int = 0, limit: int | None = None, *, page_size: int = 1000
    ) -> AsyncIterator[StoredEvent]:
        """Events with id > ``after_id`` in log order (at most ``limit``), ``page_size`` per call.

        For export: remember the last id seen and resume from it.
        """
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        remaining = limit
        cursor = after_id
        while remaining is None or remaining > 0:
            want = page_size if remaining is None else min(page_size, remaining)
            rows = await self.events_page(cursor, want)
            for row in rows:
                yield row
            if remaining is not None:
                remaining -= len(rows)
            if len(rows) < want:
                return
            cursor = rows[-1].id

    async def delete_events_through(self, last_id: int) -> int:
        """Drop events with id <= ``last_id`` (after exporting them); return how many.

        Ids are never reused (AUTOINCREMENT), so export cursors stay valid.
        """

        def delete(db: sqlite3.Connection) -> int:
            with transaction(db):
                return db.execute("DELETE FROM events WHERE id <= ?", (last_id,)).rowcount

        return await self._call(delete)

    async def count_events(self) -> int:
        """Number of events in the log."""

        def query(db: sqlite3.Connection) -> int:
            return int(db.execute("SELECT count(*) FROM events").fetchone()[0])

        return await self._call(query)


def _get_channel(db: sqlite3.Connection, name: str) -> Channel | None:
    row = db.execute(
        "SELECT name, topic, is_public, joined_at, left_at FROM channels WHERE name = ?", (name,)
    ).fetchone()
    return None if row is None else Channel(row[0], row[1], bool(row[2]), row[3], row[4])
