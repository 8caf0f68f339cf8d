"""A full disk (issue 26 §2): what the node does when its database cannot be written.

When a round's commit fails with :class:`storage.DiskFullError`, nothing of the round
was stored, but the SDS core had already taken it in (own lines made into messages,
received messages delivered and acknowledged in our next filters). The node then
treats the failure like a crash before the commit:

* the round's typed lines are refused with :class:`DiskFullLineError` ("disk full"):
  nothing of them was published (envelopes leave only after their commit);
* the round's received envelopes are forgotten by the replay guard, so their senders'
  resends, repairs and the store peer's copies are taken again later;
* a :class:`~app.node.events.DiskFull` event (``state="full"``) says so;
* while the disk stays full, typed lines are refused at once and received envelopes
  are dropped unopened (counter ``dropped_disk_full``); the core is not fed, nothing
  is published;
* every :data:`PROBE_S` seconds the free space is checked; once there is
  :data:`MIN_FREE_BYTES`, the core of every channel is rebuilt from what is stored
  (as at a start after ``kill -9``: :func:`app.node.state_reconcile.reconcile_state`), a
  ``DiskFull`` event with ``state="ok"`` follows, and what was missed comes back
  through the protocol (resends of unacknowledged messages, SDS-R, the store peer).

What the event log keeps of a reminder (:func:`log_form`): the core repeats the ids
still missing in a ``MessagesMissing`` reminder every sweep (1 s with ``--fast``, 10 s
by default) and with each retry of ids declared lost. Logged as they were, a member
naming thousands of invented ids (issue 26, the soak's flood of 11 identities) made
every node log ~1.2 MB a second: one 10,000-id list per sweep, 59 MB of a 75 MB
database after two minutes, and ``n0``'s 128 MiB disk full again after the ballast
was removed. A reminder (``first`` false) repeats ids an earlier row already named,
with its time (the report's "noticed missing" takes the first); it is logged with
their count only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sds
from app import AppError
from storage import DiskFullError
from storage.doctor import MIN_FREE_BYTES as DOCTOR_MIN_FREE_BYTES

__all__ = [
    "MIN_FREE_BYTES",
    "PROBE_S",
    "DiskFullLineError",
    "DiskGuard",
    "MissingReminder",
    "is_disk_full",
    "log_form",
]

MIN_FREE_BYTES = DOCTOR_MIN_FREE_BYTES
"""Free space needed before the node writes again after a full disk."""

PROBE_S = 1.0
"""How often the free space is checked while the disk is full."""


class DiskFullLineError(AppError, RuntimeError):
    """A typed line was refused because the disk is full (nothing of it was sent)."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a full disk."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 8:  # bounded walk of the cause chain
        if isinstance(cur, DiskFullError | DiskFullLineError):
            return True
        if isinstance(cur, OSError) and cur.errno == 28:  # ENOSPC
            return True
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


class DiskGuard:
    """Whether the node's disk is full, and whether there is room again."""

    def __init__(self, data_dir: str | Path, *, min_free: int = MIN_FREE_BYTES) -> None:
        self.data_dir = Path(data_dir)
        self.min_free = min_free
        self.full = False
        self.episodes = 0
        self.refused_lines = 0
        self.dropped_envelopes = 0

    def free_bytes(self) -> int:
        """Bytes available to this process on the data directory's file system."""
        try:
            st = os.statvfs(self.data_dir)
        except OSError:
            return 0
        return st.f_bavail * st.f_frsize

    def room(self) -> bool:
        """Whether there is :attr:`min_free` free again."""
        return self.free_bytes() >= self.min_free

    def mark_full(self) -> bool:
        """Record a failed commit; True if the disk was not known full before."""
        was, self.full = self.full, True
        if not was:
            self.episodes += 1
        return not was


@dataclass(frozen=True, slots=True)
class MissingReminder:
    """What the event log keeps of a ``MessagesMissing`` that names nothing new: its
    row's kind stays ``MessagesMissing``; ``missing_len`` replaces the ids."""

    channel_id: str
    message_id: str
    sender_id: str
    first: bool
    missing_len: int


MissingReminder.__name__ = "MessagesMissing"  # the event log's kind (type(event).__name__)


def log_form(event: Any) -> Any:
    """``event`` as the node's event log keeps it: a reminder of missing ids by count
    (see the module docstring), everything else as it is."""
    if type(event) is sds.MessagesMissing and not event.first:
        return MissingReminder(
            event.channel_id, event.message_id, event.sender_id, False, len(event.missing)
        )
    return event
