"""The database schema and its forward migrations.

The schema version lives in ``PRAGMA user_version``. ``MIGRATIONS[i]`` takes a
database from version ``i`` to version ``i + 1``; each runs inside its own
transaction together with the ``user_version`` bump, so a crash mid-migration
leaves the previous version intact. To change the schema, *append* a function
(never edit a released one)::

    def _migration_2(db: sqlite3.Connection) -> None:
        \"\"\"Version 2: what changed and why.\"\"\"
        db.execute("ALTER TABLE messages ADD COLUMN edited_at INTEGER")

    MIGRATIONS = (_migration_1, _migration_2)

Migrations must not use ``executescript`` (it commits) or change
``journal_mode`` (not allowed in a transaction).

Version 2 (lean storage): ``messages`` holds one compact row per message
(ids, author, Lamport time, state, times, content, retrieval hint and a
16-byte digest of the immutable fields); the large per-message data that only
repair, resends and the store client need (the envelope and the causal
history) lives in ``recent``, a bounded window of each channel's newest
messages (plus our own messages not yet acknowledged, ``pinned``), pruned as
new ones arrive (:func:`storage.batch.prune_recent`).

Version 3: ``messages.was_lost`` (0 or 1) records that a message arrived after the
protocol had declared it lost (``MessageDelivered.was_lost``), so a log read back
after a restart shows it recovered as it was shown when it came.

Version 4: ``messages.recovered`` (0 or 1: it arrived late, the ``↺ recovered`` mark,
decided by the node as it stores the message) and ``messages.missing_before`` (the
dependencies declared lost before it, ``MessageDelivered.missing_before``: the "✗ N
messages lost" line above it), so both read the same after a restart.

Version 5: ``recent.checksum``, a CRC-32 of the row's causal history and envelope
(:func:`storage.records.recent_checksum`), so ``sdschat doctor`` finds a byte flipped
in the bytes that resends, repair answers and the store client send again (the
``messages`` digest covers only what a reader shows).

Version 6: ``archive.writer`` (a store peer's fair eviction per writer).

Version 7: ``messages.file_id`` and the partial index ``messages_by_file``: the rows of
a file's segments found by file id (and author) without reading the log.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import NewerSchemaError

#: Written to ``PRAGMA application_id`` ("SDSC"): tells an sdschat database
#: apart from any other SQLite file.
APPLICATION_ID = 0x53445343

Migration = Callable[[sqlite3.Connection], None]

OWN_STATES_SQL = "('queued','sent','possibly_acknowledged','acknowledged','failed')"

_SCHEMA_1: tuple[str, ...] = (
    """
    CREATE TABLE identity (
        id           INTEGER PRIMARY KEY CHECK (id = 1),
        display_name TEXT    NOT NULL,
        sender_id    TEXT    NOT NULL,
        public_key   BLOB    NOT NULL,
        key_file     TEXT,
        updated_ms   INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE channels (
        name      TEXT    PRIMARY KEY,
        topic     BLOB    NOT NULL,
        is_public INTEGER NOT NULL CHECK (is_public IN (0, 1)),
        joined_at INTEGER NOT NULL,
        left_at   INTEGER
    )
    """,
    f"""
    CREATE TABLE messages (
        channel        TEXT    NOT NULL REFERENCES channels(name),
        message_id     TEXT    NOT NULL,
        sender_id      TEXT    NOT NULL,
        lamport        INTEGER NOT NULL CHECK (lamport >= 0),
        state          TEXT    CHECK (state IN {OWN_STATES_SQL}),
        delivered_at   INTEGER,
        received_at    INTEGER NOT NULL,
        content        BLOB    NOT NULL,
        retrieval_hint BLOB,
        causal_history BLOB    NOT NULL DEFAULT x'',
        envelope       BLOB,
        PRIMARY KEY (channel, message_id)
    )
    """,
    "CREATE INDEX messages_log_order ON messages (channel, lamport, message_id)",
    """
    CREATE TABLE outbox (
        local_id   INTEGER PRIMARY KEY AUTOINCREMENT,
        channel    TEXT    NOT NULL REFERENCES channels(name),
        content    BLOB    NOT NULL,
        created_ms INTEGER NOT NULL,
        message_id TEXT,
        sent_ms    INTEGER
    )
    """,
    "CREATE INDEX outbox_pending ON outbox (local_id) WHERE message_id IS NULL",
    """
    CREATE UNIQUE INDEX outbox_message ON outbox (channel, message_id)
        WHERE message_id IS NOT NULL
    """,
    """
    CREATE TABLE core_state (
        channel    TEXT    PRIMARY KEY REFERENCES channels(name),
        state      BLOB    NOT NULL,
        updated_ms INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        wall_ms    INTEGER NOT NULL,
        channel    TEXT,
        kind       TEXT    NOT NULL,
        message_id TEXT,
        sender_id  TEXT,
        lamport    INTEGER,
        size_bytes INTEGER,
        detail     TEXT    NOT NULL DEFAULT '{}'
    )
    """,
    """
    CREATE TABLE archive (
        hash       BLOB    PRIMARY KEY,
        topic      BLOB    NOT NULL,
        arrival_ms INTEGER NOT NULL,
        size_bytes INTEGER NOT NULL,
        envelope   BLOB    NOT NULL
    )
    """,
    "CREATE INDEX archive_by_topic ON archive (topic, arrival_ms, hash)",
    "CREATE INDEX archive_by_age ON archive (arrival_ms, hash)",
)


def _migration_1(db: sqlite3.Connection) -> None:
    """Version 1: identity, channels, messages, outbox, core state, events, archive."""
    for statement in _SCHEMA_1:
        db.execute(statement)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")


#: Our own messages in these states keep their envelope beyond the window (resends).
PINNED_STATES = ("queued", "sent", "possibly_acknowledged")
PINNED_STATES_SQL = "('queued','sent','possibly_acknowledged')"

#: Newest messages per channel whose envelope and causal history are kept
#: (the default of :meth:`storage.Store.open`'s ``recent_window``; also what the
#: version-2 migration keeps of an older database).
DEFAULT_RECENT_WINDOW = 2000

_RECENT_TABLE = (
    """
    CREATE TABLE recent (
        seq            INTEGER PRIMARY KEY,
        channel        TEXT    NOT NULL,
        message_id     TEXT    NOT NULL,
        pinned         INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        causal_history BLOB    NOT NULL DEFAULT x'',
        envelope       BLOB
    )
    """,
    "CREATE UNIQUE INDEX recent_by_id ON recent (channel, message_id)",
    # No (channel, seq) index: every index page a commit touches is one more 16 KB
    # WAL frame per round; pruning walks ``seq`` (the rowid) instead, rarely.
)


def _migration_2(db: sqlite3.Connection) -> None:
    """Version 2: lean storage. Envelopes and causal histories move from every
    ``messages`` row to the bounded ``recent`` table (the newest
    :data:`DEFAULT_RECENT_WINDOW` per channel, and own unacknowledged messages);
    each message row gets its ``digest``. The space freed is reused by later rows
    (and returned to the file system by the ``VACUUM`` that :func:`prepare
    <storage.database.prepare>` runs after this migration)."""
    from .records import message_digest  # no import cycle at module load

    for statement in _RECENT_TABLE:
        db.execute(statement)
    db.execute(
        f"""
        INSERT INTO recent (channel, message_id, pinned, causal_history, envelope)
        SELECT channel, message_id, state IS NOT NULL AND state IN {PINNED_STATES_SQL},
               causal_history, envelope
        FROM (SELECT rowid AS r, channel, message_id, state, causal_history, envelope,
                     row_number() OVER (PARTITION BY channel ORDER BY rowid DESC) AS age
              FROM messages)
        WHERE age <= ? OR (state IS NOT NULL AND state IN {PINNED_STATES_SQL})
        ORDER BY r
        """,
        (DEFAULT_RECENT_WINDOW,),
    )
    db.execute("ALTER TABLE messages ADD COLUMN digest BLOB")
    db.create_function("sdschat_digest", 5, message_digest, deterministic=True)
    # DROP COLUMN leaves the dropped values inside the records: empty them first.
    db.execute(
        "UPDATE messages SET digest = "
        "sdschat_digest(channel, message_id, sender_id, lamport, content), "
        "envelope = NULL, causal_history = x''"
    )
    db.execute("ALTER TABLE messages DROP COLUMN envelope")
    db.execute("ALTER TABLE messages DROP COLUMN causal_history")


def _migration_3(db: sqlite3.Connection) -> None:
    """Version 3: ``messages.was_lost``, set when a message arrived after it had been
    declared lost. Filled for the messages whose ``MessageDelivered`` event (its
    detail says ``"was_lost":true``) is still in the event log; 0 for the others
    (their events were exported and deleted: nothing else recorded it)."""
    db.execute(
        "ALTER TABLE messages ADD COLUMN "
        "was_lost INTEGER NOT NULL DEFAULT 0 CHECK (was_lost IN (0, 1))"
    )
    # event details are compact JSON (storage.events._dumps): instr() spares the parse
    # of every ordinary delivery; CASE keeps json_extract off a damaged detail
    db.execute(
        """
        UPDATE messages SET was_lost = 1
        WHERE (channel, message_id) IN (
            SELECT channel, message_id FROM events
            WHERE kind = 'MessageDelivered' AND channel IS NOT NULL
              AND message_id IS NOT NULL
              AND CASE WHEN instr(detail, '"was_lost":true') > 0 AND json_valid(detail)
                       THEN json_extract(detail, '$.was_lost') END = 1
        )
        """
    )


def _migration_4(db: sqlite3.Connection) -> None:
    """Version 4: ``messages.recovered`` (it arrived late) and ``messages.missing_before``
    (dependencies declared lost before it). Filled from what is still in the event log:
    ``missing_before`` from each ``MessageDelivered`` detail; ``recovered`` for every
    ``was_lost`` message and for a message that a ``MessagesMissing`` event named at or
    before its ``MessageDelivered`` event (one named after it had been delivered was in
    storage, not late). The rule's third case, older than a message of its author that
    came first, was never recorded: those, and messages whose events were exported and
    deleted, keep 0."""
    db.execute(
        "ALTER TABLE messages ADD COLUMN "
        "recovered INTEGER NOT NULL DEFAULT 0 CHECK (recovered IN (0, 1))"
    )
    db.execute(
        "ALTER TABLE messages ADD COLUMN "
        "missing_before INTEGER NOT NULL DEFAULT 0 CHECK (missing_before >= 0)"
    )
    db.execute("UPDATE messages SET recovered = 1 WHERE was_lost = 1")
    # compact JSON (storage.events._dumps): instr() spares the parse of every ordinary
    # delivery ("missing_before":0); CASE keeps json_extract off a damaged detail
    db.execute(
        """
        WITH counted AS MATERIALIZED (
            SELECT channel, message_id, MAX(n) AS n FROM (
                SELECT channel, message_id,
                       CASE WHEN instr(detail, '"missing_before":') > 0
                                 AND instr(detail, '"missing_before":0,') = 0
                                 AND instr(detail, '"missing_before":0}') = 0
                                 AND json_valid(detail)
                            THEN json_extract(detail, '$.missing_before') END AS n
                FROM events
                WHERE kind = 'MessageDelivered' AND channel IS NOT NULL
                  AND message_id IS NOT NULL
            )
            WHERE typeof(n) = 'integer' AND n > 0
            GROUP BY channel, message_id
        )
        UPDATE messages SET missing_before = counted.n
        FROM counted
        WHERE messages.channel = counted.channel AND messages.message_id = counted.message_id
        """
    )
    db.execute(
        """
        WITH named AS MATERIALIZED (
            SELECT e.channel AS channel, json_extract(j.value, '$.message_id') AS message_id,
                   MIN(e.wall_ms) AS at
            FROM events e,
                 json_each(CASE WHEN json_valid(e.detail) THEN e.detail ELSE '{}' END,
                           '$.missing') j
            WHERE e.kind = 'MessagesMissing' AND e.channel IS NOT NULL AND j.type = 'object'
            GROUP BY 1, 2
        ),
        delivered AS MATERIALIZED (
            SELECT channel, message_id, MAX(wall_ms) AS at FROM events
            WHERE kind = 'MessageDelivered' AND channel IS NOT NULL
              AND message_id IS NOT NULL
            GROUP BY channel, message_id
        )
        UPDATE messages SET recovered = 1
        WHERE recovered = 0 AND (channel, message_id) IN (
            SELECT n.channel, n.message_id FROM named n
            JOIN delivered d ON d.channel = n.channel AND d.message_id = n.message_id
            WHERE n.at <= d.at
        )
        """
    )


def _migration_5(db: sqlite3.Connection) -> None:
    """Version 5: ``recent.checksum`` (CRC-32 of causal history and envelope), filled
    from the bytes as they are now (damage done before cannot be told apart)."""
    from .records import recent_checksum  # no import cycle at module load

    db.execute("ALTER TABLE recent ADD COLUMN checksum INTEGER")
    db.create_function("sdschat_recent_checksum", 2, recent_checksum, deterministic=True)
    db.execute("UPDATE recent SET checksum = sdschat_recent_checksum(causal_history, envelope)")


def _migration_6(db: sqlite3.Connection) -> None:
    """Version 6: ``archive.writer``, whom a store peer attributes an envelope to (its
    eviction is fair per writer, ``storage/archive.py``), indexed per topic by age.
    Envelopes archived before are unattributed (``x''``)."""
    db.execute("ALTER TABLE archive ADD COLUMN writer BLOB NOT NULL DEFAULT x''")
    db.execute(
        "CREATE INDEX archive_by_writer ON archive (topic, writer, arrival_ms, hash, size_bytes)"
    )


def _migration_7(db: sqlite3.Connection) -> None:
    """Version 7: ``messages.file_id``, the file id a file segment row names (NULL for
    every other row; :func:`storage.records.segment_file_id`), and the partial index
    ``messages_by_file`` on it: a file's segments are found by one index range instead
    of a search of the whole log (issue 26 §5: a ``/save`` read every row). Filled here
    for the segments already stored."""
    from .records import segment_file_id  # no import cycle at module load

    db.execute("ALTER TABLE messages ADD COLUMN file_id TEXT")
    db.create_function("sdschat_segment_file_id", 1, segment_file_id, deterministic=True)
    db.execute(
        "UPDATE messages SET file_id = sdschat_segment_file_id(content) "
        "WHERE substr(content, 1, 2) = x'FF08'"
    )
    db.execute(FILE_INDEX)


#: The index from a file id to its segment rows (schema version 7).
FILE_INDEX = (
    "CREATE INDEX messages_by_file ON messages (channel, file_id, sender_id, lamport, "
    "message_id) WHERE file_id IS NOT NULL"
)

#: Append-only list of migrations; ``MIGRATIONS[i]`` upgrades version i to i + 1.
MIGRATIONS: tuple[Migration, ...] = (
    _migration_1, _migration_2, _migration_3, _migration_4, _migration_5, _migration_6,
    _migration_7,
)

#: The version this sdschat writes.
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(db: sqlite3.Connection) -> int:
    """Return the database's ``PRAGMA user_version``."""
    row = db.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def migrate(
    db: sqlite3.Connection,
    path: Path,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> tuple[int, int]:
    """Bring ``db`` (autocommit connection) up to ``len(migrations)``; return (from, to).

    Raises :class:`~storage.errors.NewerSchemaError`, without writing, if the
    file is already ahead of ``migrations``.
    """
    target = len(migrations)
    start = schema_version(db)
    if start > target:
        raise NewerSchemaError(path, start, target)
    for version in range(start, target):
        db.execute("BEGIN IMMEDIATE")
        try:
            migrations[version](db)
            db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    return start, target
