"""``sdschat doctor DATA_DIR``: check a data directory's database for damage, on demand.

Three checks, all reading only (a node may run beside it; no lock is taken):

1. the file's header (:func:`storage.database.inspect_file`): truncation, not SQLite;
2. ``PRAGMA quick_check``: SQLite's structural check of every page (b-trees,
   free list, record formats) — what a node also runs at start after an
   unclean exit (:meth:`storage.Store.open`);
3. every message row against its digest (:func:`storage.records.message_digest`):
   a byte flipped inside a row's data, which the structural check cannot see;
4. every stored envelope and causal history (the ``recent`` table: what resends,
   repair answers and the store client send again) against its checksum
   (:func:`storage.records.recent_checksum`, schema 5), and every envelope of a
   store peer's archive against its key (its sha256, the retrieval hint);
5. the free space of the data directory's file system: below
   :data:`MIN_FREE_BYTES` a node cannot store what it receives or what is typed
   (it refuses lines with "disk full" and fetches the rest again later).

Exit status of the command: 0 healthy, 1 damage found, 2 no database or unusable.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .database import BUSY_TIMEOUT_MS, DB_FILENAME, inspect_file
from .errors import CorruptDatabaseError
from .records import message_digest, recent_checksum, segment_file_id

__all__ = ["MIN_FREE_BYTES", "DoctorReport", "diagnose", "main_doctor"]

MIN_FREE_BYTES = 2 * 1024 * 1024
"""Free space below which a node cannot keep writing (``app.node.disk_guard`` waits for as
much before it writes again)."""


@dataclass(slots=True)
class DoctorReport:
    """What :func:`diagnose` found (``healthy`` when nothing)."""

    path: Path
    messages: int = 0
    structure: list[str] = field(default_factory=list)
    """``quick_check`` findings (empty: the structure is sound)."""
    damaged_rows: list[tuple[str, str]] = field(default_factory=list)
    """``(channel, message_id)`` of message rows that fail their digest."""
    unchecked_rows: int = 0
    """Rows without a digest (none in a database this version wrote or migrated)."""
    envelopes: int = 0
    """Stored envelopes checked against their hash (messages' and the archive's)."""
    damaged_envelopes: list[tuple[str, str]] = field(default_factory=list)
    """``(channel, message_id)`` of stored envelopes (or causal histories) that fail
    their checksum, and ``("archive", hash hex)`` of archived envelopes whose sha256 is
    not their key."""
    unchecked_envelopes: int = 0
    """``recent`` rows without a checksum (none in a database this version wrote or
    migrated)."""

    free_bytes: int | None = None
    """Free space on the data directory's file system (``None``: unknown)."""

    @property
    def disk_full(self) -> bool:
        return self.free_bytes is not None and self.free_bytes < MIN_FREE_BYTES

    @property
    def healthy(self) -> bool:
        return (
            not self.structure
            and not self.damaged_rows
            and not self.damaged_envelopes
            and not self.disk_full
        )


def _verify_rows(db: sqlite3.Connection, report: DoctorReport) -> None:
    """Each row against its digest, and (schema 7) its ``file_id`` against its content:
    a flipped file id would hide a file's segment (never show another's bytes: readers
    decode the content), so it counts as a damaged row too."""
    indexed = any(r[1] == "file_id" for r in db.execute("PRAGMA table_info(messages)"))
    file_id = "file_id" if indexed else "NULL"
    for channel, message_id, sender_id, lamport, content, digest, fid in db.execute(
        f"SELECT channel, message_id, sender_id, lamport, content, digest, {file_id} "
        "FROM messages"
    ):
        report.messages += 1
        if digest is None:
            report.unchecked_rows += 1
            continue
        try:
            ok = message_digest(channel, message_id, sender_id, lamport, bytes(content)) == digest
            if ok and indexed:
                ok = fid == segment_file_id(bytes(content))
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            report.damaged_rows.append((str(channel), str(message_id)))


