"""Files on receipt (issue 26 §5): the size limit enforced where files arrive, and a
per-sender quota on the segment bytes a node keeps.

The 16 MiB limit (:data:`app.chat.files.MAX_FILE_BYTES`) was checked only when sending: a
40 MiB file was accepted, and 30 files of 16 MiB from one member grew a receiver's
database by 672 MiB. Every file part is an SDS content message (ordered, acknowledged,
repaired like any), so a node cannot refuse to *deliver* one without breaking the
causal order of everything after it; what it refuses is to *keep its bytes*:

* a manifest declaring more than the limit, or more segments than a file at the limit
  has (:data:`app.chat.files.MAX_SEGMENTS`, 342), is stored as a one-line notice ("file ...
  refused: ... above the 16 MiB limit") instead of the manifest;
* a segment of such a file, a segment carrying more than a segment's worth of data, and
  every segment beyond the sender's quota (:data:`DEFAULT_FILE_QUOTA_BYTES` of segment
  data per sender and channel in this run, ``NodeOptions.file_quota_bytes``) is stored
  as an empty placeholder segment (index ``2**32 - 1``: counted by no file).

Counters: ``file_refused_too_large``, ``file_segments_refused``. A refused file cannot
be saved; the sender's other messages are unaffected.

The quota survives a restart: the bytes held per sender and channel are kept in
``DATA_DIR/file_quota.json`` (mode 0600, replaced atomically), written whenever they
grew by :data:`SAVE_EVERY_BYTES` since the last write and when the node closes; a
``kill -9`` forgets at most that much per node. A ledger that cannot be read (damaged,
another version) is set aside as ``file_quota.json.bad`` and the count starts again.

A channel's total is capped too: on a PUBLIC channel anyone can make identities (on a
passphrase channel anyone who has the passphrase), and each new one came with a fresh
quota, so the database still grew with every identity. Members channels are not capped
(only admitted members send; each has the per-sender quota).
Beyond :data:`DEFAULT_CHANNEL_FILE_BYTES` of segment data held in one channel
(``NodeOptions.file_channel_bytes``), a segment from the sender who holds the most is
refused (a placeholder); one from anyone else is kept and the oldest file of the
biggest holder is emptied (its segment rows overwritten by placeholders, with
``secure_delete``: the pages are reused, the file stops growing). A member sharing a
file now and then is never the biggest holder while flooders hold more; K identities
each end with at most the cap / K. Counters: ``file_files_evicted``,
``file_bytes_evicted``. What was emptied is kept in the ledger (``evicted``), so the
total survives a restart; a ``kill -9`` between an eviction and the ledger's write
counts that file once more (one more eviction later, never fewer).

Limits: segments kept live in the message database (``messages.content``), indexed by
file id (``messages.file_id``, schema 7): they are what ``/save``, ``history`` and the
TUI read (docs/content.md says why they stay there, with figures).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING

from app.chat import content_pb2 as pb
from app.chat.content import MAGIC, SCHEMA_VERSION, decode
from app.chat.files import MAX_FILE_BYTES, MAX_SEGMENTS, PLACEHOLDER_INDEX, SEGMENT_BYTES
from app.chat.lines import encode_content

if TYPE_CHECKING:
    from storage import Store

__all__ = [
    "DEFAULT_CHANNEL_FILE_BYTES",
    "DEFAULT_FILE_QUOTA_BYTES",
    "LEDGER_FILE",
    "PLACEHOLDER_INDEX",
    "FileQuota",
]

DEFAULT_FILE_QUOTA_BYTES = 64 * 1024 * 1024
"""Segment bytes kept per sender and channel (four files at the limit)."""

DEFAULT_CHANNEL_FILE_BYTES = 256 * 1024 * 1024
"""Segment bytes held per channel, all senders together (four quotas)."""

EVICTIONS_PER_PASS = 1000
"""Files emptied at most in one pass over a channel above its cap."""

STALE_AFTER = 5
STALE_WAIT_S = 0.2
"""A biggest holder with nothing stored is looked at STALE_AFTER times, this far apart,
before its count is taken as stale."""


MAX_TRACKED = 4096

LEDGER_FILE = "file_quota.json"
"""The quota's ledger, in the data directory."""

SAVE_EVERY_BYTES = 1024 * 1024
"""The ledger is written again once the bytes held grew by this much."""


