"""The store peer's archive behind one narrow protocol, so that any engine can back it.

A store peer (``net/store_peer.py``) speaks the store protocol (``net/store.proto``)
to nodes and keeps nothing itself: every envelope it accepts goes to an
:class:`Archive`, and every query is answered from one. The protocol a store needs
of an engine is what its queries ask, no more:

* :meth:`Archive.put`: envelopes, each with its hash, topic, arrival time and
  writer; stored once per hash however often they come (returns how many were new);
* :meth:`Archive.by_hashes`: the envelopes among some hashes;
* :meth:`Archive.range`: a topic's envelopes from a time (``since``) or strictly
  after a position (``cursor`` = ``(arrival_ms, hash)`` of the last one a client
  got), oldest first, a page at a time (``limit``);
* :meth:`Archive.count`: how many such envelopes there are (for progress);
* :meth:`Archive.run_retention`: apply the store's rule (:mod:`storage.retention`)
  with its limits; an engine that several store peers share applies it once;
* the archive's identity (:attr:`Archive.archive_id`: store peers that answer from
  the same archive give the same id, so a client can take a position from one of
  them to another), its oldest and newest arrival times and its size.

Engines: :mod:`net.store_sqlite` (one SQLite file, one machine: the default) and
:mod:`net.store_jetstream` (a replicated NATS JetStream stream that any number of
store peers share). Another (a CockroachDB or ScyllaDB table keyed by ``(topic,
arrival_ms, hash)`` with a hash index) would implement the same class.

Errors: :class:`ArchiveUnavailable` when the engine cannot be reached, or cannot
take writes (``full``); the store peer keeps serving what it still can (its
buffer, reads when only writes fail) and retries, without a restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from net.errors import NetError
from storage.records import ArchivedEnvelope
from storage.retention import RetentionRule

__all__ = ["Archive", "ArchiveUnavailable", "ArchivedEnvelope", "Cursor", "RetentionRun"]

Cursor = tuple[int, bytes]
"""A position in a topic's archive: ``(arrival_ms, hash)`` of the last envelope read."""


class ArchiveUnavailable(NetError):
    """The archive cannot be used right now.

    Attributes:
        reason: what the engine said (for one log line).
        full: True when only writes are refused (storage limits reached): reads still
            work. False when the engine cannot be reached at all.
    """

    def __init__(self, reason: str, *, full: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.full = full


class RetentionRun:
    """What one retention run did: ``deleted`` envelopes, and ``details`` for its log line."""

    __slots__ = ("deleted", "details")

    def __init__(self, deleted: int = 0, **details: object) -> None:
        self.deleted = deleted
        self.details = details


class Archive(Protocol):
    """An envelope archive (see the module docstring). Every method may raise
    :class:`ArchiveUnavailable`; none may lose an envelope it said it stored."""

    engine: str
    """``"sqlite"``, ``"jetstream"``: what backs it (``Info.engine``)."""

    @property
    def archive_id(self) -> bytes:
        """16 bytes naming this archive; every store peer answering from it gives the same."""
        ...

    async def open(self) -> None:
        """Open (create if new); raises the engine's start errors."""
        ...

    async def close(self) -> None:
        """Release everything (idempotent)."""
        ...

    async def put(self, items: Sequence[ArchivedEnvelope]) -> int:
        """Store envelopes not stored yet (by hash); return how many were new."""
        ...

    async def by_hashes(self, hashes: Sequence[bytes]) -> dict[bytes, ArchivedEnvelope]:
        """The stored envelopes among ``hashes`` (unknown ones absent)."""
        ...

    async def range(
        self,
        topic: bytes,
        *,
        since_ms: int = 0,
        cursor: Cursor | None = None,
        limit: int = 100,
        reader: object = None,
    ) -> list[ArchivedEnvelope]:
        """At most ``limit`` envelopes of ``topic``, oldest first: from ``since_ms`` on, or
        strictly after ``cursor``. Fewer than ``limit``: the range has no more now.
        ``reader`` names who reads (a query connection) so that an engine may keep a
        reading position between calls; :meth:`release` forgets it."""
        ...

    async def count(
        self, topic: bytes, *, since_ms: int = 0, until_ms: int = 0, cursor: Cursor | None = None
    ) -> int:
        """How many envelopes :meth:`range` would give, up to ``until_ms`` (0: no bound)."""
        ...

    async def oldest_arrival(self) -> int:
        """The oldest arrival time kept (0: empty)."""
        ...

    async def newest_arrival(self) -> int:
        """The newest arrival time kept (0: empty): a store's arrival clock starts after it."""
        ...

    async def stats(self) -> tuple[int, int]:
        """``(envelopes, bytes)`` held."""
        ...

    async def run_retention(self, rule: RetentionRule, now_ms: int) -> RetentionRun:
        """Apply ``rule`` (by age at ``now_ms``, then by size)."""
        ...

    def release(self, reader: object) -> None:
        """``reader`` reads no more (its query connection closed)."""
        ...
