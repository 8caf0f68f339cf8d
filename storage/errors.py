"""The exceptions storage raises: one hierarchy rooted at :class:`StorageError`.

Every failure that comes from the database file, the data directory or the
rules storage enforces is a :class:`StorageError`; callers that only want to
know "storage failed" catch that. ``sqlite3`` errors never escape a public
method raw: they are wrapped (the original is the ``__cause__``).

Arguments that are simply wrong (a negative limit, an unknown own-message
state) raise ``ValueError`` as usual; :class:`ValueOutOfRangeError` is both.
"""

from __future__ import annotations

from pathlib import Path


class StorageError(Exception):
    """Base class of every error raised by :mod:`storage`."""


class NewerSchemaError(StorageError):
    """The database was written by a newer sdschat (its schema version is ahead of ours).

    The file is left untouched; upgrade sdschat or use another data directory.
    """

    def __init__(self, path: Path, found_version: int, supported_version: int) -> None:
        self.path = path
        self.found_version = found_version
        self.supported_version = supported_version
        super().__init__(
            f"{path} has schema version {found_version}, but this sdschat only knows "
            f"versions up to {supported_version}: it was written by a newer sdschat. "
            "Upgrade sdschat, or point --data-dir elsewhere; the file was not modified."
        )


class CorruptDatabaseError(StorageError):
    """The file is not a usable sdschat database (garbage, truncated, damaged, foreign).

    Raised at open (before anything is written to the file) and, if SQLite
    later reports ``SQLITE_CORRUPT``/``SQLITE_NOTADB``, from any operation.
    """

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path} is not a usable sdschat database: {reason}")


class MissingHistoryError(StorageError):
    """The database is missing from a data directory that was used (its identity key
    file is there): starting would silently begin an empty history. Nothing was
    created; ``--new-history`` (``NodeOptions.new_history``) starts one on purpose."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class DataDirUnusableError(StorageError):
    """The data directory or its database path cannot be used (read-only file system,
    a file where the directory should be, a directory where the database should be,
    no permission). Nothing was written."""

    def __init__(self, data_dir: Path, reason: str) -> None:
        self.data_dir = data_dir
        self.reason = reason
        super().__init__(f"cannot use data directory {data_dir}: {reason}")


class DataDirLockedError(StorageError):
    """Another sdschat instance (this process or another) holds the data directory."""

    def __init__(self, data_dir: Path, holder_pid: int | None) -> None:
        self.data_dir = data_dir
        self.holder_pid = holder_pid
        holder = f" (held by pid {holder_pid})" if holder_pid is not None else ""
        super().__init__(
            f"data directory {data_dir} is in use by another sdschat instance{holder}; "
            "stop it or choose another --data-dir"
        )


class DiskFullError(StorageError):
    """The file system holding the database is full (``SQLITE_FULL``): nothing of the
    transaction was written; it may be retried once space is freed."""


class StoreClosedError(StorageError):
    """The :class:`~storage.store.Store` was used after :meth:`close`."""


class UnknownChannelError(StorageError):
    """Rows were written for a channel that was never joined (see ``join_channel``)."""

    def __init__(self, channels: list[str]) -> None:
        self.channels = channels
        super().__init__(f"channel(s) never joined: {', '.join(sorted(channels))}")


class OutboxStateError(StorageError):
    """An outbox transition that would break "each typed message is sent once, with one id".

    Raised for an unknown ``local_id``, or for marking as sent, with a message
    id, an outbox entry already recorded as sent with a *different* id.
    """


class BatchAlreadyCommittedError(StorageError):
    """A :class:`~storage.batch.Batch` was committed a second time."""


class ValueOutOfRangeError(StorageError, ValueError):
    """A value cannot be stored (for example a Lamport timestamp above 2**63 - 1)."""
