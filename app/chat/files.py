"""Files as SDS content: a manifest then segments, each a normal content message.

A file of at most :data:`MAX_FILE_BYTES` is cut into segments of
:data:`SEGMENT_BYTES` (so each typed content stays below the core's 64 KiB
``max_content_bytes``); the manifest names the file id, size, segment count and
the sha256 of the whole file. Loss, repair and the store treat every segment like
any message; :class:`app.chat.content.ConversationView` reassembles (only the manifest
author's segments count) and checks the sha256. :func:`save_file` writes a complete,
intact file under the data directory's ``files/`` with a sanitised name.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app import AppError
from app.chat import content_pb2 as pb
from app.chat.content import MAGIC, SCHEMA_VERSION, ConversationView, FileInfo, decode
from app.names import clean_name

if TYPE_CHECKING:
    from storage import Store

__all__ = [
    "FILES_DIR",
    "MAX_FILE_BYTES",
    "SEGMENT_BYTES",
    "FileError",
    "StoredFile",
    "read_file_to_send",
    "safe_filename",
    "save_file",
    "save_stored",
    "split_file",
    "stored_file",
    "stored_manifest",
]

MAX_FILE_BYTES = 16 * 1024 * 1024
"""Largest file sent (16 MiB: 342 segments)."""

SEGMENT_BYTES = 48 * 1024
"""File bytes per segment (the typed content stays under 64 KiB with room to spare)."""

FILES_DIR = "files"
"""Where received files are saved, under the data directory."""

MAX_NAME_BYTES = 200

PLACEHOLDER_INDEX = 2**32 - 1
"""Index of a segment stored empty (``app.chat.file_quota.placeholder``): no file counts it."""

MAX_SEGMENTS = -(-MAX_FILE_BYTES // SEGMENT_BYTES)
"""Segments of the largest file (342): a manifest declaring more names no file we keep."""

SEGMENT_SLACK = 16
"""Rows read beyond a file's segment count (an author's duplicates, placeholders)."""


class FileError(AppError, ValueError):
    """A file cannot be sent or saved (the message says why)."""


def read_file_to_send(path: str | Path) -> tuple[str, bytes]:
    """``(base name, bytes)`` of a local file to send.

    Raises:
        FileError: not a readable regular file, empty, or above :data:`MAX_FILE_BYTES`.
    """
    p = Path(path).expanduser()
    try:
        if not p.is_file():
            raise FileError(f"not a file: {p}")
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise FileError(f"{p} is {size} bytes; the limit is {MAX_FILE_BYTES} (16 MiB)")
        data = p.read_bytes()
    except OSError as exc:
        raise FileError(f"cannot read {p}: {exc.strerror or exc}") from None
    if not data:
        raise FileError(f"{p} is empty")
    if len(data) > MAX_FILE_BYTES:
        raise FileError(f"{p} is {len(data)} bytes; the limit is {MAX_FILE_BYTES} (16 MiB)")
    return p.name, data


def split_file(
    name: str, data: bytes, author: str, *, segment_bytes: int = SEGMENT_BYTES
) -> list[bytes]:
    """Typed contents to send, in order: the manifest, then every segment.

    Raises:
        FileError: empty or above :data:`MAX_FILE_BYTES`.
    """
    if not data:
        raise FileError("the file is empty")
    if len(data) > MAX_FILE_BYTES:
        raise FileError(f"the file is {len(data)} bytes; the limit is {MAX_FILE_BYTES}")
    file_id = secrets.token_hex(16)
    count = -(-len(data) // segment_bytes)
    author = clean_name(author)
    manifest = pb.Content(
        version=SCHEMA_VERSION,
        type=pb.TYPE_FILE_MANIFEST,
        name=author,
        file_manifest=pb.FileManifest(
            file_id=file_id,
            name=safe_filename(name),
            size=len(data),
            sha256=hashlib.sha256(data).digest(),
            segment_count=count,
            segment_size=segment_bytes,
        ),
    )
    out = [MAGIC + manifest.SerializeToString()]
    for i in range(count):
        seg = pb.Content(
            version=SCHEMA_VERSION,
            type=pb.TYPE_FILE_SEGMENT,
            name=author,
            file_segment=pb.FileSegment(
                file_id=file_id, index=i, data=data[i * segment_bytes : (i + 1) * segment_bytes]
            ),
        )
        out.append(MAGIC + seg.SerializeToString())
    return out


def safe_filename(name: str) -> str:
    """A peer's file name made safe to create in one directory: the last path
    component only, no control or separator characters, no leading dots, at most
    :data:`MAX_NAME_BYTES` UTF-8 bytes; ``"file"`` when nothing is left."""
    name = unicodedata.normalize("NFC", name).replace("\\", "/").split("/")[-1]
    name = "".join(ch for ch in name if ch.isprintable() and ch not in '<>:"|?*')
    name = name.strip().lstrip(".").strip()
    while len(name.encode("utf-8")) > MAX_NAME_BYTES:
        stem, dot, ext = name.rpartition(".")
        name = (stem[:-1] + dot + ext) if dot and len(ext) < 16 and stem else name[:-1]
    return name or "file"


def _unique(path: Path) -> Path:
    if not path.exists():
        return path
    stem, suffix = path.stem, path.suffix
    for i in range(1, 10_000):
        candidate = path.with_name(f"{stem} ({i}){suffix}")
        if not candidate.exists():
            return candidate
    raise FileError(f"too many files named {path.name}")


def save_file(
    view: ConversationView, message_id: str, data_dir: str | Path, dest: str | Path | None = None
) -> Path:
    """Write the file announced by ``message_id`` and return where.

    Without ``dest``: ``DATA_DIR/files/<sanitised name>`` (`` (1)`` etc. added
    rather than overwriting). With ``dest``: that path (a directory: the sanitised
    name inside it); an existing file is not overwritten.

    Raises:
        FileError: not a file, not complete yet (says the progress), or its sha256
            does not match the manifest.
    """
    if not view.keep_file_data:
        raise FileError("this conversation view keeps no file data (keep_file_data=False)")
    status = view.file_status(message_id)
    if status is None:
        raise FileError(f"{message_id[:12]} is not a received file")
    if not status.complete:
        raise FileError(
            f"file {status.info.name!r} is not complete: {status.present}/{status.total} segments"
        )
    if not status.intact:
        raise FileError(f"file {status.info.name!r} does not match its sha256: not saved")
    return _write(view.file_bytes_unchecked(message_id), status.info.name, data_dir, dest)


def save_stored(file: StoredFile, data_dir: str | Path, dest: str | Path | None = None) -> Path:
    """:func:`save_file` for a file read from the store (:func:`stored_file`): the same
    checks (complete, sha256) and the same rules for where it is written. CPU- and
    disk-bound: call it in a thread.

    Raises:
        FileError: not complete yet (says the progress), or its sha256 does not match.
    """
    info = file.info
    if not file.complete:
        raise FileError(
            f"file {info.name!r} is not complete: {len(file.segments)}/{info.segment_count} "
            "segments"
        )
    data = file.data()
    if hashlib.sha256(data).digest() != info.sha256:
        raise FileError(f"file {info.name!r} does not match its sha256: not saved")
    return _write(data, info.name, data_dir, dest)


def _write(data: bytes, sent_name: str, data_dir: str | Path, dest: str | Path | None) -> Path:
    name = safe_filename(sent_name)
    if dest is None:
        folder = Path(data_dir) / FILES_DIR
        folder.mkdir(parents=True, exist_ok=True)
        target = _unique(folder / name)
    else:
        target = Path(dest).expanduser()
        if target.is_dir():
            target = _unique(target / name)
        elif target.exists():
            raise FileError(f"{target} exists: not overwritten")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise FileError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


# ------------------------------------------------------------------ a file's progress

@dataclass
class StoredFile:
    """What the log holds of the file announced by one manifest line: the manifest, its
    author, and the author's segments stored so far (index -> bytes)."""

    info: FileInfo
    sender_id: str
    segments: dict[int, bytes] = field(default_factory=dict)
    not_kept: int = 0
    """Its author's segments that this node stored empty (over the sender's quota or
    the channel's cap, ``app/chat/file_quota.py``): the file cannot complete here."""

    @property
    def complete(self) -> bool:
        return len(self.segments) >= self.info.segment_count

    def data(self) -> bytes:
        """The segments joined in order, cut to the manifest's size (complete files)."""
        n = self.info.segment_count
        return b"".join(self.segments.get(i, b"") for i in range(n))[: self.info.size]

    def intact(self) -> bool | None:
        """Whether the joined segments match the manifest's sha256 (None: incomplete).
        CPU-bound for a big file: call it in a thread."""
        if not self.complete:
            return None
        return hashlib.sha256(self.data()).digest() == self.info.sha256


