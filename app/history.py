"""A channel's log as people and scripts read it: ``sdschat history`` and :class:`LogLine`.

``sdschat history <channel> --data-dir DIR [--json]`` prints the stored log in
SDS order (ascending ``(lamport, message_id)``), which is the same order on
every participant that holds the same messages. With ``--json`` each line is
one object::

    {"position": 0, "id": "…", "sender": "…", "name": "alice", "kind": "msg",
     "lamport": 1712…, "content": "hello", "state": "acknowledged",
     "digest": "…", "conflict": false}

The log is shown *folded* (:class:`app.content.ConversationView`, ``docs/content.md``):
reactions, edits, deletions and file segments are not lines of their own but change
the line they name. ``content`` is then the line's current text (the author's latest
edit; ``""`` when deleted), ``kind`` one of ``msg``, ``me``, ``raw``, ``reply``,
``file``, ``topic``, ``nick``, ``join``, ``leave``, ``unsupported``, and each object
also has ``edited``, ``deleted``, ``reactions`` (emoji -> sender ids),
``reply_to`` (``{"id", "quote", "present", "sender", "name"}`` or ``null``) and
``file`` (``{"file_id", "name", "size", "sha256", "segments", "total", "complete",
"intact"}`` or ``null``). ``position`` stays the message's position in the log.

``state`` is set for our own messages only (``queued``, ``sent``,
``possibly_acknowledged``, ``acknowledged``, ``failed``), ``null`` otherwise.
``digest`` is the lowercase hex sha256 of the stored SDS content bytes (the
author's display name, kind and text as sent), so comparing two participants'
histories line by line (id, sender, digest) catches any divergence of text or
author, not only of ids. ``conflict`` is true when this participant received
another message under the same id that differed in author or content (a
``MessageConflict`` in its event log): the line shows the one it kept.

The command reads the database file read-only (SQLite WAL allows a reader
beside the writer), without the data-dir lock, so participants can be compared
while they run and a node started at the same moment is never refused. Only a
file at an older schema is opened through :meth:`storage.Store.open` (which
migrates it, and so needs the directory to itself).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from app.chat_content import decode_content, json_visible, visible
from app.content import SYSTEM_KINDS, ConversationView, ViewItem
from storage import (
    DB_FILENAME,
    LogEntry,
    OwnState,
    StorageError,
    Store,
    open_read_only,
)
from storage.database import translate_error

__all__ = ["LogLine", "fold", "log_line", "print_history", "read_history"]


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
    #: the stored content bytes (what :func:`fold` folds)
    content: bytes = field(default=b"", repr=False, compare=False)

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object (see the module docstring)."""
        return {
            "position": self.position,
            "id": self.message_id,
            "sender": self.sender_id,
            "name": self.name,
            "kind": self.kind,
            "lamport": self.lamport,
            "content": self.text,
            "state": self.state,
            "digest": self.digest,
            "conflict": self.conflict,
        }


def log_line(entry: LogEntry, position: int, *, conflict: bool = False) -> LogLine:
    """Decode a stored :class:`storage.LogEntry` at ``position`` in the log."""
    content = decode_content(entry.content)
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
    )


async def _read_with_store(data_dir: Path, channel: str) -> list[LogLine]:
    async with await Store.open(data_dir) as store:
        if await store.get_channel(channel) is None:
            raise LookupError(f"channel {channel!r} was never joined in {data_dir}")
        out: list[LogLine] = []
        async for entry in store.iter_log(channel):
            out.append(log_line(entry, len(out)))
        return out


def _read_only_rows(db: sqlite3.Connection, where: Path, channel: str) -> Iterator[LogEntry]:
    if db.execute("SELECT 1 FROM channels WHERE name = ?", (channel,)).fetchone() is None:
        raise LookupError(f"channel {channel!r} was never joined in {where}")
    for row in db.execute(
        "SELECT channel, message_id, sender_id, lamport, content, state, delivered_at, "
        "received_at FROM messages WHERE channel = ? ORDER BY lamport, message_id",
        (channel,),
    ):
        yield LogEntry(
            channel=str(row[0]),
            message_id=str(row[1]),
            sender_id=str(row[2]),
            lamport=int(row[3]),
            content=bytes(row[4]),
            state=None if row[5] is None else OwnState(str(row[5])),
            delivered_at=None if row[6] is None else int(row[6]),
            received_at=int(row[7]),
        )


def _conflicted_ids(db: sqlite3.Connection, channel: str) -> set[str]:
    """Ids with a recorded ``MessageConflict`` event (``app.node`` records them)."""
    return {
        str(row[0])
        for row in db.execute(
            "SELECT DISTINCT message_id FROM events WHERE channel = ? AND kind = ? "
            "AND message_id IS NOT NULL",
            (channel, "MessageConflict"),
        )
    }