def _verify_envelopes(db: sqlite3.Connection, report: DoctorReport) -> None:
    """Check 4: a stored envelope and causal history match their checksum; an archived
    envelope hashes to its key."""
    for channel, message_id, history, envelope, checksum in db.execute(
        "SELECT channel, message_id, causal_history, envelope, checksum FROM recent"
    ):
        if checksum is None:
            report.unchecked_envelopes += 1
            continue
        report.envelopes += 1
        try:
            ok = recent_checksum(history, envelope) == checksum
        except (TypeError, ValueError):
            ok = False
        if not ok:
            report.damaged_envelopes.append((str(channel), str(message_id)))
    for key, envelope in db.execute("SELECT hash, envelope FROM archive"):
        report.envelopes += 1
        if not isinstance(envelope, bytes) or hashlib.sha256(envelope).digest() != key:
            shown = key.hex() if isinstance(key, bytes) else str(key)
            report.damaged_envelopes.append(("archive", shown))


def diagnose(data_dir: str | Path) -> DoctorReport:
    """Check ``data_dir``'s database (see the module docstring).

    Raises:
        FileNotFoundError: no database in ``data_dir``.
        CorruptDatabaseError: the file is not a readable SQLite database at all.
    """
    path = Path(data_dir) / DB_FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"no sdschat database in {data_dir}")
    inspect_file(path)
    report = DoctorReport(path)
    try:
        st = os.statvfs(path.parent)
        report.free_bytes = st.f_bavail * st.f_frsize
    except OSError:
        pass
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise CorruptDatabaseError(path, str(e)) from e
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        try:
            report.structure = [
                str(r[0]) for r in db.execute("PRAGMA quick_check") if r[0] != "ok"
            ]
        except sqlite3.DatabaseError as e:
            report.structure = [str(e)]
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version >= 2:
                _verify_rows(db, report)
            if version >= 5:
                _verify_envelopes(db, report)
            else:  # schema 1 had no digests (they are added when a node migrates it)
                row = db.execute("SELECT count(*) FROM messages").fetchone()
                report.messages = report.unchecked_rows = int(row[0])
        except sqlite3.DatabaseError as e:
            report.structure.append(f"reading the messages failed: {e}")
    finally:
        db.close()
    return report


def main_doctor(data_dir: str | Path, out: TextIO | None = None) -> int:
    """``sdschat doctor``: print the findings; 0 healthy, 1 damaged, 2 unusable."""
    out = out or sys.stdout
    try:
        report = diagnose(data_dir)
    except (FileNotFoundError, CorruptDatabaseError) as exc:
        print(f"sdschat doctor: {exc}", file=sys.stderr)
        return 2
    print(f"{report.path}: {report.messages} messages", file=out)
    for problem in report.structure[:20]:
        print(f"structure: {problem}", file=out)
    for channel, message_id in report.damaged_rows[:50]:
        print(f"damaged message: channel {channel!r} id {message_id}", file=out)
    if len(report.damaged_rows) > 50:
        print(f"... {len(report.damaged_rows) - 50} more damaged messages", file=out)
    for channel, message_id in report.damaged_envelopes[:50]:
        if channel == "archive":
            print(f"damaged archived envelope: hash {message_id}", file=out)
        else:
            print(f"damaged envelope: channel {channel!r} id {message_id}", file=out)
    if report.damaged_envelopes:
        print(
            "a damaged envelope cannot be sent again (resends, repair answers): "
            "/retry sends a failed own line again as a new message",
            file=out,
        )
    if len(report.damaged_envelopes) > 50:
        print(f"... {len(report.damaged_envelopes) - 50} more damaged envelopes", file=out)
    if report.disk_full:
        print(
            f"disk full: {report.free_bytes} bytes free on the data directory's file system "
            f"(a node needs {MIN_FREE_BYTES}); it refuses typed lines and drops what it "
            "receives until space is freed",
            file=out,
        )
    if report.unchecked_rows:
        print(f"{report.unchecked_rows} rows have no digest (not checked)", file=out)
    if report.unchecked_envelopes:
        print(f"{report.unchecked_envelopes} envelopes have no hash to check", file=out)
    if report.healthy:
        checked = report.messages - report.unchecked_rows
        print(
            f"ok: structure sound, {checked} messages match their digest, "
            f"{report.envelopes} envelopes match their hash",
            file=out,
        )
        return 0
    if report.structure or report.damaged_rows or report.damaged_envelopes:
        print(
            "DAMAGED: restore the data directory from a backup, or move sdschat.db away and "
            "start with --new-history (peers and the store peer hold the channel's messages)",
            file=out,
        )
    else:
        print("FULL: free space on the data directory's file system", file=out)
    return 1
