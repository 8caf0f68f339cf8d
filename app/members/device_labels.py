"""Who speaks for whom in public and passphrase channels (issue 40 §1): the device logs
the channels carry, folded into one :class:`~app.members.devices.People` state, and the
person a line is shown as.

A node whose person has a device log (``members/devices.json``, written by a link)
sends it in every public or passphrase channel it is in, as SDS content
(:func:`~app.members.devices.encode_device_log`: ``FF 'S' 'D' 01`` + the signed
entries), once per channel and per state of the log (:meth:`DeviceBook.due`). Members
channels and DMs are not served here.

A receiver takes one such content from sender ``S`` (:meth:`DeviceBook.take`) only if

* it decodes, holds at most :data:`~app.members.devices.MAX_ENTRIES` entries, and every
  entry is of one root ``R`` (``mixed_roots``);
* ``S`` is not a device of another person already (``other_person``: one device key
  speaks for one person; only ``S`` can make the proof of possession an add of ``S``
  carries, so a key in two persons' logs signed both);
* in the log made of the entries held for ``R`` and these (resolved aside, as a
  candidate), ``S`` is a current device of ``R`` (``not_a_device``). Only then is the
  candidate kept. So a log that names bob's root for the sender's own key fails: an add
  of a key counts only if a current device of ``R`` (or its recovery key) signed it,
  and bob's log replayed with the attacker's key added by the attacker is ``not_a_device``
  (its add's signer is no device of bob's) while bob's own entries add nothing new.

Costs a hostile sender can cause: entries per person and held entries are capped by
:class:`~app.members.devices.PersonLog` (64 each), contents with nothing new cost a hash
per entry, and a sender refused :data:`MAX_REFUSALS` times is not heard again until the
node restarts (each refusal costs at most one resolution of 64 entries).

A line from a current device of ``R`` is shown as ``R``'s person
(:meth:`DeviceBook.speaker`): the name is the one ``R``'s devices claimed last
(:meth:`DeviceBook.note_name`), the fingerprint is ``R``'s (what others verify). A
revoked device is no current device: its later lines are shown as its own key.

Pure but for :func:`load` and :func:`save` (``members/people.json``, mode 0600, replaced
atomically).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from base64 import b64decode, b64encode
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from app.members.devices import (
    DEVICE_LOG_MAGIC,
    MAX_ENTRIES,
    Entry,
    People,
    PersonLog,
    decode_device_log,
    decode_entry,
    encode_device_log,
)
from app.members.private_file import write_private

__all__ = [
    "MAX_REFUSALS",
    "PEOPLE_FILE",
    "DeviceBook",
    "Speaker",
    "is_device_log",
    "load",
    "save",
]

PEOPLE_FILE: Final = "members/people.json"
MAX_REFUSALS: Final = 8
"""Device-log contents refused from one sender before its others are ignored (a run)."""
MAX_LOG_BYTES: Final = 64 * 1024
"""Longest device-log content taken (64 entries of a few hundred bytes fit)."""


def is_device_log(content: bytes) -> bool:
    """Whether ``content`` is device-log content (``FF 'S' 'D' 01``)."""
    return content[: len(DEVICE_LOG_MAGIC)] == DEVICE_LOG_MAGIC


@dataclass(frozen=True, slots=True)
class Speaker:
    """Whom a device key speaks for: the person's root id, the device's name, and
    whether it is a device of our own person."""

    person: str
    device: str
    own: bool


class DeviceBook:
    """The device logs a node holds, from its own person's file and from the channels."""

    def __init__(self, own_sender_id: str = "") -> None:
        self.people = People()
        self.own_sender_id = own_sender_id
        self.own_root = ""
        """Our person's root id (``""``: no device log, a person of one device)."""
        self.refused: Counter[str] = Counter()
        """Refused contents by reason."""
        self._refusals: Counter[str] = Counter()
        self._raws: set[bytes] = set()
        self._names: dict[str, str] = {}
        self.sent: dict[str, str] = {}
        """Channel -> digest of the own log content last sent there (persisted)."""
        self.changed = False
        """Something to persist since the last :func:`save`."""

    # -- our own person ------------------------------------------------------

    def set_own(self, log: PersonLog | None) -> None:
        """Our person's log, as ``members/devices.json`` holds it (trusted: it is ours)."""
        if log is None:
            return
        self.own_root = log.root_id
        current = self.people.log_of(log.root_id)
        if current is not None:  # keep what the channels told us too
            log = _union(log.root, current, [*log.entries.values(), *log.pending.values()])
        self.people.put_log(log)
        self._raws.update(e.raw for e in log.entries.values())
        self.changed = True

    def own_content(self) -> bytes | None:
        """The device-log content to send (``None``: our person has no log)."""
        log = self.people.log_of(self.own_root) if self.own_root else None
        if log is None:
            return None
        return encode_device_log(log.raw_entries())

    def due(self, channel: str) -> bytes | None:
        """The own log content if ``channel`` has not been sent this state of it yet."""
        content = self.own_content()
        if content is None or self.sent.get(channel) == _digest(content):
            return None
        return content

    def mark_sent(self, channel: str, content: bytes) -> None:
        self.sent[channel] = _digest(content)
        self.changed = True

    # -- what the channels carry ---------------------------------------------

    def take(self, sender_id: str, content: bytes) -> str:
        """Fold device-log ``content`` sent by ``sender_id``; ``""`` when taken (or it
        held nothing new), else why not (the module docstring)."""
        why = self._take(sender_id, content)
        if why:
            self.refused[why] += 1
            self._refusals[sender_id] += 1
        return why

    def _take(self, sender_id: str, content: bytes) -> str:
        if self._refusals[sender_id] >= MAX_REFUSALS:
            return "ignored"
        raws = decode_device_log(content) if len(content) <= MAX_LOG_BYTES else None
        if not raws:
            return "malformed"
        new = [r for r in raws if r not in self._raws]
        if not new:
            return ""
        entries: list[Entry] = []
        for raw in new:
            entry = decode_entry(raw)
            if isinstance(entry, str):
                return entry
            entries.append(entry)
        root_id = entries[0].root_id
        if any(e.root_id != root_id for e in entries):
            return "mixed_roots"
        held = self.people.person_of(sender_id)
        if held is not None and held != root_id:
            return "other_person"
        if len(self.people.logs) >= 4096 and root_id not in self.people.logs:
            return "full"
        candidate = _union(entries[0].root, self.people.log_of(root_id), entries)
        if candidate.device_by_id(sender_id) is None:
            return "not_a_device"
        self.people.put_log(candidate)
        self._raws.update(e.raw for e in candidate.entries.values())
        self.changed = True
        return ""

    # -- labels ----------------------------------------------------------------

    def speaker(self, sender_id: str) -> Speaker | None:
        """Whom ``sender_id`` speaks for, when a log certifies it as a current device."""
        root = self.people.person_of(sender_id)
        if root is None:
            return None
        log = self.people.log_of(root)
        device = log.device_by_id(sender_id) if log is not None else None
        if device is None:
            return None
        return Speaker(root, device.name, bool(self.own_root) and root == self.own_root)

    def author_of(self, sender_id: str) -> str:
        """The id a line of ``sender_id`` is labelled by: its person's root, else itself."""
        return self.people.person_of(sender_id) or sender_id

    def note_name(self, sender_id: str, name: str | None) -> None:
        """``sender_id`` claimed ``name``: its person's name, if it speaks for one."""
        root = self.people.person_of(sender_id)
        if root is not None and name:
            self._names[root] = name

    def name_of(self, sender_id: str, claimed: str | None) -> str | None:
        """The name a line of ``sender_id`` claiming ``claimed`` is shown with: its
        person's (the name its devices claimed last), else ``claimed``."""
        root = self.people.person_of(sender_id)
        if root is None:
            return claimed
        return self._names.get(root) or claimed

    def devices_of(self, root_id: str) -> list[tuple[str, str]]:
        """``(device id, name)`` of the person's current devices, the root first."""
        log = self.people.log_of(root_id)
        return [] if log is None else [(d.device_id, d.name) for d in log.devices()]

    # -- the file --------------------------------------------------------------

    def encode(self) -> bytes:
        entries = [raw for log in self.people.logs.values() for raw in log.raw_entries()]
        doc = {"v": 1, "entries": [b64encode(r).decode() for r in entries],
               "sent": dict(sorted(self.sent.items()))}  # fmt: skip
        return json.dumps(doc).encode()

    def decode_into(self, data: bytes) -> None:
        """Take a file's entries and sent marks (what is unreadable is left out: the
        channels send the logs again; entries are checked again)."""
        try:
            doc = json.loads(data)
            raws = [b64decode(e) for e in doc["entries"]] if doc.get("v") == 1 else []
            sent = doc.get("sent", {})
        except (KeyError, TypeError, ValueError, AttributeError):
            return
        if isinstance(sent, dict):
            self.sent.update({str(k): str(v) for k, v in sent.items()})
        by_root: dict[str, list[Entry]] = {}
        for raw in raws:
            entry = decode_entry(raw)
            if not isinstance(entry, str):
                by_root.setdefault(entry.root_id, []).append(entry)
        for entries in by_root.values():
            log = PersonLog(entries[0].root)
            for e in entries[: 2 * MAX_ENTRIES]:
                log.take(e, resolve=False)
            log.resolve()
            self.people.put_log(log)
            self._raws.update(e.raw for e in log.entries.values())


def _union(root: bytes, held: PersonLog | None, entries: Iterable[Entry]) -> PersonLog:
    """A log of ``root`` made of what ``held`` holds (pending entries too) and
    ``entries``, resolved once."""
    log = PersonLog(root)
    if held is not None:
        for e in [*held.entries.values(), *held.pending.values()]:
            log.take(e, resolve=False)
    for e in entries:
        log.take(e, resolve=False)
    log.resolve()
    return log


def _digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def load(data_dir: Path, own_sender_id: str, own: PersonLog | None,
         into: DeviceBook | None = None) -> DeviceBook:  # fmt: skip
    """The book kept in ``data_dir`` (``members/people.json``; none yet: empty), with our
    person's ``own`` log over it (read into ``into`` when given: its holders keep it)."""
    book = into if into is not None else DeviceBook(own_sender_id)
    with contextlib.suppress(OSError):
        book.decode_into((data_dir / PEOPLE_FILE).read_bytes())
    book.set_own(own)
    book.changed = False
    return book


def save(data_dir: Path, book: DeviceBook) -> None:
    """Write the book (mode 0600, atomically). Raises OSError."""
    book.changed = False
    write_private(data_dir / PEOPLE_FILE, book.encode())
