"""Opening the SQLite file safely, and the small helpers every query uses.

Opening proceeds so that nothing is written to a file until it is known to be
an sdschat database this version understands:

1. :func:`inspect_file` reads the 100-byte header with plain file I/O: wrong
   magic, impossible page size or a file shorter than its header says is
   :class:`~storage.errors.CorruptDatabaseError` (SQLite itself would often
   open a truncated file happily and fail much later).
2. :func:`prepare` then reads, without writing, ``application_id``,
   ``user_version`` and the schema (and optionally runs ``PRAGMA
   quick_check``); a foreign or damaged file is ``CorruptDatabaseError``, a
   newer one :class:`~storage.errors.NewerSchemaError`.
3. Only then does it switch to WAL, set the pragmas below and migrate.

Durability (``synchronous``). In WAL mode a commit is durable against a
*process* crash (``kill -9``) at every ``synchronous`` level: the WAL frames are
in the OS page cache when ``COMMIT`` returns. What the level decides is *power
loss / OS crash*. With ``NORMAL`` the WAL is fsynced only at checkpoints, so
the last few commits can vanish; with ``FULL`` every commit is fsynced before
it returns. sdschat promises "a message is durable before it is broadcast":
if a broadcast message's record could vanish while its envelope is already
out, the restarted node would produce the typed text again under a *new* id
(delivered twice), or forget its clock. So the commits that gate a broadcast —
enqueueing typed text and recording the produced message with the core state
(:class:`~storage.batch.Batch` with outbox transitions, or ``durable=True``) —
run with ``synchronous=FULL``; everything else (received messages, events,
archive, state updates that the protocol can re-derive or re-fetch from peers)
uses ``NORMAL`` and costs no fsync. Fsyncing the WAL also makes every earlier
``NORMAL`` commit durable.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import CorruptDatabaseError, DiskFullError, NewerSchemaError, StorageError
from .schema import APPLICATION_ID, SCHEMA_VERSION, migrate

DB_FILENAME = "sdschat.db"
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 5000

PAGE_SIZE = 16384
"""Page size of a new database file unless :meth:`storage.Store.open` is given one
(existing files keep theirs).

