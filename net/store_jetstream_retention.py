"""Retention of a JetStream archive: one store peer at a time holds a lease and applies
the store's rule (:mod:`storage.retention`) by deleting messages.

Every store peer in front of one archive tries to take the lease; one holds it:

* **The lease** is the key ``retention`` of the KV bucket ``<stream>_LEASE``, whose
  entries live ``--jetstream-lease`` seconds (15) unless rewritten. A peer takes it
  with ``create()`` (which succeeds only while nobody holds it), renews it every
  third of its lifetime with ``update(last=revision)`` (which fails if another took
  it), and gives it back on a clean exit (deleted: the next peer takes it within a
  third of a lifetime). A holder that could not renew for two thirds of the
  lifetime stops deleting before anyone else may take over, so two holders never
  delete at once unless a peer stalls for more than a third of the lifetime in the
  middle of a run (and then they delete the same oldest envelopes: the rule is the
  same at both).
* **The holder knows what the archive holds**: it reads the headers of every
  message once (a headers-only :class:`net.jetstream_reader.PushReader` over the
  whole stream) and follows new ones: per holder ``(topic, writer)`` its envelopes'
  arrival times, hashes and sizes (about 200 bytes of memory per envelope).
* **A run** (every ``--retention-interval``, and at once when an eighth of
  ``--max-bytes`` arrived since the last) applies the rule exactly as the SQLite
  engine does: by age (``RetentionRule.age_cutoff``), then by size
  (``RetentionRule.caps``: attributed envelopes before unattributed, max-min fair
  per holder, a capped holder keeping its newest envelopes within its cap). Each
  envelope let go is deleted from the stream, then from the index (only if the
  index still names that message).
* **The audit**: the holder also checks every message it has not checked before
  (from a mark kept in ``<stream>_META``) against the index, ten seconds after it
  appeared: an envelope without an entry (its archiving peer died between publish
  and index) gets one; a second copy of an indexed envelope is deleted. So
  by-hash queries find every envelope, and each is stored once.

Which peer holds the lease and with which limits is in the lease's value; a peer
whose own ``--max-age``/``--max-bytes`` differ says so once in its log (the
holder's limits are the ones applied: give every store peer the same).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import secrets
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from nats.aio.client import Client as NatsClient
from nats.js.client import JetStreamContext
from nats.js.errors import (
    APIError,
    KeyDeletedError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
)
from nats.js.kv import KeyValue

from net.jetstream_reader import NATS_ERRORS, PushReader, ReaderBroken, StreamMessage
from net.relay_log import RelayLogger
from net.store_engine import ArchiveUnavailable, RetentionRun
from storage.retention import Holder, RetentionRule

__all__ = ["LEASE_KEY", "Holdings", "RetentionLease"]



class LeaseSettings(Protocol):
    """What the lease reads of the archive's settings (``JetStreamSettings``)."""

    @property
    def stream(self) -> str: ...
    @property
    def subjects(self) -> str: ...
    @property
    def lease_bucket(self) -> str: ...
    @property
    def lease_s(self) -> float: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def max_age_ms(self) -> int: ...
    @property
    def audit_delay_s(self) -> float: ...


class LeaseArchive(Protocol):
    """The archive as the lease uses it (``net.store_jetstream.JetStreamArchive``, which
    owns the lease; the lease never imports it back)."""

    @property
    def settings(self) -> LeaseSettings: ...
    @property
    def nc(self) -> NatsClient: ...
    @property
    def js(self) -> JetStreamContext: ...
    @property
    def index(self) -> KeyValue: ...
    async def bucket(self, name: str, ttl: float | None = None) -> KeyValue: ...
    async def indexed(self, digest: bytes) -> tuple[int, int] | None: ...
    async def delete_message(self, seq: int) -> bool: ...


_WRONG_LAST = (10071, 10164)  # JetStream: "wrong last sequence" (a conditional write lost)
LEASE_KEY = "retention"
AUDIT_KEY = "audited-through"

_FAILURES: tuple[type[BaseException], ...] = (ArchiveUnavailable, *NATS_ERRORS)
_READ_FAILURES: tuple[type[BaseException], ...] = (ReaderBroken, *_FAILURES)
_KEY_FAILURES: tuple[type[BaseException], ...] = (KeyNotFoundError, KeyDeletedError, ValueError,
                                                  *NATS_ERRORS)  # fmt: skip
