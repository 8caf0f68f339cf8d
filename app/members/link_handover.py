"""What a link hands from the old device to the new one, and how the new one takes it.

The old device gathers (:func:`gather`) what makes the new device the same person in
the same channels, from its data directory, read only (a node may be running there):

* ``channels.json``: every channel joined (a passphrase or public channel with its
  derived key: the passphrase itself never travels, the key reads and writes the
  channel as the passphrase does), members channels and DMs by name;
* ``setup.json``: the relays, store peers and the channel that was open;
* ``members/<channel>.json`` and ``.log`` of every members channel and DM: the epoch
  keys, the membership records and the **inbound** group sessions as they stand (each
  cut past what was read: the new device opens what comes next in them, not the
  lines read before, docs/members.md "Linking a device"). The old device's outbound
  session and its bookkeeping are left out (two devices must never ratchet one
  Megolm session);
* ``members/verified.json``: who the person verified;
* ``tui.json``: the display settings (theme, where each channel was left);
* the display name (the database's identity row).

Nothing else: not the identity key (the new device has its own), not the invite book
(the old device answers its invites), not the database (history comes from peers and
the store peer, like any catch-up), not ``device.json``.

The payload is JSON, zlib-compressed, at most :data:`MAX_PAYLOAD` bytes compressed (one
relay envelope). The new device installs it (:func:`install`) into a data directory
built beside the target and renamed into place, so an interrupted or failed install
leaves nothing: only file names of the list above are written (a payload naming any
other path is refused whole), and every members state file is rewritten for the new
device's own sender id.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import zlib
from base64 import b64decode, b64encode
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from app import AppError
from app.members.private_file import write_private

__all__ = ["MAX_PAYLOAD", "Handover", "HandoverError", "gather", "install", "parse"]

MAX_PAYLOAD: Final = 200 * 1024
"""Largest compressed payload (a relay envelope is at most 256 KiB)."""

_MAX_PLAIN: Final = 64 * 1024 * 1024
_FILE_RE: Final = re.compile(
    r"^(channels\.json|setup\.json|tui\.json|members/verified\.json|"
    r"members/[0-9a-f]{32}\.(json|log))$")  # fmt: skip
_TOP: Final = ("channels.json", "setup.json", "tui.json", "members/verified.json")


class HandoverError(AppError, ValueError):
    """A payload that cannot be gathered or installed (the message says why)."""


@dataclass(frozen=True, slots=True)
class Handover:
    """A parsed payload: the display name and the files by relative path."""

    name: str
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def channels(self) -> list[str]:
        """The channels it holds (``channels.json``'s names, in order)."""
        try:
            doc = json.loads(self.files.get("channels.json", b"{}"))
            return [str(c["name"]) for c in doc.get("channels", [])]
        except (ValueError, KeyError, TypeError, AttributeError):
            return []


def _display_name(data_dir: Path) -> str:
    from storage import DB_FILENAME

    path = data_dir / DB_FILENAME
    if not path.is_file():
        return ""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT display_name FROM identity WHERE id = 1").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return ""
    return str(row[0]) if row else ""


def _without_outbound(state: bytes) -> bytes:
    """A members state file without the old device's outbound session."""
    doc = json.loads(state)
    keys = json.loads(doc["group_keys"])
    keys["out"] = None
    keys["rotate_next"] = True
    doc["group_keys"] = json.dumps(keys, separators=(",", ":"))
    doc["sent"] = {}
    return json.dumps(doc, separators=(",", ":")).encode()


def gather(data_dir: Path) -> bytes:
    """The payload of ``data_dir`` (read only; see the module docstring).

    Raises:
        HandoverError: a file cannot be read, or the whole is larger than
            :data:`MAX_PAYLOAD` compressed.
    """
    files: dict[str, str] = {}
    try:
        for rel in _TOP:
            with contextlib.suppress(FileNotFoundError):
                files[rel] = b64encode((data_dir / rel).read_bytes()).decode()
        members = data_dir / "members"
        for path in sorted(members.glob("*.json")) if members.is_dir() else ():
            rel = f"members/{path.name}"
            if not _FILE_RE.match(rel) or rel == "members/verified.json":
                continue
            files[rel] = b64encode(_without_outbound(path.read_bytes())).decode()
            log = path.with_suffix(".log")
            with contextlib.suppress(FileNotFoundError):
                files[f"members/{log.name}"] = b64encode(log.read_bytes()).decode()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HandoverError(f"cannot read what to hand over from {data_dir}: {exc}") from None
    doc = {"v": 1, "name": _display_name(data_dir), "files": files}
    payload = zlib.compress(json.dumps(doc).encode(), 9)
    if len(payload) > MAX_PAYLOAD:
        raise HandoverError(
            f"this device has too much to hand over in one link ({len(payload) // 1024} KiB "
            f"compressed, at most {MAX_PAYLOAD // 1024} KiB): leave or /forget channels "
            "you no longer read, then link again")  # fmt: skip
    return payload


def parse(payload: bytes) -> Handover:
    """The payload :func:`gather` made.

    Raises:
        HandoverError: anything else (a path outside the list included).
    """
    try:
        d = zlib.decompressobj()
        plain = d.decompress(payload, _MAX_PLAIN)
        if d.unconsumed_tail:
            raise ValueError("too large")
        doc = json.loads(plain)
        if doc.get("v") != 1 or not isinstance(doc.get("files"), dict):
            raise ValueError("not version 1")
        files = {str(k): b64decode(v, validate=True) for k, v in doc["files"].items()}
        name = str(doc.get("name") or "")
    except (zlib.error, ValueError, TypeError, AttributeError) as exc:
        raise HandoverError(f"the other device's hand-over is not one sdschat made ({exc})"
                            ) from None  # fmt: skip
    bad = sorted(rel for rel in files if not _FILE_RE.match(rel))
    if bad:
        raise HandoverError(f"the other device's hand-over names a file it may not: {bad[0]!r}")
    return Handover(name, files)


def _for_device(state: bytes, own_id: str, share_secret: bytes | None) -> bytes:
    doc = json.loads(state)
    keys = json.loads(doc["group_keys"])
    keys["own_id"] = own_id
    keys["out"] = None
    if share_secret is not None:  # its own share key: the old device's stays there
        keys["share_secrets"] = [[b64encode(share_secret).decode(), None]]
        keys["share_created_ms"] = None
    doc["group_keys"] = json.dumps(keys, separators=(",", ":"))
    doc["own_id"] = own_id
    doc["sent"] = {}
    return json.dumps(doc, separators=(",", ":")).encode()


def install(handover: Handover, target: Path, own_id: str,
            extra: dict[str, bytes], share_secret: bytes | None = None) -> None:  # fmt: skip
    """Make ``target`` (missing, or an empty directory) the new device's data directory:
    the handed-over files (members state rewritten for ``own_id``, with
    ``share_secret``, the new device's X25519 share key named in its device-log add,
    in place of the old device's) and ``extra`` (the identity key, the device log:
    relative path -> bytes), all written into a directory beside it, then renamed into
    place. On any failure nothing is left.

    Raises:
        HandoverError: ``target`` is not empty, or a file cannot be written.
    """
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise HandoverError(f"{target} is not empty: link into a new --data-dir")
    tmp = target.with_name(f".{target.name}.linking.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(mode=0o700, parents=True)
        for rel, data in handover.files.items():
            if rel.startswith("members/") and rel.endswith(".json") and rel != (
                    "members/verified.json"):  # fmt: skip
                data = _for_device(data, own_id, share_secret)
            write_private(tmp / rel, data)
        for rel, data in extra.items():
            write_private(tmp / rel, data)
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise HandoverError(f"cannot write the new data directory {target}: {exc}") from None
