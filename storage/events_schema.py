"""The event-log Parquet schema: ONE schema for real nodes' exports and for simulations.

``sdschat export`` (real nodes' SQLite event logs, :mod:`storage.export`) and
``sdschat sim`` (:mod:`app.sim.simulation`) both write rows of :data:`EVENT_SCHEMA` through
:class:`EventRecords`, so ``sdschat report`` (:mod:`pipeline.report`) reads either.
One row per event per participant:

============== ============== ==========================================================
column         type           meaning
============== ============== ==========================================================
run            string         run label (sim: ``sim-<seed>``; export: ``--run``): only a label
source         string         ``"sim"`` or ``"node"``
node_id        string         the participant that logged the event (its sender id)
seq            int64          the event's position in that participant's log (1, 2, ...):
                              the order things happened at that participant
time_ms        int64          when: wall-clock ms (node) or virtual ms (sim)
channel        string         channel id (null for participant-level drops)
kind           string         event type: ``MessageSent``, ``MessageDelivered``, ...,
                              and the simulator's ``NodeJoined``, ``NodeOffline``,
                              ``NodeOnline``, ``StoreRetrieval``
message_id     string         the message the event is about
sender_id      string         its original sender
lamport        int64          its Lamport timestamp
size_bytes     int64          SDS wire size of the message the event carries (content
                              messages; sim also fills sync, resend, repair sizes)
content_bytes  int64          size of the content alone (content messages)
metadata_bytes int64          ``size_bytes - content_bytes``: protocol overhead
causal_history list<string>   ids the message named as its causal history
                              (``MessageSent``, ``MessageDelivered``)
position       int64          position in the log at that moment (Sent, Delivered)
missing_before int64          dependencies declared lost before delivery (Delivered)
reason         string         why (``MessageDropped``, ``MessageSendFailed``)
detail         string         every other field of the event, JSON (as in the
                              SQLite event log: ``storage.events.event_row``)
run_id         string         unique id of the run, written once per ``sdschat sim`` or
                              ``sdschat export`` (a UUID): two runs with one label are
                              told apart by it (added in schema version 2)
============== ============== ==========================================================

Events are first flattened by :func:`storage.events.event_row` (the same
function real nodes log with), then :func:`EventRecords.add_row` lifts
``position``, ``missing_before``, ``reason`` and ``content_bytes`` out of the
JSON ``detail`` into columns. Real nodes log only a causal history's length;
the export takes the ids from the stored message. The simulator has a fast
path for its two hot event kinds that produces identical rows (tested).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.errors import StorageError
from storage.records import EventRow

__all__ = [
    "COLUMNS",
    "EVENT_SCHEMA",
    "SCHEMA_VERSION",
    "VERSION_KEY",
    "EventRecords",
    "EventWriter",
    "SchemaMismatchError",
    "check_schema",
    "file_schema_version",
    "iter_parquet_files",
]

#: Version of :data:`EVENT_SCHEMA` (kept in the Parquet key-value metadata).
#: 1: first; 2: ``run_id`` (version-1 files are still read, their runs told apart
#: by label only).
SCHEMA_VERSION = 2
#: Key of the version in the Parquet key-value metadata.
VERSION_KEY = b"sdschat.event_schema"
#: Columns a version-1 file does not have.
_ADDED_IN_2 = ("run_id",)

EVENT_SCHEMA = pa.schema(
    [
        pa.field("run", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("node_id", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("time_ms", pa.int64(), nullable=False),
        pa.field("channel", pa.string()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("message_id", pa.string()),
        pa.field("sender_id", pa.string()),
        pa.field("lamport", pa.int64()),
        pa.field("size_bytes", pa.int64()),
        pa.field("content_bytes", pa.int64()),
        pa.field("metadata_bytes", pa.int64()),
        pa.field("causal_history", pa.list_(pa.string())),
        pa.field("position", pa.int64()),
        pa.field("missing_before", pa.int64()),
        pa.field("reason", pa.string()),
        pa.field("detail", pa.string()),
        pa.field("run_id", pa.string()),
    ],
    metadata={VERSION_KEY: str(SCHEMA_VERSION).encode()},
)

COLUMNS: tuple[str, ...] = tuple(EVENT_SCHEMA.names)


class SchemaMismatchError(StorageError, ValueError):
    """A Parquet file is not an sdschat event log (wrong or missing columns/types)."""


def file_schema_version(schema: pa.Schema) -> int | None:
    """The event-schema version a Parquet file declares (None: not declared)."""
    raw = (schema.metadata or {}).get(VERSION_KEY)
    if raw is None:
        return None
    try:
        return int(raw.decode())
    except (UnicodeDecodeError, ValueError):
        return -1


def check_schema(schema: pa.Schema, where: str) -> None:
    """Raise :class:`SchemaMismatchError` unless ``schema`` has every column with its type.

    A file declaring a newer schema version than :data:`SCHEMA_VERSION` is refused
    (its columns may mean other things, e.g. other units). Extra columns are allowed
    (ignored); nullability is not checked (Spark and other writers mark every column
    nullable); columns added after version 1 may be absent.
    """
    version = file_schema_version(schema)
    if version is not None and (version > SCHEMA_VERSION or version < 1):
        raise SchemaMismatchError(
            f"{where}: event schema version {version} is "
            + ("newer than" if version > SCHEMA_VERSION else "not one")
            + f" this sdschat reads (up to {SCHEMA_VERSION}); use a newer sdschat"
        )
    problems = []
    for f in EVENT_SCHEMA:
        idx = schema.get_field_index(f.name)
        if idx < 0:
            if f.name in _ADDED_IN_2 and version in (None, 1):
                continue
            problems.append(f"missing column {f.name!r}")
            continue
        got = schema.field(idx).type
        want = f.type
        if pa.types.is_list(want):
            ok = (pa.types.is_list(got) or pa.types.is_large_list(got)) and (
                pa.types.is_string(got.value_type) or pa.types.is_large_string(got.value_type)
            )
        elif pa.types.is_string(want):
            ok = pa.types.is_string(got) or pa.types.is_large_string(got)
        else:
            ok = got == want
        if not ok:
            problems.append(f"column {f.name!r} is {got}, expected {want}")
    if problems:
        raise SchemaMismatchError(f"{where}: not an sdschat event log: " + "; ".join(problems))


_LIFTED_INT = ("position", "missing_before", "content_bytes")


# Buffered row layout (a tuple per row; transposed in to_table).
_ROW_FIELDS = (
    "node_id", "seq", "time_ms", "channel", "kind", "message_id", "sender_id", "lamport",
    "size_bytes", "content_bytes", "metadata_bytes", "hist", "position", "missing_before",
    "reason", "detail",
)


class EventRecords:
    """A buffer of :data:`EVENT_SCHEMA` rows; :meth:`to_table` makes an Arrow table.

    Causal histories are interned per message id (every receiver of a message
    logs the same history), so a million deliveries of 50-entry histories cost
    a million references, not fifty million strings.
    """

    __slots__ = (
        "_hist_index", "_hist_total", "_histories", "_rows", "run", "run_id", "source",
    )

    def __init__(self, run: str, source: str, run_id: str | None = None) -> None:
        self.run = run
        #: written on every row: one id per sim or export (a fresh UUID unless given)
        self.run_id = run_id or uuid.uuid4().hex
        self.source = source
        self._rows: list[tuple[Any, ...]] = []
        self._histories: list[Sequence[str]] = []
        self._hist_index: dict[str, int] = {}
        self._hist_total = 0

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def history_entries(self) -> int:
        """Ids held by interned histories (a measure of the buffer's size)."""
        return self._hist_total

    def _history(self, message_id: str | None, history: Sequence[str] | None) -> int:
        if history is None:
            return -1
        if message_id is not None:
            idx = self._hist_index.get(message_id)
            if idx is not None and self._histories[idx] == history:
                return idx
        idx = len(self._histories)
        self._histories.append(tuple(history))
        self._hist_total += len(history)
        if message_id is not None:
            self._hist_index[message_id] = idx
        return idx

    def add_row(
        self,
        node_id: str,
        seq: int,
        row: EventRow,
        causal_history: Sequence[str] | None = None,
        *,
        size_bytes: int | None = None,
    ) -> None:
        """Append one event-log row (``size_bytes`` overrides the row's if given)."""
        try:
            detail = json.loads(row.detail) if row.detail else {}
        except json.JSONDecodeError:
            detail = {}
        if not isinstance(detail, dict):
            detail = {}
        lifted: dict[str, int | None] = {}
        for name in _LIFTED_INT:
            v = detail.get(name)
            lifted[name] = v if isinstance(v, int) and not isinstance(v, bool) else None
        reason = detail.get("reason")
        size = row.size_bytes if size_bytes is None else size_bytes
        content = lifted["content_bytes"]
        self._rows.append(
            (
                node_id,
                seq,
                row.wall_ms,
                row.channel,
                row.kind,
                row.message_id,
                row.sender_id,
                row.lamport,
                size,
                content,
                None if size is None or content is None else size - content,
                self._history(row.message_id, causal_history),
                lifted["position"],
                lifted["missing_before"],
                reason if isinstance(reason, str) else None,
                row.detail,
            )
        )

    def add_delivered(
        self,
        node_id: str,
        seq: int,
        time_ms: int,
        channel: str,
        message_id: str,
        sender_id: str,
        lamport: int,
        size: int,
        content: int,
        history: Sequence[str],
        position: int,
        missing_before: int,
        retrieval_hint: bytes | None,
        was_lost: bool = False,
    ) -> None:
        """Fast path of ``add_row(event_row(MessageDelivered(...)), history)`` (same row)."""
        hint = "null" if retrieval_hint is None else f'"{retrieval_hint.hex()}"'
        detail = (
            f'{{"causal_history_len":{len(history)},"content_bytes":{content},'
            f'"missing_before":{missing_before},"position":{position},"retrieval_hint":{hint},'
            f'"was_lost":{"true" if was_lost else "false"}}}'
        )
        self._rows.append(
            (
                node_id, seq, time_ms, channel, "MessageDelivered", message_id, sender_id,
                lamport, size, content, size - content, self._history(message_id, history),
                position, missing_before, None, detail,
            )
        )

    def add_plain(
        self,
        node_id: str,
        seq: int,
        time_ms: int,
        channel: str | None,
        kind: str,
        message_id: str | None,
        sender_id: str | None,
        lamport: int | None,
        reason: str | None,
        detail: str,
    ) -> None:
        """Fast path for events without sizes, history or position (the caller
        builds ``detail`` exactly as :func:`storage.events.event_row` would)."""
        self._rows.append(
            (
                node_id, seq, time_ms, channel, kind, message_id, sender_id, lamport,
                None, None, None, -1, None, None, reason, detail,
            )
        )

    def to_table(self) -> pa.Table:
        """The buffered rows as a table of :data:`EVENT_SCHEMA`."""
        n = len(self._rows)
        columns = list(zip(*self._rows, strict=True)) if n else [()] * len(_ROW_FIELDS)
        by_name = dict(zip(_ROW_FIELDS, columns, strict=True))
        arrays: list[pa.Array] = []
        for f in EVENT_SCHEMA:
            name = f.name
            if name in ("run", "run_id", "source"):
                value = {"run": self.run, "run_id": self.run_id, "source": self.source}[name]
                arrays.append(pa.array([value], pa.string()).take(pa.array([0] * n, pa.int64())))
            elif name == "causal_history":
                arrays.append(self._history_array(list(by_name["hist"])))
            else:
                arrays.append(pa.array(by_name[name], f.type))
        return pa.Table.from_arrays(arrays, schema=EVENT_SCHEMA)

    def _history_array(self, hist: list[int]) -> pa.Array:
        """list<string> column from per-row indices into the interned histories."""
        if not self._histories:
            return pa.nulls(len(hist), pa.list_(pa.string()))
        unique = pa.array(self._histories, pa.list_(pa.string()))
        idx = pa.array(hist, pa.int64())
        idx = pc.if_else(pc.equal(idx, -1), pa.scalar(None, pa.int64()), idx)
        return unique.take(idx)

    def clear(self) -> None:
        """Forget the buffered rows (after writing them)."""
        self._rows = []
        self._histories = []
        self._hist_index = {}
        self._hist_total = 0


class EventWriter:
    """Writes :class:`EventRecords` into ``DIR/part-00000.parquet``, ``part-00001``, ...

    Each :meth:`write` appends a row group to the current file; a new file starts
    every ``rows_per_file`` rows. :meth:`close` must be called (it finalises the
    file footer); until then the files are incomplete and named ``*.parquet.tmp``.
    """

    def __init__(self, directory: str | Path, *, rows_per_file: int = 5_000_000) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.rows_per_file = rows_per_file
        self.rows = 0
        self.files: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._tmp: Path | None = None
        self._in_file = 0

    def write(self, records: EventRecords) -> None:
        """Write the buffered rows (then clears ``records``)."""
        if not len(records):
            return
        table = records.to_table()
        records.clear()
        if self._writer is None:
            self._tmp = self.directory / f"part-{len(self.files):05d}.parquet.tmp"
            self._writer = pq.ParquetWriter(
                self._tmp, EVENT_SCHEMA, compression="zstd", use_dictionary=True
            )
            self._in_file = 0
        self._writer.write_table(table)
        self.rows += table.num_rows
        self._in_file += table.num_rows
        if self._in_file >= self.rows_per_file:
            self._finish_file()

    def _finish_file(self) -> None:
        if self._writer is None or self._tmp is None:
            return
        self._writer.close()
        final = self._tmp.with_suffix("")  # drop .tmp
        self._tmp.replace(final)
        self.files.append(final)
        self._writer = None
        self._tmp = None

    def close(self) -> list[Path]:
        """Finish the last file; returns every file written."""
        self._finish_file()
        return self.files

    def abort(self) -> None:
        """Drop the unfinished file (after an error)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None


def iter_parquet_files(inputs: Iterable[str | Path]) -> list[Path]:
    """Every ``*.parquet`` file under ``inputs`` (files or directories), sorted."""
    out: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*.parquet") if q.is_file()))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"no such file or directory: {p}")
    return out
