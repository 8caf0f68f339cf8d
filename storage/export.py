"""``sdschat export DATA_DIR... --out DIR``: real nodes' SQLite event logs as Parquet.

Writes ``DIR/events/part-*.parquet`` in :data:`storage.events_schema.EVENT_SCHEMA`
(the schema ``sdschat sim`` writes too) and ``DIR/export.json`` (what was
exported from where). ``sdschat report DIR`` reads it.

Each data directory is one participant: ``node_id`` is its identity's sender
id, ``seq`` the event log's row id (the order events happened at that node),
``time_ms`` the logged wall-clock time. The event log keeps a causal history
as its length only (the ids are stored with the message); the export reads
the ids from the ``recent`` table (``messages`` in schema 1) for
``MessageSent``/``MessageDelivered`` rows, while the message is among the
recent ones whose history the node keeps (``recent_window``, default 2,000 per
channel: export at least that often to keep every history). A history whose
message is no longer stored is exported as null
(``sdschat report`` counts such deliveries as unverifiable, not as violations).

The databases are opened read-only (``mode=ro``), so a data directory can be
exported while its node runs (SQLite WAL lets a reader beside the writer);
events appended after the export started may or may not be included.
Nothing is written to the data directories.

The output appears only when complete: it is written to a staging directory
next to ``DIR`` and renamed into place at the end.

This module is part of the ``sdschat[report]`` extra: it imports pyarrow (through
:mod:`storage.events_schema`) at import time, so nothing on the chat's paths imports
it; ``sdschat export`` checks that pyarrow is installed before importing it and
otherwise says ``pip install 'sdschat[report]'`` (exit 2).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from storage.database import DB_FILENAME
from storage.errors import StorageError
from storage.events_schema import SCHEMA_VERSION, EventRecords, EventWriter
from storage.records import EventRow, decode_causal_history
from storage.schema import APPLICATION_ID
from storage.schema import SCHEMA_VERSION as DB_SCHEMA_VERSION

__all__ = ["ExportError", "ExportResult", "export_data_dirs", "main_export"]

_HISTORY_KINDS = ("MessageSent", "MessageDelivered")


class ExportError(StorageError):
    """A data directory cannot be exported, or the output cannot be written (message says why)."""


@dataclass(slots=True)
class ExportResult:
    """What :func:`export_data_dirs` wrote."""

    out: Path
    files: list[Path]
    rows: int
    nodes: dict[str, dict[str, object]] = field(default_factory=dict)


def _open_ro(data_dir: Path) -> sqlite3.Connection:
    db_path = data_dir / DB_FILENAME
    if not data_dir.is_dir():
        raise ExportError(f"{data_dir}: not a directory")
    if not db_path.is_file():
        raise ExportError(f"{data_dir}: no sdschat database ({DB_FILENAME}) in it")
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise ExportError(f"{db_path}: not readable as SQLite: {exc}") from None
    if app_id != APPLICATION_ID:
        db.close()
        raise ExportError(f"{db_path}: not an sdschat database")
    if version > DB_SCHEMA_VERSION:
        db.close()
        raise ExportError(
            f"{db_path}: schema version {version} is newer than this sdschat ({DB_SCHEMA_VERSION})"
        )
    return db


def _histories(
    db: sqlite3.Connection, wanted: dict[str, set[str]]
) -> dict[tuple[str, str], tuple[str, ...]]:
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    # Schema 2 keeps causal histories in the bounded ``recent`` table (older
    # messages are exported with a null history); schema 1 kept them in ``messages``.
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    table = "messages" if version < 2 else "recent"
    for channel, ids in wanted.items():
        for r in db.execute(
            f"SELECT message_id, causal_history FROM {table} WHERE channel = ? "
            "AND message_id IN (SELECT value FROM json_each(?))",
            (channel, json.dumps(sorted(ids))),
        ):
            out[(channel, r[0])] = decode_causal_history(r[1])
    return out


def _export_one(
    data_dir: Path, records: EventRecords, writer: EventWriter, page: int
) -> dict[str, object]:
    db = _open_ro(data_dir)
    try:
        row = db.execute("SELECT sender_id, display_name FROM identity WHERE id = 1").fetchone()
        if row is None:
            raise ExportError(f"{data_dir}: the database has no identity (never started?)")
        node_id, name = str(row[0]), str(row[1])
        last = 0
        count = 0
        unknown_history = 0
        while True:
            rows = db.execute(
                "SELECT id, wall_ms, kind, channel, message_id, sender_id, lamport, size_bytes, "
                "detail FROM events WHERE id > ? ORDER BY id LIMIT ?",
                (last, page),
            ).fetchall()
            if not rows:
                break
            wanted: dict[str, set[str]] = {}
            for r in rows:
                if r[2] in _HISTORY_KINDS and r[3] is not None and r[4] is not None:
                    wanted.setdefault(r[3], set()).add(r[4])
            histories = _histories(db, wanted) if wanted else {}
            for r in rows:
                ev = EventRow(
                    wall_ms=r[1], kind=r[2], channel=r[3], message_id=r[4], sender_id=r[5],
                    lamport=r[6], size_bytes=r[7], detail=r[8] or "{}",
                )
                history = None
                if ev.kind in _HISTORY_KINDS:
                    history = histories.get((ev.channel or "", ev.message_id or ""))
                    if history is None:
                        unknown_history += 1
                records.add_row(node_id, int(r[0]), ev, history)
            count += len(rows)
            last = int(rows[-1][0])
            if len(records) >= 200_000:
                writer.write(records)
        writer.write(records)
        return {
            "data_dir": str(data_dir),
            "name": name,
            "events": count,
            "last_event_id": last,
            "histories_not_stored": unknown_history,
        }
    except sqlite3.DatabaseError as exc:
        raise ExportError(f"{data_dir}: reading the event log failed: {exc}") from None
    finally:
        db.close()


def export_data_dirs(
    data_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    run: str = "export",
    force: bool = False,
    page: int = 5_000,
) -> ExportResult:
    """Export the event logs of ``data_dirs`` (one participant each) to ``out``.

    Raises :class:`ExportError` (nothing is left behind) when a data directory
    is not an sdschat data directory, two of them are the same participant,
    or ``out`` already holds an export (unless ``force``).
    """
    if not data_dirs:
        raise ExportError("no data directory given")
    out = Path(out)
    if (out / "events").exists() and not force:
        raise ExportError(f"{out} already holds an export (use --force to replace it)")
    staging = out.parent / f".{out.name}.partial-{time.time_ns()}"
    staging.mkdir(parents=True)
    try:
        writer = EventWriter(staging / "events")
        records = EventRecords(run, "node")
        nodes: dict[str, dict[str, object]] = {}
        try:
            for d in data_dirs:
                node_id = _peek_node_id(Path(d))
                if node_id in nodes:
                    raise ExportError(
                        f"{d} and {nodes[node_id]['data_dir']} are the same participant"
                    )
                nodes[node_id] = _export_one(Path(d), records, writer, page)
            files = writer.close()
        except BaseException:
            writer.abort()
            raise
        if writer.rows == 0:
            raise ExportError("the event logs are empty: nothing to export")
        meta = {
            "schema_version": SCHEMA_VERSION,
            "run": run,
            "run_id": records.run_id,
            "source": "node",
            "rows": writer.rows,
            "nodes": nodes,
            "exported_at_ms": int(time.time() * 1000),
        }
        (staging / "export.json").write_text(json.dumps(meta, indent=2) + "\n")
        out.mkdir(parents=True, exist_ok=True)
        for name in ("events", "export.json"):
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            (staging / name).replace(target)
        return ExportResult(
            out, [out / "events" / f.name for f in files], writer.rows, nodes
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _peek_node_id(data_dir: Path) -> str:
    db = _open_ro(data_dir)
    try:
        row = db.execute("SELECT sender_id FROM identity WHERE id = 1").fetchone()
        return "" if row is None else str(row[0])
    finally:
        db.close()


def main_export(data_dirs: Sequence[str], out: str, run: str, force: bool) -> int:
    """``sdschat export``: returns the exit status (0 ok, 2 refused/failed)."""
    try:
        result = export_data_dirs(data_dirs, out, run=run, force=force)
    except (ExportError, OSError) as exc:
        print(f"sdschat export: {exc}", file=sys.stderr)
        return 2
    print(
        f"exported {result.rows} events of {len(result.nodes)} participant(s) "
        f"to {result.out / 'events'}"
    )
    return 0