_Item = tuple[int, bytes, int, int]  # (arrival_ms, hash, size, sequence), sorted per holder


class Holdings:
    """What the archive holds, per holder, as the rule needs it (the holder's model)."""

    def __init__(self) -> None:
        self.items: dict[Holder, list[_Item]] = {}
        self.totals: dict[Holder, int] = {}
        self.grown = 0
        """Envelope bytes added since the last run."""

    def __len__(self) -> int:
        return sum(len(v) for v in self.items.values())

    def add(self, holder: Holder, item: _Item) -> None:
        items = self.items.setdefault(holder, [])
        if not items or items[-1] < item:
            items.append(item)
        else:
            bisect.insort(items, item)
        self.totals[holder] = self.totals.get(holder, 0) + item[2]
        self.grown += item[2]

    def remove(self, holder: Holder, item: _Item) -> None:
        items = self.items.get(holder)
        if not items:
            return
        i = bisect.bisect_left(items, item)
        if i < len(items) and items[i] == item:
            del items[i]
            self.totals[holder] -= item[2]
            if not items:
                del self.items[holder], self.totals[holder]

    def victims(self, rule: RetentionRule, now_ms: int) -> list[tuple[Holder, _Item]]:
        """What ``rule`` lets go (what ``RetentionRule.evict`` would, computed per holder
        from ``RetentionRule.age_cutoff`` and ``RetentionRule.caps``)."""
        gone: list[tuple[Holder, _Item]] = []
        cutoff = rule.age_cutoff(now_ms) if now_ms else None
        kept: dict[Holder, int] = {}
        start: dict[Holder, int] = {}
        for holder, items in self.items.items():
            first = 0
            if cutoff is not None:
                first = bisect.bisect_left(items, (cutoff, b""))
                gone += [(holder, it) for it in items[:first]]
            start[holder] = first
            kept[holder] = self.totals[holder] - sum(it[2] for it in items[:first])
        caps = rule.caps({h: n for h, n in kept.items() if n > 0})
        for holder, cap in caps.items():
            items = self.items[holder]
            total = 0
            for i in range(len(items) - 1, start[holder] - 1, -1):  # newest first
                total += items[i][2]
                if total > cap:
                    gone += [(holder, it) for it in items[start[holder]:i + 1]]
                    break
        return gone


