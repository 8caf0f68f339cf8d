"""Everything one call into the SDS core produced, written in one transaction.

A call into the core (send, receive, timer) yields new messages, own-message
state changes, events and a new exported core state. If these were written
separately, a crash between two writes would leave a state blob that
disagrees with the log (a message "delivered" per the state but absent from
the log, or the reverse). So the node collects them in a :class:`Batch` and
hands it to :meth:`storage.store.Store.commit_batch`: one awaited call, one
SQLite transaction, all or nothing.

The send path: ONE fsynced commit per round of typed lines. The node numbers
the typed line itself (``Store.next_local_id`` at start, then counting), has
the core produce its message in memory, and commits the outbox entry, already
carrying its message id, together with the message, its envelope, the core
state and the events::

    local_id = next_local_id; next_local_id += 1              # in memory
    produced = core.send(text, now_ms)                        # sans-I/O
    batch = Batch()
    batch.record_typed(local_id, StoredMessage(..., state=OwnState.QUEUED,
                       envelope=env), created_ms=now_ms)
    batch.set_core_state(channel, core.export_state())
    await store.commit_batch(batch)                           # (1) fsynced, atomic
    transport.send(env)                                       # (2) only now

* ``kill -9`` before (1) returns: nothing of the line is on disk and nothing
  left the process; the line was never reported accepted (its future and its
  ``queued`` event come after the commit).
* between (1) and (2), or after (2): the line, its message, its envelope and an
  outbox entry carrying the message id are on disk together; the restarted
  core resends the *same* envelope (same id) on its resend timer, and receivers
  drop duplicates by id.

An outbox entry without a message id, produced later, remains for lines that
cannot be produced at once (the channel not joined, a line the core refuses:
:meth:`Batch.enqueue_numbered`, in the same single commit) and for
:meth:`~storage.store.Store.enqueue_outgoing`. Such pending lines are
produced at the next start, which is why nothing typed is sent twice with
different ids::

    local_id = await store.enqueue_outgoing(channel, text)   # (1) fsynced
    ...                                                      # on restart: pending_outgoing()
    produced = core.send(text, now_ms)                       # sans-I/O
    batch = Batch()
    batch.record_sent(local_id, StoredMessage(..., state=OwnState.QUEUED, envelope=env))
    batch.set_core_state(channel, core.export_state())
    batch.add_events(produced_events, now_ms)
    await store.commit_batch(batch)                          # (2) fsynced, atomic
    transport.send(env)                                      # (3) only now

* ``kill -9`` before (1) returns: nothing was promised to anyone; the line is
  lost only if the person never saw it accepted.
* between (1) and (2): the outbox row has no message id; the core state on disk
  predates the send, so no message with any id left the process. On restart
  ``pending_outgoing()`` returns it and the node produces it afresh: once.
* between (2) and (3), or after (3): the message, its envelope and a core
  state whose outgoing buffer holds it are on disk together; the restarted
  core resends the *same* envelope (same id) on its resend timer, and
  receivers drop duplicates by id. The outbox row now carries the id, so it is
  no longer pending.

:meth:`Batch.mark_sent` refuses (``OutboxStateError``, whole batch rolled back)
to give an outbox entry a second, different message id.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field

from .errors import BatchAlreadyCommittedError, OutboxStateError, UnknownChannelError
from .events import event_row
from .records import (
    ArchivedEnvelope,
    EventRow,
    OwnState,
    StoredMessage,
    encode_causal_history,
    message_digest,
    recent_checksum,
    segment_file_id,
)
from .schema import DEFAULT_RECENT_WINDOW, PINNED_STATES

MESSAGE_COLUMNS = (
    "channel, message_id, sender_id, lamport, state, delivered_at, received_at, "
    "content, retrieval_hint, digest, was_lost, recovered, missing_before, file_id"
)
_INSERT_MESSAGE = (
    f"INSERT OR IGNORE INTO messages ({MESSAGE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_INSERT_RECENT = (
    "INSERT OR REPLACE INTO recent (channel, message_id, pinned, causal_history, envelope, "
    "checksum) VALUES (?,?,?,?,?,?)"
)
_PINNED = frozenset(PINNED_STATES)
_INSERT_EVENT = (
    "INSERT INTO events (wall_ms, channel, kind, message_id, sender_id, lamport, size_bytes, "
    "detail) VALUES (?,?,?,?,?,?,?,?)"
)
_INSERT_ARCHIVE = (
    "INSERT OR IGNORE INTO archive (hash, topic, arrival_ms, size_bytes, envelope, writer) "
    "VALUES (?,?,?,?,?,?)"
)


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What :meth:`~storage.store.Store.commit_batch` wrote.

    ``new_messages`` lists the ``(channel, message_id)`` pairs actually inserted
    (a pair absent from it was already stored: a replay). ``local_ids`` are the
    outbox ids of :meth:`Batch.enqueue_outgoing` calls, in call order.
    ``event_ids`` are the ids the appended events got.
    """

    new_messages: tuple[tuple[str, str], ...] = ()
    local_ids: tuple[int, ...] = ()
    event_ids: range = range(0)
    own_states_updated: int = 0
    archived: int = 0

    def is_new(self, channel: str, message_id: str) -> bool:
        """Whether this batch inserted ``message_id`` (False: it was a duplicate)."""
        return (channel, message_id) in self.new_messages


