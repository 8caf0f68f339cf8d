"""A copied data directory is refused, never silently broken.

A data directory holds one device key (``identity.pem``): its SDS sender id. Two
processes using the same key (a directory copied with ``cp -a`` or ``rsync``, restored
from a backup, a VM snapshot started twice) break each other: each drops the other's
lines as its own echo, neither acknowledges them, and the person's history splits.
Two checks refuse it, with a message that says what happened and what to do:

1. **At start, by the directory itself** (:func:`check_home`). The first start writes
   ``device.json``: the key's sender id and the inode of the directory. ``mv`` on one
   file system keeps a directory's inode, and so does restoring a file inside it (a
   lost ``identity.pem`` put back); a copy of the directory (``cp -a``, a restore
   beside the original) is another directory, while ``device.json`` still names the
   old one: :class:`DataDirCopiedError`. ``sdschat join --moved`` (the directory was
   moved to another disk, or restored after the original was lost for good) forgets
   the record (:func:`forget_home`), and the next start writes a new one.
2. **While it runs, by what arrives** (:class:`EchoWatch`). A copy made before the
   record existed, or a VM snapshot (same path, same inode), passes check 1. Then a
   content message signed with our key whose id this directory never logged (the core
   does not hold it and the database has no row of it: our own lines are stored before
   they leave) was sent by another process holding our key. The node reports it once
   (:class:`~app.node.events.DeviceCopied`) and the front ends stop, saying so.

3. **By the others** (:class:`TwinWatch`). A causal history starts with the newest
   entries of its sender's log, in ``(lamport, id)`` order (js-waku and nim-sds send
   only those; sdschat's adaptive history sends the newest ``causal_history_floor``
   first), and a sender's own lines are in its log from the moment it sends them.
   So if a line of X starts its history (two entries in log order) at an entry
   older than X's earlier line m1 and does not name m1, the process that sent it
   never held m1: two processes sign as X (or X runs an old backup of its data
   directory). Every member that holds those lines sees it the same way, and is
   told once per sender and channel (:class:`~app.node.events.DeviceTwins`).
   Nothing is refused: every line of both copies is kept, as X's. (A sender
   configured with ``causal_history_floor = 0`` names no newest entries; its
   history could start in log order by chance, and then a warning could be
   wrong.)

A second device of the same person is linked (``sdschat link``, ``/link``,
``sdschat join --link CODE``): it gets its own data directory and device key
(docs/members.md, "Devices").
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from app import AppError

__all__ = [
    "DEVICE_FILE",
    "DataDirCopiedError",
    "EchoWatch",
    "ForeignEcho",
    "KeyTwins",
    "TwinWatch",
    "check_home",
    "forget_home",
]

DEVICE_FILE: Final = "device.json"

SECOND_DEVICE: Final = (
    "To use sdschat on a second device, link it: run 'sdschat link' (or /link) here and "
    "'sdschat join --link CODE --data-dir NEW' there; it gets its own key and your channels."
)


class DataDirCopiedError(AppError, RuntimeError):
    """This data directory is a copy of another one (not the directory its device key
    was created in). Nothing was changed."""


def _record(sender_id: str, ino: int, path: Path) -> dict[str, object]:
    return {"version": 1, "device": sender_id, "dir_inode": ino, "created_in": str(path)}


def check_home(data_dir: Path, sender_id: str) -> None:
    """Check that ``data_dir`` is the directory its device key was created in (writing
    the record at the first start). Call it with the data-dir lock held.

    Raises:
        DataDirCopiedError: the directory is another one than the one recorded (a copy,
            a restore beside the original); the message says what happened and what
            to do.
    """
    record_path = data_dir / DEVICE_FILE
    ino = data_dir.stat().st_ino
    try:
        record = json.loads(record_path.read_text("utf-8"))
        recorded = record["dir_inode"], record["device"], record["created_in"]
    except FileNotFoundError:
        recorded = None
    except (OSError, ValueError, KeyError, TypeError):
        recorded = None  # unreadable: written again (it says nothing then)
    if recorded is not None and recorded[1] == sender_id and recorded[0] != ino:
        where = str(recorded[2])
        here = str(data_dir.resolve())
        origin = f"of {where}" if where != here else "of this directory made earlier"
        raise DataDirCopiedError(
            f"{data_dir} is a copy {origin} (copied, restored from a backup or a "
            f"snapshot): its device key {sender_id[:12]} is already in use there. Two "
            "copies of one device drop each other's lines as their own, and both break. "
            "Nothing was changed. If the original is gone for good (you moved this "
            "directory to another disk, or restored it after losing the original), "
            f"start once with --moved. Otherwise delete this copy. {SECOND_DEVICE}"
        )
    if recorded is not None and recorded[:2] == (ino, sender_id):
        return
    with contextlib.suppress(OSError):  # a full disk, a read-only mount: the next start
        _write(record_path, _record(sender_id, ino, data_dir.resolve()))  # writes it


def forget_home(data_dir: Path) -> None:
    """Forget where the directory's key was created (``--moved``): the next start
    records the directory it runs in."""
    with contextlib.suppress(FileNotFoundError):
        (data_dir / DEVICE_FILE).unlink()


def _write(path: Path, record: dict[str, object]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, (json.dumps(record, indent=1) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@dataclass(frozen=True, slots=True)
class ForeignEcho:
    """A line signed with our key that this directory did not send."""

    channel: str
    message_id: str

    @property
    def text(self) -> str:
        return (
            f"another process is using this device's key: a line signed with it that this "
            f"data directory never sent arrived in #{self.channel} (message "
            f"{self.message_id[:12]}). This data directory is a copy (cp, rsync, a "
            "restored backup, a VM snapshot) of one that runs or ran elsewhere; two copies "
            "drop each other's lines as their own, so this one stops. Keep one copy and "
            f"delete the other. {SECOND_DEVICE}"
        )


class EchoWatch:
    """Own-key lines from elsewhere: suspected on arrival, confirmed against storage.

    :meth:`suspect` is asked for every content message signed with our key that the
    core does not hold (the receive path); it answers whether to look the id up in
    storage (once per id, and nothing after a copy was found). :meth:`confirm` takes
    the answer: the first id storage does not hold either is the :class:`ForeignEcho`
    to report; then the watch is done."""

    MAX_PENDING: Final = 64

    def __init__(self) -> None:
        self.found: ForeignEcho | None = None
        self._pending: set[tuple[str, str]] = set()

    def suspect(self, channel: str, message_id: str) -> bool:
        key = (channel, message_id)
        if self.found is not None or key in self._pending or len(self._pending) >= self.MAX_PENDING:
            return False
        self._pending.add(key)
        return True

    def confirm(self, channel: str, message_id: str, stored: bool) -> ForeignEcho | None:
        """Storage's answer for a suspected id: the copy found (once), else ``None``."""
        self._pending.discard((channel, message_id))
        if stored or self.found is not None:
            return None
        self.found = ForeignEcho(channel, message_id)
        return self.found