class RetentionLease:
    """The retention lease of one store peer (see the module docstring)."""

    def __init__(self, archive: LeaseArchive, meta: KeyValue, log: RelayLogger, *,
                 wake: Callable[[], None] | None = None) -> None:  # fmt: skip
        self.archive = archive
        self.meta = meta
        self.log = log
        self._wake = wake
        self.peer = secrets.token_hex(4)
        self._bucket: KeyValue | None = None
        self._revision = 0
        self._renewed = 0.0
        self._task: asyncio.Task[None] | None = None
        self._follower: asyncio.Task[None] | None = None
        self.holdings: Holdings | None = None
        self.ready = False
        """The holder has read every message's headers once."""
        self._audit: deque[tuple[float, int, bytes, Holder, _Item]] = deque()
        self._audited = 0  # every message up to this sequence was audited
        self._warned_rule = False
        self._running = asyncio.Lock()
        self.counters: dict[str, int] = {"acquired": 0, "lost": 0, "deleted": 0,
                                         "index_repaired": 0, "copies_deleted": 0}  # fmt: skip

    @property
    def lifetime(self) -> float:
        return self.archive.settings.lease_s

    @property
    def holding(self) -> bool:
        """This peer holds the lease now, renewed recently enough to act on it."""
        return bool(self._revision) and time.monotonic() - self._renewed < self.lifetime * 2 / 3

    async def start(self) -> None:
        """Try to take the lease now, and go on trying (JetStream may be unavailable
        now: the store starts all the same, and takes part once it is back)."""
        await self._tick()
        self._task = asyncio.create_task(self._loop(), name="store-retention-lease")

    async def close(self) -> None:
        for task in (self._task, self._follower):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._revision and self._bucket is not None:  # hand over at once
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self._bucket.delete(LEASE_KEY, last=self._revision)
        self._revision = 0

    def _value(self) -> bytes:
        s = self.archive.settings
        return json.dumps({"peer": self.peer, "max_bytes": s.max_bytes,
                           "max_age_ms": s.max_age_ms}).encode()  # fmt: skip

    async def _loop(self) -> None:
        while True:  # ends when close() cancels it
            await asyncio.sleep(self.lifetime / 3)
            await self._tick()

    async def _tick(self) -> None:
        if self._bucket is None:
            try:
                self._bucket = await self.archive.bucket(self.archive.settings.lease_bucket,
                                                          ttl=self.lifetime)  # fmt: skip
            except _FAILURES:
                return
        bucket = self._bucket
        try:
            if self._revision:
                self._revision = await bucket.update(LEASE_KEY, self._value(), last=self._revision)
                self._renewed = time.monotonic()
                return
            self._revision = await bucket.create(LEASE_KEY, self._value())
        except KeyWrongLastSequenceError:
            if self._revision:
                self._lost("another store peer took it")
            else:
                await self._check_holder(bucket)
            return
        except _FAILURES as exc:
            if self._revision and not self.holding:
                self._lost(f"not renewed: {type(exc).__name__}: {exc}")
            return
        self._renewed = time.monotonic()
        self.counters["acquired"] += 1
        self.log.info("store_retention_lease_acquired", peer=self.peer,
                      stream=self.archive.settings.stream)  # fmt: skip
        self.holdings = Holdings()
        self.ready = False
        self._follower = asyncio.create_task(self._follow(), name="store-retention-follow")

    def _lost(self, why: str) -> None:
        self._revision = 0
        self.counters["lost"] += 1
        self.log.warning("store_retention_lease_lost", peer=self.peer, reason=why)
        if self._follower is not None:
            self._follower.cancel()
            self._follower = None
        self.holdings, self.ready = None, False
        self._audit.clear()

    async def _check_holder(self, bucket: KeyValue) -> None:
        """Another peer holds the lease: say once if it applies other limits."""
        if self._warned_rule:
            return
        try:
            entry = await bucket.get(LEASE_KEY)
            theirs = json.loads(entry.value or b"{}")
        except _KEY_FAILURES:
            return
        s = self.archive.settings
        if (theirs.get("max_bytes"), theirs.get("max_age_ms")) != (s.max_bytes, s.max_age_ms):
            self._warned_rule = True
            self.log.warning("store_retention_rule_differs", holder=theirs.get("peer"),
                             holder_max_bytes=theirs.get("max_bytes"),
                             holder_max_age_ms=theirs.get("max_age_ms"), max_bytes=s.max_bytes,
                             max_age_ms=s.max_age_ms,
                             note="the lease holder's limits are applied; give every store "
                             "peer of the archive the same --max-bytes and --max-age")

    # ------------------------------------------------------------------ the holder's model

    async def _follow(self) -> None:
        """Read every message's headers once, then follow the stream; audit as it goes."""
        archive = self.archive
        with contextlib.suppress(*_KEY_FAILURES):
            self._audited = int((await self.meta.get(AUDIT_KEY)).value or b"0")
        next_seq = 1
        failures = 0
        while True:  # ends when cancelled (the lease lost, or close())
            reader = PushReader(archive.nc, archive.js, archive.settings.stream,
                                archive.settings.subjects, next_seq, headers_only=True)  # fmt: skip
            try:
                await reader.start()
                while True:  # ends when the reader breaks
                    batch = await reader.take(1000, follow=True)
                    for m in batch:
                        self._seen(m)
                    next_seq = reader.next_seq
                    if not self.ready and reader.remaining == 0 and not reader.buffered:
                        self.ready = True
                        self.log.info("store_retention_ready", envelopes=len(self.holdings or ()),
                                      peer=self.peer)  # fmt: skip
                        if self._wake is not None:
                            self._wake()
                    await self._audit_due()
                    failures = 0
            except _READ_FAILURES:
                failures += 1
                await asyncio.sleep(min(5.0, 0.2 * 2 ** min(failures, 5)))
            finally:
                await reader.close()

    def _seen(self, m: StreamMessage) -> None:
        holdings = self.holdings
        if holdings is None:
            return
        h = m.headers
        try:
            digest = bytes.fromhex(h.get("Nats-Msg-Id", ""))
            arrival = int(h.get("Sdschat-Arrival", "") or m.time_ms)
            size = int(h.get("Nats-Msg-Size", "0"))
        except ValueError:
            return  # not published by a store peer: the backstop limits take it in time
        if len(digest) != 32:
            return
        topic = m.subject.rpartition(".")[2].encode()
        holder = Holder(topic, h.get("Sdschat-Writer", "").encode())
        item = (arrival, digest, size, m.seq)
        holdings.add(holder, item)
        if m.seq > self._audited:
            self._audit.append((time.monotonic(), m.seq, digest, holder, item))
        max_bytes = self.archive.settings.max_bytes
        if (self.ready and max_bytes > 0 and holdings.grown > max(max_bytes // 8, 1)
                and self._wake is not None):  # fmt: skip
            self._wake()

    async def _audit_due(self) -> None:
        """Check the index for the messages seen at least ``audit_delay_s`` ago."""
        due: list[tuple[float, int, bytes, Holder, _Item]] = []
        now = time.monotonic()
        delay = self.archive.settings.audit_delay_s
        while self._audit and now - self._audit[0][0] >= delay and len(due) < 256:
            due.append(self._audit.popleft())
        if not due:
            return
        sem = asyncio.Semaphore(16)

        async def one(seq: int, digest: bytes, holder: Holder, item: _Item) -> None:
            async with sem:
                await self._audit_one(seq, digest, holder, item)

        await asyncio.gather(*(one(s, d, h, i) for _t, s, d, h, i in due))
        self._audited = max(self._audited, max(s for _t, s, *_ in due))
        with contextlib.suppress(*NATS_ERRORS):
            await self.meta.put(AUDIT_KEY, str(self._audited).encode())

    async def _audit_one(self, seq: int, digest: bytes, holder: Holder, item: _Item) -> None:
        archive = self.archive
        index = archive.index
        try:
            entry = await index.get(digest.hex())
        except KeyDeletedError as exc:
            last = int(exc.entry.revision or 0) if exc.entry is not None else 0
            await index.update(digest.hex(), str(seq).encode(), last=last)
            self.counters["index_repaired"] += 1
            return
        except KeyNotFoundError:
            with contextlib.suppress(KeyWrongLastSequenceError):
                await index.create(digest.hex(), str(seq).encode())
                self.counters["index_repaired"] += 1
            return
        if (entry.value or b"") == str(seq).encode():
            return
        other = await archive.indexed(digest)
        if other is not None and other[0] and other[0] != seq:  # a second copy: delete it
            await archive.delete_message(seq)
            if self.holdings is not None:
                self.holdings.remove(holder, item)
            self.counters["copies_deleted"] += 1
        elif other is not None:  # the entry names a message gone: this one is the copy
            with contextlib.suppress(KeyWrongLastSequenceError):
                await index.update(digest.hex(), str(seq).encode(), last=other[1])
                self.counters["index_repaired"] += 1

    # ------------------------------------------------------------------ a run

    async def run(self, rule: RetentionRule, now_ms: int) -> RetentionRun:
        """Apply ``rule`` if this peer holds the lease and knows the archive (else nothing)."""
        async with self._running:  # one run at a time (the timer and a wake may meet)
            return await self._run(rule, now_ms)

    async def _run(self, rule: RetentionRule, now_ms: int) -> RetentionRun:
        holdings = self.holdings
        if not self.holding or not self.ready or holdings is None:
            return RetentionRun()
        victims = holdings.victims(rule, now_ms)
        holdings.grown = 0
        if not victims:
            return RetentionRun()
        archive = self.archive
        sem = asyncio.Semaphore(32)
        deleted = 0

        async def one(holder: Holder, item: _Item) -> None:
            nonlocal deleted
            async with sem:
                if not self.holding:  # the lease ran out meanwhile: stop here
                    return
                _arrival, digest, _size, seq = item
                await archive.delete_message(seq)
                with contextlib.suppress(KeyNotFoundError, KeyDeletedError):
                    entry = await archive.index.get(digest.hex())
                    if (entry.value or b"") == str(seq).encode():
                        try:
                            await archive.index.delete(digest.hex(), last=entry.revision)
                        except APIError as exc:
                            if exc.err_code not in _WRONG_LAST:  # re-archived meanwhile: keep
                                raise
                holdings.remove(holder, item)
                deleted += 1

        try:
            await asyncio.gather(*(one(h, i) for h, i in victims))
        except NATS_ERRORS as exc:
            raise ArchiveUnavailable(f"JetStream: retention stopped: {exc!r}") from None
        finally:
            self.counters["deleted"] += deleted
        return RetentionRun(deleted, holder=self.peer, envelopes=len(holdings))