@dataclass(slots=True)
class Batch:
    """Writes to apply together, in one transaction. Fill it, then ``commit_batch`` it once.

    Within the transaction the parts are applied in this order: message
    inserts, outbox enqueues, outbox transitions (``mark_sent``), own-state
    updates, core states, events, archive. So a state update may refer to a
    message inserted by the same batch.

    ``durable=True`` forces an fsync at commit (``synchronous=FULL``); any batch
    with an outbox enqueue or transition is durable regardless.
    """

    durable: bool = False
    messages: list[StoredMessage] = field(default_factory=list)
    enqueues: list[tuple[str, bytes, int | None]] = field(default_factory=list)
    typed: list[tuple[int, str, bytes, int | None, str]] = field(default_factory=list)
    sent: list[tuple[int, str, str | None]] = field(default_factory=list)
    own_states: list[tuple[str, str, OwnState]] = field(default_factory=list)
    core_states: dict[str, bytes] = field(default_factory=dict)
    events: list[EventRow] = field(default_factory=list)
    archive: list[ArchivedEnvelope] = field(default_factory=list)
    committed: bool = False

    def insert_message(self, message: StoredMessage) -> None:
        """Add a message to the log (ignored at commit if ``(channel, id)`` is already stored)."""
        self.messages.append(message)

    def insert_messages(self, messages: Iterable[StoredMessage]) -> None:
        """Add several messages to the log."""
        self.messages.extend(messages)

    def enqueue_outgoing(self, channel: str, content: bytes, created_ms: int | None = None) -> int:
        """Record typed text; its outbox id will be ``result.local_ids[returned index]``."""
        self.enqueues.append((channel, bytes(content), created_ms))
        return len(self.enqueues) - 1

    def enqueue_numbered(
        self, local_id: int, channel: str, content: bytes, created_ms: int | None = None
    ) -> None:
        """Record typed text as pending (no message yet) under the caller's ``local_id``."""
        self.typed.append((local_id, channel, bytes(content), created_ms, ""))

    def record_typed(
        self, local_id: int, message: StoredMessage, created_ms: int | None = None
    ) -> None:
        """Record a typed line and the message the core made of it, in one step.

        The outbox entry ``local_id`` (numbered by the caller, see
        :meth:`~storage.store.Store.next_local_id`; an id already used fails the
        commit) is written already carrying ``message.message_id``, in the same
        fsynced transaction as the message: one fsync per typed line instead of
        two (see the module docstring). ``message.content`` is the line.
        """
        self.insert_message(message)
        self.typed.append(
            (local_id, message.channel, bytes(message.content), created_ms, message.message_id)
        )

    def mark_sent(self, local_id: int, message_id: str, *, channel: str | None = None) -> None:
        """Record that outbox entry ``local_id`` became SDS message ``message_id``.

        Idempotent for the same id; a different id for an already-sent entry,
        an unknown ``local_id`` or a ``channel`` other than the entry's raise
        :class:`~storage.errors.OutboxStateError` at commit.
        """
        self.sent.append((local_id, message_id, channel))

    def record_sent(self, local_id: int, message: StoredMessage) -> None:
        """Insert our produced ``message`` and mark outbox entry ``local_id`` as sent with it.

        Put the core state and the events of the same core call in this batch
        too (see the module docstring for the crash analysis).
        """
        self.insert_message(message)
        self.mark_sent(local_id, message.message_id, channel=message.channel)

    def set_own_state(
        self, channel: str, message_ids: Iterable[str], state: OwnState | str
    ) -> None:
        """Set the state of our own messages (rows of others' messages are left alone)."""
        own = OwnState(state)
        self.own_states.extend((channel, mid, own) for mid in message_ids)

    def set_core_state(self, channel: str, state: bytes) -> None:
        """Replace the channel's exported core state (the last call per channel wins)."""
        self.core_states[channel] = bytes(state)

    def add_event(self, event: object, wall_ms: int) -> None:
        """Append one core event (converted with :func:`storage.events.event_row`)."""
        self.events.append(event_row(event, wall_ms))

    def add_events(self, events: Iterable[object], wall_ms: int) -> None:
        """Append core events, all stamped ``wall_ms``."""
        self.events.extend(event_row(e, wall_ms) for e in events)

    def add_event_rows(self, rows: Iterable[EventRow]) -> None:
        """Append already-converted event rows."""
        self.events.extend(rows)

    def archive_envelopes(self, envelopes: Iterable[ArchivedEnvelope]) -> None:
        """Keep envelopes in the store-peer archive (ignored if the hash is already there)."""
        self.archive.extend(envelopes)

    @property
    def needs_fsync(self) -> bool:
        """Whether the commit runs with ``synchronous=FULL``."""
        return self.durable or bool(self.enqueues) or bool(self.sent) or bool(self.typed)

    def __len__(self) -> int:
        return (
            len(self.messages)
            + len(self.enqueues)
            + len(self.typed)
            + len(self.sent)
            + len(self.own_states)
            + len(self.core_states)
            + len(self.events)
            + len(self.archive)
        )


