"""The store peer's envelope archive: every envelope of a topic, by hash and by arrival.

A store peer keeps opaque (encrypted) envelopes for participants who were
away. Rows are keyed by the envelope's hash (the SDS retrieval hint), indexed
by ``(topic, arrival_ms, hash)`` for range queries, by ``(arrival_ms,
hash)`` for retention by age and by ``(topic, writer, arrival_ms, hash)`` for
retention by size (:meth:`EnvelopeArchive.trim`), which applies the store's rule
of :mod:`storage.retention` (attributed envelopes first, fair per writer, oldest
first). Obtain it as ``store.archive``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol, TypeVar

from .batch import Batch
from .database import transaction
from .records import ArchivedEnvelope
from .retention import Holder, RetentionRule, fair_cap

__all__ = ["EnvelopeArchive", "fair_cap"]

T = TypeVar("T")

_COLUMNS = "hash, topic, arrival_ms, envelope"
_IN_CHUNK = 500  # bound parameters per IN (...) list


class Runner(Protocol):
    """Runs a function on the store's database connection, in its thread."""

    def __call__(self, fn: Callable[[sqlite3.Connection], T], /) -> Awaitable[T]: ...


def _row(row: tuple[bytes, bytes, int, bytes]) -> ArchivedEnvelope:
    return ArchivedEnvelope(hash=row[0], topic=row[1], arrival_ms=row[2], envelope=row[3])


class EnvelopeArchive:
    """Envelope archive of one :class:`~storage.store.Store` (each method: one awaited call)."""

    def __init__(self, run: Runner, commit: Callable[[Batch], Awaitable[object]]) -> None:
        self._run = run
        self._commit = commit

    async def put_many(self, envelopes: Iterable[ArchivedEnvelope]) -> int:
        """Store envelopes (hashes already present are ignored); return how many were new."""
        batch = Batch()
        batch.archive_envelopes(envelopes)
        if not batch.archive:
            return 0
        result = await self._commit(batch)
        return int(getattr(result, "archived", 0))

    async def get_by_hashes(self, hashes: Iterable[bytes]) -> dict[bytes, ArchivedEnvelope]:
        """The archived envelopes among ``hashes``, by hash (unknown hashes are absent)."""
        wanted = list(dict.fromkeys(bytes(h) for h in hashes))
        if not wanted:
            return {}

        def query(db: sqlite3.Connection) -> dict[bytes, ArchivedEnvelope]:
            found: dict[bytes, ArchivedEnvelope] = {}
            for start in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[start : start + _IN_CHUNK]
                marks = ",".join("?" * len(chunk))
                for r in db.execute(
                    f"SELECT {_COLUMNS} FROM archive WHERE hash IN ({marks})", chunk
                ):
                    found[r[0]] = _row(r)
            return found

        return await self._run(query)

    async def range(
        self,
        topic: bytes,
        *,
        since_ms: int = 0,
        cursor: tuple[int, bytes] | None = None,
        limit: int = 100,
    ) -> list[ArchivedEnvelope]:
        """Envelopes of ``topic`` that arrived at or after ``since_ms``, oldest first.

        To continue, pass the last item's ``cursor`` (``(arrival_ms, hash)``);
        the next page starts strictly after it. At most ``limit`` items.
        """
        if limit < 0:
            raise ValueError("limit must be >= 0")
        sql = f"SELECT {_COLUMNS} FROM archive WHERE topic = ? AND arrival_ms >= ?"
        params: list[object] = [topic, since_ms]
        if cursor is not None:
            sql += " AND (arrival_ms, hash) > (?, ?)"
            params += [cursor[0], cursor[1]]
        sql += " ORDER BY arrival_ms, hash LIMIT ?"
        params.append(limit)

        def query(db: sqlite3.Connection) -> list[ArchivedEnvelope]:
            return [_row(r) for r in db.execute(sql, params)]

        return await self._run(query)

    async def delete_older_than(self, cutoff_ms: int) -> int:
        """Retention by age: delete envelopes that arrived before ``cutoff_ms``; return count."""

        def delete(db: sqlite3.Connection) -> int:
            with transaction(db):
                return db.execute("DELETE FROM archive WHERE arrival_ms < ?", (cutoff_ms,)).rowcount

        return await self._run(delete)

    async def trim_to_size(self, max_bytes: int) -> int:
        """Retention by size: delete the oldest envelopes until the rest total <= ``max_bytes``.

        Sizes are envelope lengths (not SQLite's on-disk overhead). Returns how
        many were deleted.
        """
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")

        def trim(db: sqlite3.Connection) -> int:
            with transaction(db):
                return db.execute(
                    "DELETE FROM archive WHERE rowid IN ("
                    " SELECT rowid FROM ("
                    "  SELECT rowid, sum(size_bytes) OVER ("
                    "   ORDER BY arrival_ms DESC, hash DESC"
                    "   ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS kept"
                    "  FROM archive)"
                    " WHERE kept > ?)",
                    (max_bytes,),
                ).rowcount

        return await self._run(trim)

    async def trim(self, rule: RetentionRule) -> int:
        """Retention by size, by the store's rule (:meth:`RetentionRule.caps`): each
        ``(topic, writer)`` the rule caps loses its oldest envelopes until it holds at
        most its cap; the others lose nothing. So unattributed envelopes (writer
        ``b""``) never push out attributed ones, and within each tier the biggest
        holders are cut first. One transaction; returns how many were deleted."""

        def trim(db: sqlite3.Connection) -> int:
            with transaction(db):
                caps = rule.caps({Holder(t, w): n for (t, w), n in _writer_bytes(db).items()})
                deleted = 0
                for holder, cap in caps.items():
                    deleted += db.execute(
                        "DELETE FROM archive WHERE rowid IN ("
                        " SELECT rowid FROM ("
                        "  SELECT rowid, sum(size_bytes) OVER ("
                        "   ORDER BY arrival_ms DESC, hash DESC"
                        "   ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS kept"
                        "  FROM archive WHERE topic = ? AND writer = ?)"
                        " WHERE kept > ?)",
                        (holder.topic, holder.writer, cap),
                    ).rowcount
                return deleted

        return await self._run(trim)

    async def writer_bytes(self) -> dict[tuple[bytes, bytes], int]:
        """Envelope bytes held per ``(topic, writer)``."""
        return await self._run(_writer_bytes)

    async def stats(self) -> tuple[int, int]:
        """``(number of envelopes, total envelope bytes)``."""

        def query(db: sqlite3.Connection) -> tuple[int, int]:
            row = db.execute(
                "SELECT count(*), coalesce(sum(size_bytes), 0) FROM archive"
            ).fetchone()
            return int(row[0]), int(row[1])

        return await self._run(query)


def _writer_bytes(db: sqlite3.Connection) -> dict[tuple[bytes, bytes], int]:
    return {
        (bytes(topic), bytes(writer)): int(size)
        for topic, writer, size in db.execute(
            "SELECT topic, writer, sum(size_bytes) FROM archive GROUP BY topic, writer"
        )
    }
