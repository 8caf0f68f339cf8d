"""SQLite persistence (aiosqlite): channel logs, protocol state, identity, event log.

Entry point: ``store = await Store.open(data_dir)`` (see :mod:`storage.store`).
The send protocol that keeps typed messages from being lost or sent twice is
described in :mod:`storage.batch`; durability choices in :mod:`storage.database`.
"""

from .archive import EnvelopeArchive
from .batch import Batch, BatchResult
from .database import DB_FILENAME, open_read_only
from .errors import (
    BatchAlreadyCommittedError,
    CorruptDatabaseError,
    DataDirLockedError,
    DataDirUnusableError,
    DiskFullError,
    MissingHistoryError,
    NewerSchemaError,
    OutboxStateError,
    StorageError,
    StoreClosedError,
    UnknownChannelError,
    ValueOutOfRangeError,
)
from .events import event_row, to_jsonable
from .lock import LOCK_FILENAME
from .records import (
    MAX_LAMPORT,
    ArchivedEnvelope,
    Channel,
    Cursor,
    EventRow,
    Identity,
    LogEntry,
    OwnState,
    PendingMessage,
    StoredEvent,
    StoredMessage,
)
from .retention import RetentionRule
from .schema import MIGRATIONS, SCHEMA_VERSION
from .store import Store

__all__ = [
    "DB_FILENAME",
    "LOCK_FILENAME",
    "MAX_LAMPORT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "ArchivedEnvelope",
    "Batch",
    "BatchAlreadyCommittedError",
    "BatchResult",
    "Channel",
    "CorruptDatabaseError",
    "Cursor",
    "DataDirLockedError",
    "DataDirUnusableError",
    "DiskFullError",
    "EnvelopeArchive",
    "EventRow",
    "Identity",
    "LogEntry",
    "MissingHistoryError",
    "NewerSchemaError",
    "OutboxStateError",
    "OwnState",
    "PendingMessage",
    "RetentionRule",
    "StorageError",
    "Store",
    "StoreClosedError",
    "StoredEvent",
    "StoredMessage",
    "UnknownChannelError",
    "ValueOutOfRangeError",
    "event_row",
    "open_read_only",
    "to_jsonable",
]