For large envelopes (~46 KB with js-waku's sizes, the store peer's archive):
with SQLite's default 4 KB pages a received message is a chain of 12 overflow
pages, each written to the WAL (two writes per frame) and again by the
checkpoint. 16 KB pages make that 3, and roughly halve the cost of committing
such a message (``bench/store_catchup.py``).
"""

SMALL_PAGE_SIZE = 4096
"""Page size for a node whose envelopes are small (sdschat's default sizes, ~1.5 KB).

A one-message transaction (what each receiver commits at 100 msg/s in a 10-node
channel) changes about nine b-tree pages (the message row, its two indexes, the
recent window's row and index, the event log): the WAL gets nine whole pages.
``bench/commit_cost.py``, 2026-11-27, load 2.7: 36 KB per transaction and 86 us
of CPU with 4 KB pages against 112 KB and 124 us with 16 KB, and a typed line's
fsynced commit 0.64 against 1.49 ms (p50): the sender's wait before it publishes.
"""

VALID_PAGE_SIZES = frozenset(1 << k for k in range(9, 17))
"""SQLite's page sizes: powers of two from 512 to 65536."""

WAL_CHECKPOINT_BYTES = 64 * 1024 * 1024
"""The WAL grows to about this size before SQLite checkpoints it into the file
(``wal_autocheckpoint``, in pages; SQLite's default is 1,000 pages, 4 MB),
and is truncated back to it afterwards (``journal_size_limit``). Checkpoints
fsync (at ``synchronous=NORMAL``) and copy every page a second time: fewer,
larger ones cost less per message. Durability is unchanged: a ``kill -9``
loses nothing committed, and a durable (``FULL``) commit fsyncs the WAL and
with it every earlier commit; only what power loss may take of the
``NORMAL`` commits since the last fsync grows, as documented above.
"""

_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
_SQLITE_FULL = 13


def wall_ms() -> int:
    """Wall-clock time in milliseconds (the unit of every ``*_ms``/``*_at`` column)."""
    return time.time_ns() // 1_000_000


def inspect_file(path: Path) -> None:
    """Refuse, without opening it through SQLite, a file that cannot be a healthy database.

    A missing or empty file is fine (a new database). Raises
    :class:`CorruptDatabaseError` for a non-SQLite header, an invalid page
    size, a size that is not whole pages, or (unless a WAL with pending frames
    sits beside it) fewer pages than the header claims. Damage this cannot
    see surfaces later as ``CorruptDatabaseError`` from the failing query, or
    from ``integrity_check``.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with path.open("rb") as f:
        header = f.read(100)
    if len(header) < 100:
        if SQLITE_MAGIC.startswith(header[: len(SQLITE_MAGIC)]):
            raise CorruptDatabaseError(path, f"truncated: {size} bytes, shorter than its header")
        raise CorruptDatabaseError(path, "not a SQLite database (no SQLite header)")
    if header[:16] != SQLITE_MAGIC:
        raise CorruptDatabaseError(path, "not a SQLite database (no SQLite header)")
    page_size = int.from_bytes(header[16:18], "big")
    if page_size == 1:
        page_size = 65536
    if page_size < 512 or page_size & (page_size - 1):
        raise CorruptDatabaseError(path, f"invalid page size {page_size} in header")
    # A checkpoint copies WAL pages into the file in page order, page 1 (with
    # the new page count) first: a crash in the middle leaves a file shorter
    # than its header says, and a full disk in the middle a last page written in
    # part (issue 26 §2: seen on a 20 MiB tmpfs); SQLite repairs both from the WAL
    # and truncates the file to whole pages when a checkpoint completes. So with a
    # non-empty WAL beside it, a short or ragged file is SQLite's business, not ours.
    wal = path.with_name(path.name + "-wal")
    wal_pending = wal.exists() and wal.stat().st_size > 0
    if size % page_size and not wal_pending:
        raise CorruptDatabaseError(
            path, f"truncated: {size} bytes is not a whole number of {page_size}-byte pages"
        )
    change_counter = header[24:28]
    page_count = int.from_bytes(header[28:32], "big")
    valid_for = header[92:96]
    if valid_for == change_counter and page_count * page_size > size and not wal_pending:
        raise CorruptDatabaseError(
            path,
            f"truncated: header says {page_count} pages of {page_size} bytes, "
            f"file holds {size // page_size}",
        )


def translate_error(error: sqlite3.Error, path: Path) -> StorageError:
    """Map a ``sqlite3`` error to the storage hierarchy (corruption gets its own type)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return CorruptDatabaseError(path, str(error))
    if code is not None and code & 0xFF == _SQLITE_FULL:
        return DiskFullError(f"{path}: disk full: {error}")
    return StorageError(f"{path}: {type(error).__name__}: {error}")


def validate(db: sqlite3.Connection, path: Path, *, integrity_check: bool) -> tuple[int, int]:
    """Check, reading only, that ``db`` is an sdschat database this version can use.

    Returns ``(user_version, objects in sqlite_master)``; ``(0, 0)`` is a new
    file. Raises :class:`CorruptDatabaseError` or
    :class:`~storage.errors.NewerSchemaError`.
    """
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        app_id = int(db.execute("PRAGMA application_id").fetchone()[0])
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        objects = int(db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
        if integrity_check:
            rows = db.execute("PRAGMA quick_check").fetchall()
            if rows != [("ok",)]:
                problems = "; ".join(str(r[0]) for r in rows[:5])
                raise CorruptDatabaseError(path, f"integrity check failed: {problems}")
    except sqlite3.DatabaseError as e:
        raise CorruptDatabaseError(path, str(e)) from e
    if app_id != APPLICATION_ID and (app_id != 0 or objects or version):
        raise CorruptDatabaseError(
            path, f"a SQLite database, but not an sdschat one (application_id={app_id:#x})"
        )
    if version > SCHEMA_VERSION:
        raise NewerSchemaError(path, version, SCHEMA_VERSION)
    if version < 0 or (version == 0 and objects):
        # user_version is only ever set by our migrations, to 1..SCHEMA_VERSION, in the
        # same transaction as the tables: a negative one, or tables at version 0, is a
        # damaged or foreign file, not a schema to migrate (migrating would fail midway).
        raise CorruptDatabaseError(
            path, f"schema version {version} is not valid for a database with {objects} objects"
        )
    return version, objects


def prepare(
    db: sqlite3.Connection, path: Path, *, integrity_check: bool, page_size: int = PAGE_SIZE
) -> tuple[int, int]:
    """Validate, configure and migrate a freshly opened autocommit connection.

    ``page_size`` is used only for a new file (one of :data:`VALID_PAGE_SIZES`).
    Returns ``(version found, version now)``. Raises :class:`CorruptDatabaseError`
    or :class:`~storage.errors.NewerSchemaError` before writing anything.
    """
    if page_size not in VALID_PAGE_SIZES:
        raise ValueError(f"page size must be a power of two from 512 to 65536, not {page_size}")
    version, objects = validate(db, path, integrity_check=integrity_check)
    if not objects and not version:
        # A new file: the page size can only be chosen before SQLite writes it.
        db.execute(f"PRAGMA page_size = {page_size}")
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StorageError(f"{path}: could not switch to WAL journal mode (got {mode!r})")
    db.execute("PRAGMA synchronous = NORMAL")
    page_size = int(db.execute("PRAGMA page_size").fetchone()[0])
    db.execute(f"PRAGMA wal_autocheckpoint = {max(1, WAL_CHECKPOINT_BYTES // page_size)}")
    db.execute(f"PRAGMA journal_size_limit = {WAL_CHECKPOINT_BYTES}")
    db.execute("PRAGMA foreign_keys = ON")
    # This build of SQLite zeroes every deleted page (SECURE_DELETE): dropping an
    # envelope that left the recent window would write its ~46 KB a second time.
    # FAST still clears deleted cells on b-tree pages, not whole freed overflow
    # pages (ciphertext, reused by the next envelopes).
    db.execute("PRAGMA secure_delete = FAST")
    found, now = migrate(db, path)
    if 0 < found < 2 <= now:
        _vacuum_if_sparse(db)
    return found, now


def _vacuum_if_sparse(db: sqlite3.Connection) -> None:
    """After the lean-storage migration: rewrite the file compactly (the emptied
    message rows leave their pages mostly empty, not free). A one-time rewrite of
    what is left; atomic, like every SQLite transaction, so ``kill -9`` during it
    leaves the migrated file."""
    if int(db.execute("PRAGMA page_count").fetchone()[0]) > 16:
        db.execute("VACUUM")


def last_run_unclean(path: Path) -> bool:
    """Whether the previous process using ``path`` did not close it cleanly.

    The last connection to close a WAL database checkpoints it and deletes the
    ``-wal`` file; a process that died (``kill -9``, power loss, a crash)
    leaves it behind. Call it while holding the data-dir lock (no other writer).
    """
    return path.with_name(path.name + "-wal").exists()


def open_read_only(path: Path) -> sqlite3.Connection | None:
    """A read-only connection to an sdschat database at the current schema, for readers
    beside a running node (WAL lets one read while another writes) that must neither
    take the data-dir lock nor change the file.

    Returns ``None`` when the file exists but is at an older schema (it needs the
    migration that :meth:`storage.Store.open` runs). Raises
    :class:`CorruptDatabaseError`, :class:`~storage.errors.NewerSchemaError`, or
    :class:`StorageError` (the file cannot be opened).
    """
    inspect_file(path)
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise translate_error(e, path) from e
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        version, _objects = validate(db, path, integrity_check=False)
    except sqlite3.Error as e:
        db.close()
        raise translate_error(e, path) from e
    except BaseException:
        db.close()
        raise
    if version < SCHEMA_VERSION:
        db.close()
        return None
    return db


@contextmanager
def transaction(db: sqlite3.Connection, *, durable: bool = False) -> Iterator[None]:
    """One write transaction (``BEGIN IMMEDIATE`` .. ``COMMIT``), rolled back on any error.

    ``durable=True`` commits with ``synchronous=FULL`` (fsync before returning),
    see the module docstring.
    """
    if durable:
        db.execute("PRAGMA synchronous = FULL")
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    finally:
        if durable:
            db.execute("PRAGMA synchronous = NORMAL")