def read_history(data_dir: str | Path, channel: str) -> list[LogLine]:
    """The whole stored log of ``channel`` in SDS order (see the module docstring).

    Call it outside a running event loop (or in a thread); an older file is
    migrated in a loop of its own.

    Raises:
        LookupError: no database, or the channel was never joined in it.
        storage.StorageError: the database cannot be read (damaged, newer, or
            — older and in use by a running node — locked).
    """
    directory = Path(data_dir)
    path = directory / DB_FILENAME
    if not path.is_file() or path.stat().st_size == 0:
        raise LookupError(f"no sdschat database in {directory}")
    db = open_read_only(path)
    if db is None:  # an older schema: migrate (takes the lock)
        return asyncio.run(_read_with_store(directory, channel))
    try:
        lines: list[LogLine] = []
        disputed = _conflicted_ids(db, channel)
        for entry in _read_only_rows(db, directory, channel):
            lines.append(log_line(entry, len(lines), conflict=entry.message_id in disputed))
        return lines
    except sqlite3.Error as exc:
        raise translate_error(exc, path) from exc
    finally:
        db.close()


def fold(lines: list[LogLine]) -> tuple[ConversationView, list[tuple[LogLine, ViewItem]]]:
    """The conversation view of ``lines`` and each shown item with its log line."""
    view = ConversationView((x.message_id, x.sender_id, x.lamport, x.content) for x in lines)
    by_id = {x.message_id: x for x in lines}
    return view, [(by_id[item.message_id], item) for item in view.items()]


def folded_json(line: LogLine, item: ViewItem) -> dict[str, object]:
    """One ``--json`` object of the folded history (module docstring)."""
    obj = line.to_json()
    obj.update(kind=item.kind, content=item.text, **item.to_json())
    return obj


def _human(line: LogLine, item: ViewItem, names: dict[str, str]) -> list[str]:
    """The folded item as text lines: a reply's quote above it, then the line with
    "(edited)"/"message deleted", its file progress, then its reactions."""
    who = visible(item.name or "?")
    head = f"{line.lamport}  {line.sender_id[:8]}  "
    out: list[str] = []
    if item.reply is not None:
        r = item.reply
        author = visible(r.target_name or "?") if r.present else "?"
        out.append(f"{' ' * len(head)}┌ {author}: {visible(r.quote)}")
    body = visible(item.text)
    if item.deleted:
        text = f"<{who}> (message deleted)"
    elif item.kind == "me":
        text = f"* {who} {body}"
    elif item.kind == "topic":
        text = f"-- {who} set the topic: {body}" if body else f"-- {who} cleared the topic"
    elif item.kind in SYSTEM_KINDS:
        text = f"-- {body}"
    elif item.kind == "file" and item.file is not None:
        f = item.file
        status = "complete" if f.intact else "sha256 MISMATCH" if f.complete else "segments"
        text = (
            f"<{who}> [file {visible(f.info.name)} {f.info.size} bytes, "
            f"{f.present}/{f.total} {status}]"
        )
    else:
        text = f"<{who}> {body}"
    if item.edited:
        text += " (edited)"
    state = f"  [{line.state}]" if line.state else ""
    out.append(f"{head}{text}{state}")
    if item.reactions:
        parts = [
            f"{visible(e)} " + ", ".join(visible(names.get(s, s[:8])) for s in senders)
            for e, senders in item.reactions.items()
        ]
        out.append(f"{' ' * len(head)}  " + "  ".join(parts))
    return out


def print_history(
    data_dir: str | Path, channel: str, *, as_json: bool, out: TextIO | None = None
) -> int:
    """``sdschat history``: print the log; returns the exit status."""
    out = out or sys.stdout
    try:
        lines = read_history(data_dir, channel)
    except LookupError as exc:
        print(f"sdschat history: {exc}", file=sys.stderr)
        return 1
    except (StorageError, sqlite3.Error) as exc:
        print(f"sdschat history: {exc}", file=sys.stderr)
        return 4
    _view, items = fold(lines)
    names = {x.sender_id: x.name for x in lines if x.name}
    try:
        for line, item in items:
            if as_json:
                obj = folded_json(line, item)
                out.write(json_visible(json.dumps(obj, ensure_ascii=False)) + "\n")
            else:
                out.write("".join(f"{x}\n" for x in _human(line, item, names)))
        out.flush()
    except BrokenPipeError:
        # the reader went away (| head, grep -m1): stop quietly, as Unix tools do; point
        # stdout at /dev/null so the interpreter's final flush does not fail again
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
