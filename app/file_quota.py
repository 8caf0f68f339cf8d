"""Files on receipt (issue 26 §5): the size limit enforced where files arrive, and a
per-sender quota on the segment bytes a node keeps.

The 16 MiB limit (:data:`app.files.MAX_FILE_BYTES`) was checked only when sending: a
40 MiB file was accepted, and 30 files of 16 MiB from one member grew a receiver's
database by 672 MiB. Every file part is an SDS content message (ordered, acknowledged,
repaired like any), so a node cannot refuse to *deliver* one without breaking the
causal order of everything after it; what it refuses is to *keep its bytes*:

* a manifest declaring more than the limit is stored as a one-line notice ("file ...
  refused: ... above the 16 MiB limit") instead of the manifest;
* a segment of such a file, a segment carrying more than a segment's worth of data, and
  every segment beyond the sender's quota (:data:`DEFAULT_FILE_QUOTA_BYTES` of segment
  data per sender and channel in this run, ``NodeOptions.file_quota_bytes``) is stored
  as an empty placeholder segment (index ``2**32 - 1``: counted by no file).

Counters: ``file_refused_too_large``, ``file_segments_refused``. A refused file cannot
be saved; the sender's other messages are unaffected.

Limits: the quota counts what arrived since the node started (a restart starts it
again); segments kept still live in the message database.
"""

from __future__ import annotations

from app import content_pb2 as pb
from app.chat_content import encode_content
from app.content import MAGIC, SCHEMA_VERSION, decode
from app.files import MAX_FILE_BYTES, SEGMENT_BYTES

__all__ = ["DEFAULT_FILE_QUOTA_BYTES", "PLACEHOLDER_INDEX", "FileQuota"]

DEFAULT_FILE_QUOTA_BYTES = 64 * 1024 * 1024
"""Segment bytes kept per sender and channel (four files at the limit)."""

PLACEHOLDER_INDEX = 2**32 - 1
"""Index of a placeholder segment: beyond every file's ``segment_count``."""

MAX_TRACKED = 4096


class FileQuota:
    """Decides, per delivered content, whether its bytes are kept (module docstring)."""

    def __init__(self, quota_bytes: int = DEFAULT_FILE_QUOTA_BYTES) -> None:
        self.quota_bytes = quota_bytes
        self._held: dict[tuple[str, str], int] = {}  # (channel, sender) -> segment bytes
        self._refused: dict[tuple[str, str, str], None] = {}  # (channel, sender, file id)

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
