"""Files on receipt (issue 26 §5): the size limit enforced where files arrive, and a
per-sender quota on the segment bytes a node keeps.

The 16 MiB limit (:data:`app.files.MAX_FILE_BYTES`) was checked only when sending: a
40 MiB file was accepted, and 30 files of 16 MiB from one member grew a receiver's
database by 672 MiB. Every file part is an SDS content message (ordered, acknowledged,
repaired like any), so a node cannot refuse to *deliver* one without breaking the
causal order of everything after it; what it refuses is to *keep its bytes*:

* a manifest declaring more than the limit, or more segments than a file at the limit
  has (:data:`app.files.MAX_SEGMENTS`, 342), is stored as a one-line notice ("file ...
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

Limits: segments kept still live in the message database (``messages.content``): they
are what ``/save``, ``history`` and the TUI read, bounded by this quota.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from app import content_pb2 as pb
from app.chat_content import encode_content
from app.content import MAGIC, SCHEMA_VERSION, decode
from app.files import MAX_FILE_BYTES, MAX_SEGMENTS, SEGMENT_BYTES

__all__ = ["DEFAULT_FILE_QUOTA_BYTES", "LEDGER_FILE", "PLACEHOLDER_INDEX", "FileQuota"]

DEFAULT_FILE_QUOTA_BYTES = 64 * 1024 * 1024
"""Segment bytes kept per sender and channel (four files at the limit)."""

PLACEHOLDER_INDEX = 2**32 - 1
"""Index of a placeholder segment: beyond every file's ``segment_count``."""

MAX_TRACKED = 4096

LEDGER_FILE = "file_quota.json"
"""The quota's ledger, in the data directory."""

SAVE_EVERY_BYTES = 1024 * 1024
"""The ledger is written again once the bytes held grew by this much."""


class FileQuota:
    """Decides, per delivered content, whether its bytes are kept (module docstring)."""

    def __init__(
        self, quota_bytes: int = DEFAULT_FILE_QUOTA_BYTES, ledger: Path | None = None
    ) -> None:
        self.quota_bytes = quota_bytes
        self._held: dict[tuple[str, str], int] = {}  # (channel, sender) -> segment bytes
        self._refused: dict[tuple[str, str, str], None] = {}  # (channel, sender, file id)
        self._ledger = ledger
        self._unsaved = 0  # bytes added since the ledger was last written
        if ledger is not None:
            self._load(ledger)

    def held(self, channel: str, sender_id: str) -> int:
        """Segment bytes of ``sender_id`` kept in ``channel``."""
        return self._held.get((channel, sender_id), 0)

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
        except (ValueError, TypeError, KeyError, AttributeError):
            self._held.clear()
            with contextlib.suppress(OSError):
                os.replace(path, path.with_name(path.name + ".bad"))

    def save(self) -> None:
        """Write the ledger now (if there is one and it changed); a full disk is ignored
        (the next write, or the close, tries again)."""
        if self._ledger is None or not self._unsaved:
            return
        doc = {"version": 1, "held": [[c, s, n] for (c, s), n in self._held.items()]}
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
        else:
            self._held[key] = held + size
            if len(self._held) > MAX_TRACKED:
                self._held.pop(next(iter(self._held)))
            self._unsaved += size
            if self._unsaved >= SAVE_EVERY_BYTES:
                self.save()
            return content, None
        return placeholder(d.target_id, d.name), why

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