class FileQuota:
    """Decides, per delivered content, whether its bytes are kept (module docstring)."""

    def __init__(
        self,
        quota_bytes: int = DEFAULT_FILE_QUOTA_BYTES,
        ledger: Path | None = None,
        *,
        channel_bytes: int = DEFAULT_CHANNEL_FILE_BYTES,
        store: Store | None = None,
        counters: MutableMapping[str, int] | None = None,
        capped: Callable[[str], bool] | None = None,
    ) -> None:
        self.quota_bytes = quota_bytes
        self.channel_bytes = channel_bytes
        self._held: dict[tuple[str, str], int] = {}  # (channel, sender) -> segment bytes
        self._evicted: dict[tuple[str, str], int] = {}  # the part of it emptied since
        self._total: dict[str, int] = {}  # channel -> bytes held now, all senders
        self._refused: dict[tuple[str, str, str], None] = {}  # (channel, sender, file id)
        self._ledger = ledger
        self._unsaved = 0  # bytes added since the ledger was last written
        self._store = store  # without one, nothing is evicted: the cap refuses
        self._counters = counters if counters is not None else {}
        self._capped = capped  # which channels the cap applies to (None: every one)
        self._evicting: dict[str, asyncio.Task[None]] = {}
        self._accepted = 0  # segments kept in this run; _last: when each sender's last was
        self._last: dict[tuple[str, str], int] = {}
        if ledger is not None:
            self._load(ledger)
        for (channel, _sender), n in self._held.items():
            self._total[channel] = self._total.get(channel, 0) + n
        for (channel, _sender), n in self._evicted.items():
            self._total[channel] = self._total.get(channel, 0) - n

    def held(self, channel: str, sender_id: str) -> int:
        """Segment bytes of ``sender_id`` kept in ``channel`` (what its quota counts)."""
        return self._held.get((channel, sender_id), 0)

    def holding(self, channel: str, sender_id: str) -> int:
        """Segment bytes of ``sender_id`` still held in ``channel`` (less what was evicted)."""
        key = (channel, sender_id)
        return self._held.get(key, 0) - self._evicted.get(key, 0)

    def channel_total(self, channel: str) -> int:
        """Segment bytes held in ``channel``, all senders together."""
        return self._total.get(channel, 0)

    def _load(self, path: Path) -> None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return
        except OSError:
            return  # unreadable: counted again from now
        try:
            doc = json.loads(raw)
            if doc.get("version") != 1:
                raise ValueError("version")
            for channel, sender, size in doc["held"][-MAX_TRACKED:]:
                if not (isinstance(channel, str) and isinstance(sender, str)
                        and isinstance(size, int) and size >= 0):
                    raise ValueError("entry")
                self._held[(channel, sender)] = size
            for channel, sender, size in doc.get("evicted", []):
                key = (channel, sender)
                if not (isinstance(size, int) and 0 <= size <= self._held.get(key, 0)):
                    raise ValueError("evicted")
                self._evicted[key] = size
        except (ValueError, TypeError, KeyError, AttributeError):
            self._held.clear()
            self._evicted.clear()
            with contextlib.suppress(OSError):
                os.replace(path, path.with_name(path.name + ".bad"))

    def save(self) -> None:
        """Write the ledger now (if there is one and it changed); a full disk is ignored
        (the next write, or the close, tries again)."""
        if self._ledger is None or not self._unsaved:
            return
        doc = {"version": 1, "held": [[c, s, n] for (c, s), n in self._held.items()],
               "evicted": [[c, s, n] for (c, s), n in self._evicted.items() if n]}
        tmp = self._ledger.with_name(self._ledger.name + ".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, separators=(",", ":"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._ledger)
        except OSError:
            return
        self._unsaved = 0

    def check(self, channel: str, sender_id: str, content: bytes) -> tuple[bytes, str | None]:
        """``(content to store, why it was replaced or None)``."""
        if content[:1] != MAGIC:
            return content, None
        d = decode(content)
        if d.kind == "file" and d.file is not None:
            info = d.file
            if info.size > MAX_FILE_BYTES:
                self._refuse(channel, sender_id, info.file_id)
                notice = (f"[file {info.name[:80]} refused: {info.size} bytes is above the "
                          f"{MAX_FILE_BYTES // (1024 * 1024)} MiB limit]")  # fmt: skip
                return encode_content(notice, d.name or "?"), "too_large"
            if info.segment_count > MAX_SEGMENTS:
                self._refuse(channel, sender_id, info.file_id)
                notice = (f"[file {info.name[:80]} refused: {info.segment_count} segments is "
                          f"above the limit of {MAX_SEGMENTS}]")  # fmt: skip
                return encode_content(notice, d.name or "?"), "too_large"
            return content, None
        if d.kind != "segment" or d.target_id is None:
            return content, None
        key = (channel, sender_id)
        size = len(d.segment_data)
        held = self._held.get(key, 0)
        if (channel, sender_id, d.target_id) in self._refused:
            why = "file_too_large"
        elif size > SEGMENT_BYTES:
            why = "segment_too_large"
        elif held + size > self.quota_bytes:
            why = "quota"
        elif (self._total.get(channel, 0) + size > self.channel_bytes and self._is_capped(
                channel) and self._biggest(channel, sender_id, size)):  # fmt: skip
            why = "channel_full"
        else:
            self._held[key] = held + size
            self._total[channel] = self._total.get(channel, 0) + size
            self._accepted += 1
            self._last[key] = self._accepted
            if len(self._held) > MAX_TRACKED:
                old = next(iter(self._held))
                gone = self._held.pop(old) - self._evicted.pop(old, 0)
                self._last.pop(old, None)
                self._total[old[0]] = self._total.get(old[0], 0) - gone
            self._unsaved += size
            if self._unsaved >= SAVE_EVERY_BYTES:
                self.save()
            if self._total[channel] > self.channel_bytes and self._is_capped(channel):
                self._start_eviction(channel)
            return content, None
        return placeholder(d.target_id, d.name), why

    def _is_capped(self, channel: str) -> bool:
        return self._capped is None or self._capped(channel)

    def _biggest(self, channel: str, sender_id: str, size: int) -> bool:
        """Whether ``sender_id``, with ``size`` more, would hold more of ``channel``
        than anyone else (then its segment is refused rather than another's file
        evicted); always True without a store to evict from."""
        if self._store is None:
            return True
        mine = self.holding(channel, sender_id) + size
        return all(mine > self.holding(c, s) for (c, s) in self._held
                   if c == channel and s != sender_id)  # fmt: skip

    def _start_eviction(self, channel: str) -> None:
        running = self._evicting.get(channel)
        if self._store is None or (running is not None and not running.done()):
            return  # a pass under way looks at the total again before it ends
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._evicting[channel] = loop.create_task(self._evict(channel, self._store))

    def evicting(self, channel: str) -> bool:
        """Whether a pass of eviction is under way in ``channel``."""
        task = self._evicting.get(channel)
        return task is not None and not task.done()

    async def _evict(self, channel: str, store: Store) -> None:
        """Empty the oldest files of the biggest holders until ``channel`` is under its cap.

        A holder with nothing stored yet (the round that brought its segments is not
        committed) is looked at again a little later; only after :data:`STALE_AFTER`
        looks is its count taken as stale (its rows were deleted) and dropped."""
        misses: dict[str, int] = {}
        for _ in range(EVICTIONS_PER_PASS):
            if self._total.get(channel, 0) <= self.channel_bytes:
                return
            # the biggest holder; between equals, the one who sent to it longest ago
            holders = [(self.holding(c, s), -self._last.get((c, s), 0), s)
                       for (c, s) in self._held if c == channel]  # fmt: skip
            if not holders:
                return
            have, _, sender = max(holders)
            if have <= 0:
                return
            try:
                found = await store.oldest_file(channel, sender)
                if found is not None:
                    file_id, rows = found
                    empty = placeholder(file_id, "")
                    await store.replace_content(
                        channel, [(m, sender, empty) for m, _ in rows], forget_envelopes=True
                    )
            except Exception:  # a closing store, a full disk: tried again at the next segment
                return
            if found is None or not found[1]:
                misses[sender] = misses.get(sender, 0) + 1
                if misses[sender] < STALE_AFTER:
                    await asyncio.sleep(STALE_WAIT_S)  # its round's commit comes
                    continue
                freed = have  # nothing of theirs is held any more: the count was stale
            else:
                freed = min(have, sum(n for _, n in found[1]))
            key = (channel, sender)
            self._evicted[key] = self._evicted.get(key, 0) + freed
            self._total[channel] = self._total.get(channel, 0) - freed
            if found is not None:
                self._counters["file_files_evicted"] = (
                    self._counters.get("file_files_evicted", 0) + 1)  # fmt: skip
                self._counters["file_bytes_evicted"] = (
                    self._counters.get("file_bytes_evicted", 0) + freed)  # fmt: skip
            self._unsaved += 1
            self.save()

    def stop(self) -> None:
        """Stop evicting (a transaction under way still ends whole: at worst one file is
        counted once more and emptied again later) and write the ledger. Synchronous, so
        that a node's close cannot be cut short here."""
        for task in self._evicting.values():
            task.cancel()
        self.save()

    def _refuse(self, channel: str, sender_id: str, file_id: str) -> None:
        self._refused[(channel, sender_id, file_id)] = None
        while len(self._refused) > MAX_TRACKED:
            self._refused.pop(next(iter(self._refused)))


def placeholder(file_id: str, name: str | None) -> bytes:
    """An empty segment of ``file_id`` that no file counts."""
    seg = pb.Content(
        version=SCHEMA_VERSION,
        type=pb.TYPE_FILE_SEGMENT,
        name=name or "",
        file_segment=pb.FileSegment(file_id=file_id, index=PLACEHOLDER_INDEX, data=b""),
    )
    return MAGIC + seg.SerializeToString()