def _check_channels(db: sqlite3.Connection, batch: Batch) -> None:
    wanted = {m.channel for m in batch.messages}
    wanted.update(c for c, _, _ in batch.enqueues)
    wanted.update(t[1] for t in batch.typed)
    wanted.update(batch.core_states)
    if not wanted:
        return
    if len(wanted) == 1:  # a node's round: one channel, an indexed lookup (json_each: 5x)
        (name,) = wanted
        row = db.execute("SELECT 1 FROM channels WHERE name = ?", (name,)).fetchone()
        found = {name} if row is not None else set()
    else:
        found = {
            row[0]
            for row in db.execute(
                "SELECT name FROM channels WHERE name IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(wanted)),),
            )
        }
    if missing := wanted - found:
        raise UnknownChannelError(sorted(missing))


def existing_ids(db: sqlite3.Connection, channel: str, ids: Iterable[str]) -> set[str]:
    """The subset of ``ids`` stored in ``channel`` (one query, any number of ids)."""
    wanted = list(ids)
    if not wanted:
        return set()
    if len(wanted) <= _FEW_IDS:  # a node's round: a few ids, bound as parameters
        sql = _FEW_IDS_SQL.get(len(wanted))
        if sql is None:
            marks = ",".join("?" * len(wanted))
            sql = _FEW_IDS_SQL[len(wanted)] = (
                f"SELECT message_id FROM messages WHERE channel = ? AND message_id IN ({marks})"
            )
        return {row[0] for row in db.execute(sql, (channel, *wanted))}
    return {
        row[0]
        for row in db.execute(
            "SELECT message_id FROM messages WHERE channel = ? "
            "AND message_id IN (SELECT value FROM json_each(?))",
            (channel, json.dumps(wanted)),
        )
    }


