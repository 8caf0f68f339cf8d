"""The person a data directory's device speaks for: its device log on disk.

``DATA_DIR/members/devices.json`` (mode 0600, replaced atomically)::

    {"v": 1, "root": "<64 hex: the person's root key>",
     "entries": ["<base64 SignedEntry>", ...]}

A data directory without the file is a person of one device: its identity key is the
root (the upgrade of issue 40: today's key becomes the person's root and first device).
The file is written the first time the device links another (:func:`save`, with the
genesis and the add), and on a linked device by the link that made it (its root is the
person's, its own key one of the devices). The entries are the signed device log
(:mod:`app.members.devices`); reading them checks every signature again, so a file
edited by hand can only lose entries, never add a device the root did not sign.

A file that cannot be read is an error the caller reports (:class:`PersonFileError`):
a linked device without its log would speak as a stranger.
"""

from __future__ import annotations

import json
from base64 import b64decode, b64encode
from pathlib import Path
from typing import Final

from app import AppError
from app.members.devices import PersonLog, decode_entry, make_genesis, new_recovery
from app.members.private_file import write_private
from net.identity import PUBLIC_KEY_BYTES, Identity

__all__ = ["PERSON_FILE", "PersonFileError", "encode", "load", "own_log", "save"]

PERSON_FILE: Final = "members/devices.json"


class PersonFileError(AppError, ValueError):
    """``devices.json`` exists but cannot be used (the message says what to do)."""


def load(data_dir: Path) -> PersonLog | None:
    """The person's device log kept in ``data_dir``, or ``None`` (no file: a person of
    one device whose root is the identity key).

    Raises:
        PersonFileError: the file is unreadable or not one sdschat wrote.
    """
    path = data_dir / PERSON_FILE
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise PersonFileError(f"{path} cannot be read ({exc}); restore it from a backup, "
                              "or link this device again") from None  # fmt: skip
    try:
        root = bytes.fromhex(doc["root"])
        raws = [b64decode(e) for e in doc["entries"]]
        if doc.get("v") != 1 or len(root) != PUBLIC_KEY_BYTES:
            raise ValueError("not version 1")
    except (KeyError, TypeError, ValueError) as exc:
        raise PersonFileError(f"{path} is not a device log sdschat wrote ({exc})") from None
    log = PersonLog(root)
    for raw in raws:
        entry = decode_entry(raw)
        if not isinstance(entry, str):
            log.take(entry, resolve=False)
    log.resolve()
    return log


def save(data_dir: Path, log: PersonLog) -> None:
    """Write ``log`` (every entry, parents first). Raises OSError."""
    write_private(data_dir / PERSON_FILE, encode(log))


def own_log(data_dir: Path, identity: Identity, device_name: str) -> tuple[PersonLog, str]:
    """The person's log as this device holds it, and the recovery words when it had none
    yet: a log made now (in memory only, :func:`save` keeps it) whose genesis makes
    ``identity`` the root and first device (``device_name``), naming a fresh recovery key
    whose 24 words are returned (shown once; the key itself is not kept).

    Raises:
        PersonFileError: as :func:`load`.
    """
    log = load(data_dir)
    if log is not None:
        return log, ""
    recovery, words = new_recovery()
    log = PersonLog(identity.public_key)
    entry = decode_entry(make_genesis(identity, recovery.public_key, device_name))
    assert not isinstance(entry, str)
    log.take(entry)
    return log, words


def encode(log: PersonLog) -> bytes:
    """The file's bytes for ``log`` (what :func:`save` writes)."""
    doc = {"v": 1, "root": log.root.hex(),
           "entries": [b64encode(r).decode() for r in log.raw_entries()]}  # fmt: skip
    return json.dumps(doc).encode()