async def stored_manifest(
    store: Store, channel: str, manifest_id: str
) -> tuple[FileInfo, str] | None:
    """``(manifest, author's sender id)`` of message ``manifest_id`` (None if it is not a
    stored file manifest): one row read."""
    found = await store.get_messages(channel, [manifest_id])
    msg = found.get(manifest_id)
    if msg is None:
        return None
    d = decode(msg.content)
    if d.kind != "file" or d.file is None:
        return None
    return d.file, msg.sender_id


async def stored_file(store: Store, channel: str, manifest_id: str) -> StoredFile | None:
    """The file announced by message ``manifest_id`` as stored (None if that message is
    not a stored file manifest). Its segments are the rows of the manifest author's
    segments of that file id, read through the store's file index
    (:meth:`storage.Store.file_segments`: one index range, at most ``segment_count``
    rows and a few duplicates): lines of others naming the id cannot hide them (80 such
    lines once kept a file "checking" for ever), and neither the log's size nor a
    flood of other files costs anything here. When an author sent two segments with
    one index, the first in SDS order counts (as in :class:`ConversationView`)."""
    manifest = await stored_manifest(store, channel, manifest_id)
    if manifest is None:
        return None
    info, sender_id = manifest
    out = StoredFile(info, sender_id)
    if not 0 < info.segment_count <= MAX_SEGMENTS:
        return out  # a manifest no honest sender makes: nothing of it is read
    rows = await store.file_segments(
        channel, sender_id, info.file_id, limit=info.segment_count + SEGMENT_SLACK
    )
    for e in rows:
        s = decode(e.content)
        ours = s.kind == "segment" and s.target_id == info.file_id
        if ours and 0 <= s.segment_index < info.segment_count:
            out.segments.setdefault(s.segment_index, s.segment_data)
        elif ours and s.segment_index == PLACEHOLDER_INDEX and not s.segment_data:
            out.not_kept += 1
    return out