_FEW_IDS = 8
"""Up to this many ids, :func:`existing_ids` binds them as parameters (one statement per
count, kept in SQLite's statement cache); more go as one JSON array."""
_FEW_IDS_SQL: dict[int, str] = {}


class RecentWindow:
    """Keeps the ``recent`` table (envelopes, causal histories) to ``size`` rows per channel.

    The newest ``size`` messages of each channel keep their envelope (SDS-R
    repair answers, the store client's checks) and causal history (export);
    our own messages not yet acknowledged keep theirs until they are
    (``pinned``: the core resends the identical envelope). Older messages keep
    only their compact ``messages`` row. Pruning walks ``size`` index entries,
    so it runs once every ``size // 16`` inserts per channel (the window is at
    most that much over its size between two prunes), and for a channel's
    first insert after opening (a smaller configured window takes effect).
    Used only on the connection's thread.
    """

    __slots__ = ("_every", "_since", "size")

    def __init__(self, size: int = DEFAULT_RECENT_WINDOW) -> None:
        if size < 0:
            raise ValueError("recent window must be >= 0")
        self.size = size
        self._every = max(1, size // 16)
        self._since: dict[str, int] = {}

    def inserted(self, db: sqlite3.Connection, channel: str, count: int) -> None:
        since = self._since.get(channel, self._every) + count
        if since < self._every:
            self._since[channel] = since
            return
        self._since[channel] = 0
        self.prune(db, channel)

    def prune(self, db: sqlite3.Connection, channel: str) -> int:
        """Drop the envelope rows of ``channel`` beyond the window now; how many."""
        # Both walk the rowid (seq): the newest rows of every channel, then the rows
        # below the cut (left there: other channels' and pinned ones).
        row = db.execute(
            "SELECT seq FROM recent NOT INDEXED WHERE channel = ? "
            "ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (channel, self.size),
        ).fetchone()
        if row is None:
            return 0
        return db.execute(
            "DELETE FROM recent NOT INDEXED WHERE seq <= ? AND channel = ? AND pinned = 0",
            (row[0], channel),
        ).rowcount


def _insert_messages(
    db: sqlite3.Connection, messages: list[StoredMessage], now_ms: int, window: RecentWindow
) -> list[tuple[str, str]]:
    by_channel: dict[str, list[str]] = {}
    for m in messages:
        by_channel.setdefault(m.channel, []).append(m.message_id)
    present: set[tuple[str, str]] = set()
    for channel, ids in by_channel.items():
        present.update((channel, i) for i in existing_ids(db, channel, ids))
    new: list[tuple[str, str]] = []
    rows = []
    recent = []
    inserted: dict[str, int] = {}
    for m in messages:
        key = (m.channel, m.message_id)
        if key in present:
            continue
        present.add(key)  # a second copy within the batch is a duplicate too
        new.append(key)
        content = bytes(m.content)
        state = None if m.state is None else m.state.value
        rows.append(
            (
                m.channel,
                m.message_id,
                m.sender_id,
                m.lamport,
                state,
                m.delivered_at,
                now_ms if m.received_at is None else m.received_at,
                content,
                m.retrieval_hint,
                message_digest(m.channel, m.message_id, m.sender_id, m.lamport, content),
                int(m.was_lost),
                int(m.recovered or m.was_lost),
                m.missing_before,
                segment_file_id(content),
            )
        )
        history = encode_causal_history(m.causal_history)
        recent.append(
            (
                m.channel,
                m.message_id,
                int(state in _PINNED),
                history,
                m.envelope,
                recent_checksum(history, m.envelope),
            )
        )
        inserted[m.channel] = inserted.get(m.channel, 0) + 1
    db.executemany(_INSERT_MESSAGE, rows)
    db.executemany(_INSERT_RECENT, recent)
    for channel, count in inserted.items():
        window.inserted(db, channel, count)
    return new


def _mark_sent(
    db: sqlite3.Connection, sent: list[tuple[int, str, str | None]], now_ms: int
) -> None:
    for local_id, message_id, channel in sent:
        row = db.execute(
            "SELECT channel, message_id FROM outbox WHERE local_id = ?", (local_id,)
        ).fetchone()
        if row is None:
            raise OutboxStateError(f"no outbox entry with local_id {local_id}")
        entry_channel, current = row
        if channel is not None and channel != entry_channel:
            raise OutboxStateError(
                f"outbox entry {local_id} belongs to channel {entry_channel!r}, not {channel!r}"
            )
        if current == message_id:
            continue
        if current is not None:
            raise OutboxStateError(
                f"outbox entry {local_id} was already sent as {current}; refusing to "
                f"record it again as {message_id} (that would send it twice)"
            )
        db.execute(
            "UPDATE outbox SET message_id = ?, sent_ms = ? WHERE local_id = ?",
            (message_id, now_ms, local_id),
        )


def apply_batch(
    db: sqlite3.Connection, batch: Batch, now_ms: int, window: RecentWindow | None = None
) -> BatchResult:
    """Write ``batch`` inside the caller's transaction; raise (caller rolls back) on any error.

    ``window`` keeps the ``recent`` table bounded (default: a fresh
    :class:`RecentWindow` of the default size).
    """
    if batch.committed:
        raise BatchAlreadyCommittedError("this Batch was already committed")
    if window is None:
        window = RecentWindow()
    _check_channels(db, batch)
    new = _insert_messages(db, batch.messages, now_ms, window) if batch.messages else []

    local_ids: list[int] = []
    for channel, content, created_ms in batch.enqueues:
        cur = db.execute(
            "INSERT INTO outbox (channel, content, created_ms) VALUES (?,?,?)",
            (channel, content, now_ms if created_ms is None else created_ms),
        )
        assert cur.lastrowid is not None
        local_ids.append(cur.lastrowid)

    if batch.typed:
        db.executemany(
            "INSERT INTO outbox (local_id, channel, content, created_ms, message_id, sent_ms) "
            "VALUES (?,?,?,?,?,?)",
            [
                (
                    local_id,
                    channel,
                    content,
                    now_ms if created_ms is None else created_ms,
                    message_id or None,
                    now_ms if message_id else None,
                )
                for local_id, channel, content, created_ms, message_id in batch.typed
            ],
        )

    _mark_sent(db, batch.sent, now_ms)

    updated = 0
    if batch.own_states:
        before = db.total_changes
        db.executemany(
            "UPDATE messages SET state = ? WHERE channel = ? AND message_id = ? "
            "AND state IS NOT NULL AND state != ?",
            [(s.value, c, m, s.value) for c, m, s in batch.own_states],
        )
        updated = db.total_changes - before
        done = [(c, m) for c, m, s in batch.own_states if s.value not in _PINNED]
        if done:  # acknowledged or failed: its envelope may leave the window now
            db.executemany(
                "UPDATE recent SET pinned = 0 WHERE channel = ? AND message_id = ? "
                "AND pinned = 1",
                done,
            )

    if batch.core_states:
        db.executemany(
            "INSERT INTO core_state (channel, state, updated_ms) VALUES (?,?,?) "
            "ON CONFLICT (channel) DO UPDATE SET state = excluded.state, "
            "updated_ms = excluded.updated_ms",
            [(c, s, now_ms) for c, s in batch.core_states.items()],
        )

    event_ids = range(0)
    if batch.events:
        db.executemany(
            _INSERT_EVENT,
            [
                (
                    e.wall_ms,
                    e.channel,
                    e.kind,
                    e.message_id,
                    e.sender_id,
                    e.lamport,
                    e.size_bytes,
                    e.detail,
                )
                for e in batch.events
            ],
        )
        last = int(db.execute("SELECT last_insert_rowid()").fetchone()[0])
        event_ids = range(last - len(batch.events) + 1, last + 1)

    archived = 0
    if batch.archive:
        before = db.total_changes
        db.executemany(
            _INSERT_ARCHIVE,
            [
                (a.hash, a.topic, a.arrival_ms, len(a.envelope), a.envelope, a.writer)
                for a in batch.archive
            ],
        )
        archived = db.total_changes - before

    return BatchResult(
        new_messages=tuple(new),
        local_ids=tuple(local_ids),
        event_ids=event_ids,
        own_states_updated=updated,
        archived=archived,
    )
