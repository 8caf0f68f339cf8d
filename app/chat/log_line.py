"""One message of a channel's log as people and scripts read it (:class:`LogLine`), and the
marks and sentences ``sdschat history`` and the TUI's log file share."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.chat.authors import authored
from app.chat.lines import EVENT_KINDS, TYPED_KINDS
from storage import LogEntry

if TYPE_CHECKING:
    from app.members.roster import Roster

__all__ = [
    "LATE_MARK",
    "RECOVERED_MARK",
    "REFUSED_MARK",
    "LogLine",
    "human_text",
    "log_line",
    "lost_line",
]

#: What follows a message that arrived after the protocol had declared it lost (the
#: TUI's mark for it, ``app/tui/render.py``).
RECOVERED_MARK = "↺ recovered after it was reported lost"
#: What follows any other message that arrived late (``LogLine.recovered``).
LATE_MARK = "↺ recovered"
#: What follows a message a members channel refused after it was shown (``LogLine.refused``).
REFUSED_MARK = "✗ refused: its sender was removed, and its removal did not accept it"


@dataclass(frozen=True, slots=True)
class LogLine:
    """One message of a channel's log, with its content decoded."""

    position: int
    message_id: str
    sender_id: str
    name: str | None
    kind: str
    text: str
    lamport: int
    state: str | None
    digest: str = ""
    conflict: bool = False
    content: bytes = b""  # the stored content bytes (what fold_lines folds)
    was_lost: bool = False
    recovered: bool = False
    missing_before: int = 0
    refused: bool = False
    """A members channel refused it after it was stored: its sender was removed and the
    removal's cut leaves it out (``MessageRefused`` in the event log)."""
    label: str = ""
    """How the author is written (``name``, with a fingerprint when another author's
    name looks like it): set by ``sdschat history``."""
    person: str = ""
    """The root id of the person whose device log certifies the author (public and
    passphrase channels; ``""`` otherwise): set by ``sdschat history``."""
    device: str = ""
    """That device's name."""

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object (see the module docstring)."""
        return {
            "position": self.position,
            "id": self.message_id,
            "sender": self.sender_id,
            "name": self.name,
            "label": self.label or self.name,
            "kind": self.kind,
            "lamport": self.lamport,
            "content": self.text,
            "state": self.state,
            "digest": self.digest,
            "conflict": self.conflict,
            "was_lost": self.was_lost,
            "recovered": self.recovered,
            "missing_before": self.missing_before,
            "refused": self.refused,
            "person": self.person,
            "device": self.device,
        }


def log_line(entry: LogEntry, position: int, *, conflict: bool = False,
             refused: bool = False, roster: Roster | None = None) -> LogLine:  # fmt: skip
    """Decode a stored :class:`storage.LogEntry` at ``position`` in the log; in a members
    channel (``roster``) its author named by the roster (:func:`app.chat.authors.authored`)."""
    content = authored(entry.content, entry.sender_id, roster)
    return LogLine(
        digest=hashlib.sha256(entry.content).hexdigest(),
        content=entry.content,
        conflict=conflict,
        position=position,
        message_id=entry.message_id,
        sender_id=entry.sender_id,
        name=content.name,
        kind=content.kind,
        text=content.text,
        lamport=entry.lamport,
        state=None if entry.state is None else entry.state.value,
        was_lost=entry.was_lost,
        recovered=entry.recovered or entry.was_lost,
        missing_before=entry.missing_before,
        refused=refused,
    )


def lost_line(n: int) -> str:
    """What stands above a message delivered after ``n`` of its dependencies were
    declared lost (the TUI's line, ``app/tui/render.py``)."""
    return f"✗ {n} message{'' if n == 1 else 's'} lost"


def human_text(kind: str, who: str, body: str) -> str:
    """How a line of ``sdschat history`` reads (``body`` already made visible)."""
    if kind == "me":
        return f"* {who} {body}"
    if kind == "topic":
        return f"-- {who} set the topic: {body}"
    if kind in EVENT_KINDS:
        return f"-- {body}"
    if kind in TYPED_KINDS:
        sep = "\n" if "\n" in body else "\\x0a"  # made visible with or without newlines
        target, _, rest = body.partition(sep)
        about = f"[{target[:8]}]"
        return {
            "reply": f"<{who}> ↪ {about} {rest}",
            "react": f"* {who} reacted {rest} to {about}",
            "unreact": f"* {who} took back {rest} on {about}",
            "edit": f"* {who} edited {about}: {rest}",
            "delete": f"* {who} deleted {about}",
        }[kind]
    return f"<{who}> {body}"
