"""A channel's log as people and scripts read it: ``sdschat history`` and :class:`LogLine`.

``sdschat history <channel> --data-dir DIR [--json]`` prints the stored log in
SDS order (ascending ``(lamport, message_id)``), which is the same order on
every participant that holds the same messages. With ``--json`` each line is
one object::

    {"position": 0, "id": "…", "sender": "…", "name": "alice", "kind": "msg",
     "lamport": 1712…, "content": "hello", "state": "acknowledged"}

``state`` is set for our own messages only (``queued``, ``sent``,
``possibly_acknowledged``, ``acknowledged``, ``failed``), ``null`` otherwise.

The command reads the database file read-only (SQLite WAL allows a reader
beside the writer), without the data-dir lock, so participants can be compared
while they run and a node started at the same moment is never refused. Only a
file at an older schema is opened through :meth:`storage.Store.open` (which
migrates it, and so needs the directory to itself).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from app.chat_content import decode_content, json_visible, visible
from storage import (
    DB_FILENAME,
    LogEntry,
    StorageError,
    Store,
    open_read_only,
)
from storage.database import translate_error
from storage.store import log_entry

__all__ = ["LogLine", "log_line", "print_history", "read_history"]


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
        }


def log_line(entry: LogEntry, position: int) -> LogLine:
    """Decode a stored :class:`storage.LogEntry` at ``position`` in the log."""
    content = decode_content(entry.content)
    return LogLine(
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
        "received_at, digest FROM messages WHERE channel = ? ORDER BY lamport, message_id",
        (channel,),
    ):
        yield log_entry(row)


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
        for entry in _read_only_rows(db, directory, channel):
            lines.append(log_line(entry, len(lines)))
        return lines
    except sqlite3.Error as exc:
        raise translate_error(exc, path) from exc
    finally:
        db.close()


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
    try:
        for line in lines:
            if as_json:
                out.write(json_visible(json.dumps(line.to_json(), ensure_ascii=False)) + "\n")
            else:
                who = visible(line.name or "?")
                body = visible(line.text)
                text = f"* {who} {body}" if line.kind == "me" else f"<{who}> {body}"
                state = f"  [{line.state}]" if line.state else ""
                out.write(f"{line.lamport}  {line.sender_id[:8]}  {text}{state}\n")
        out.flush()
    except BrokenPipeError:
        # the reader went away (| head, grep -m1): stop quietly, as Unix tools do; point
        # stdout at /dev/null so the interpreter's final flush does not fail again
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