@dataclass(frozen=True, slots=True)
class KeyTwins:
    """Two processes sign as ``sender_id``: its line ``message_id`` does not know its
    own earlier line ``unknown``, though it names older ones."""

    channel: str
    sender_id: str
    message_id: str
    unknown: str

    def text(self, name: str) -> str:
        who = f"{name} ({self.sender_id[:8]})" if name else self.sender_id[:12]
        return (
            f"{who} is running two copies of one data directory (or an old backup of it): "
            f"their line {self.message_id[:12]} does not know their own earlier line "
            f"{self.unknown[:12]}. Every line of both is kept; the copy stops at its next "
            "start, or when it hears the other."
        )


class TwinWatch:
    """Per channel and sender, its newest line delivered so far, to find a line of the
    sender that does not know it (module docstring, check 3).

    O(1) per delivery but for a look for that line in the history, from its newest
    end (where a sender's own last line is). Two copies are found at a line of one
    that comes after a line of the other: the first switch seen in Lamport order.
    Bounded: :data:`SENDERS` (channel, sender) pairs, the least recently heard
    forgotten first."""

    SENDERS: Final = 65_536

    def __init__(self) -> None:
        self._newest: OrderedDict[tuple[str, str], tuple[int, str]] = OrderedDict()
        self._told: set[tuple[str, str]] = set()

    def delivered(
        self,
        channel: str,
        sender_id: str,
        message_id: str,
        lamport: int,
        history: Sequence[str],
        history_start: int | None,
    ) -> KeyTwins | None:
        """A line delivered; ``history_start`` is the Lamport time of the first entry
        of ``history`` when its first two entries are known and in log order
        (:meth:`app.node.clock_guard.LamportMemory.history_start`), else ``None``.
        The twins found by it, once per (channel, sender)."""
        key = (channel, sender_id)
        newest = self._newest.get(key)
        found = None
        if newest is None:
            self._newest[key] = (lamport, message_id)
            while len(self._newest) > self.SENDERS:
                self._newest.popitem(last=False)
            return None
        self._newest.move_to_end(key)
        earlier, mid = newest
        if earlier >= lamport:
            return None  # a late line of theirs: nothing to compare it with
        self._newest[key] = (lamport, message_id)
        if (history_start is not None and history_start < earlier and key not in self._told
                and not _names(history, mid)):  # fmt: skip
            found = KeyTwins(channel, sender_id, message_id, mid)
            self._told.add(key)
        return found


def _names(history: Sequence[str], message_id: str) -> bool:
    """Whether ``history`` names ``message_id``, looked for from its newest end."""
    return message_id in reversed(history)
