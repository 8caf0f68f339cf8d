"""Files as SDS content: a manifest then segments, each a normal content message.

A file of at most :data:`MAX_FILE_BYTES` is cut into segments of
:data:`SEGMENT_BYTES` (so each typed content stays below the core's 64 KiB
``max_content_bytes``); the manifest names the file id, size, segment count and
the sha256 of the whole file. Loss, repair and the store treat every segment like
any message; :class:`app.content.ConversationView` reassembles (only the manifest
author's segments count) and checks the sha256. :func:`save_file` writes a complete,
intact file under the data directory's ``files/`` with a sanitised name.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import unicodedata
from pathlib import Path

from app import content_pb2 as pb
from app.chat_content import clean_name
from app.content import MAGIC, SCHEMA_VERSION, ConversationView

__all__ = [
    "FILES_DIR",
    "MAX_FILE_BYTES",
    "SEGMENT_BYTES",
    "FileError",
    "read_file_to_send",
    "safe_filename",
    "save_file",
    "split_file",
]

MAX_FILE_BYTES = 16 * 1024 * 1024
"""Largest file sent (16 MiB: 342 segments)."""

SEGMENT_BYTES = 48 * 1024
"""File bytes per segment (the typed content stays under 64 KiB with room to spare)."""

FILES_DIR = "files"
"""Where received files are saved, under the data directory."""

MAX_NAME_BYTES = 200


class FileError(ValueError):
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
    data = view.file_bytes_unchecked(message_id)
    name = safe_filename(status.info.name)
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
