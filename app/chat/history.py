"""A channel's log as people and scripts read it: ``sdschat history`` (its lines are
:class:`app.chat.log_line.LogLine`).

``sdschat history <channel> [--data-dir DIR] [--json]`` prints the stored log in
SDS order (ascending ``(lamport, message_id)``), which is the same order on
every participant that holds the same messages (``--data-dir`` defaults to
``sdschat join``'s). A line shows the author's send time (the Lamport timestamp
is wall-clock ms), the sender id's start, the text and an own message's state.
With ``--json`` each line is one object::

    {"position": 0, "id": "…", "sender": "…", "name": "alice", "label": "alice", "kind": "msg",
     "lamport": 1712…, "content": "hello", "state": "acknowledged",
     "digest": "…", "conflict": false, "was_lost": false, "recovered": false,
     "missing_before": 0, "refused": false, "person": "", "device": ""}

The log is shown *folded* (:mod:`app.chat.history_fold`, ``docs/content.md``): reactions,
edits, deletions and file segments are not lines of their own but change the line they
name. ``content`` is then the line's current text (the author's latest edit; ``""``
when deleted), ``kind`` one of ``msg``, ``me``, ``raw``, ``reply``, ``file``,
``topic``, ``nick``, ``join``, ``leave``, ``unsupported``, and each object also has
``edited``, ``deleted``, ``reactions`` (emoji -> sender ids), ``reply_to`` (``{"id",
"quote", "present", "sender", "name"}`` or ``null``) and ``file`` (``{"file_id",
"name", "size", "sha256", "segments", "total", "complete", "intact"}`` or ``null``).
``position`` stays the message's position in the log.

``name`` is the author's: in a members channel the roster's (the name an admin
admitted, or the member's own chained rename, read from the channel's membership
records), never the one claimed inside the content; elsewhere the claimed name.
``label`` is how a person should read it, the line's author column: ``name``, with the
author's fingerprint when another author's name looks like it (``alice (3f9a2b1c)``,
TR39 skeletons: docs/members.md, "Names"). Outside members channels, a line of a device
that its person's device log certifies (docs/members.md, "Devices") has that person's
name, ``person`` (the root's id: the label's fingerprint is the root's) and ``device``
(the device's name); another device of the reader's own person is labelled
``bob · laptop``. The device logs themselves are not listed.

``state`` is set for our own messages only (``queued``, ``sent``,
``possibly_acknowledged``, ``acknowledged``, ``failed``), ``null`` otherwise.
``digest`` is the lowercase hex sha256 of the stored SDS content bytes (the
author's display name, kind and text as sent), so comparing two participants'
histories line by line (id, sender, digest) catches any divergence of text or
author, not only of ids. ``conflict`` is true when this participant received
another message under the same id that differed in author or content (a
``MessageConflict`` in its event log): the line shows the one it kept. ``was_lost`` is
true when the message arrived after the protocol had declared it lost (stored with
it, so it reads the same after a restart); a human-readable line then ends with
``↺ recovered after it was reported lost``, as the TUI marks it. ``recovered`` is true
when it arrived late (named missing before it came, declared lost, or older than a
message of its author that came first): the line ends with ``↺ recovered``.
``refused`` is true when a members channel refused the message after it was stored
(its sender was removed and the removal's cut leaves it out, docs/members.md): a
human-readable line ends with ``✗ refused: …``. ``missing_before`` counts the
messages declared lost before it was delivered (its causal dependencies that never
came): a human-readable listing says ``✗ N messages lost`` on a line of its own
above it, as the TUI does. All three are stored with the message by the participant
that received it (``docs/chat.md``).

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
from dataclasses import replace
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TextIO

from app.chat.authors import Authors
from app.chat.history_fold import fold_lines
from app.chat.lines import json_visible, visible
from app.chat.log_line import (
    LATE_MARK,
    RECOVERED_MARK,
    REFUSED_MARK,
    LogLine,
    human_text,
    log_line,
    lost_line,
)
from app.members import device_labels, person_file
from app.members.device_labels import is_device_log
from app.members.roster import Roster
from app.members.secrets_file import read_roster
from app.names import NameBook
from storage import (
    DB_FILENAME,
    LogEntry,
    StorageError,
    Store,
    open_read_only,
)
from storage.database import translate_error
from storage.store import log_entry

__all__ = ["print_history", "read_history"]

async def _read_with_store(data_dir: Path, channel: str) -> list[LogLine]:
    async with await Store.open(data_dir) as store:
        if await store.get_channel(channel) is None:
            raise LookupError(f"channel {channel!r} was never joined in {data_dir}")
        roster = read_roster(data_dir, channel)
        out: list[LogLine] = []
        async for entry in store.iter_log(channel):
            out.append(log_line(entry, len(out), roster=roster))
        return _labelled(out, roster, data_dir)


def _labelled(lines: list[LogLine], roster: Roster | None,
              data_dir: Path | None = None) -> list[LogLine]:  # fmt: skip
    """Each line with its author's label: the roster's (members channels) or the
    claimed name, with the author's fingerprint where another author's name looks
    like it (app/names.py); outside members channels a device its person's log
    certifies is labelled as that person (:func:`_people`)."""
    if roster is not None:
        return [replace(x, label=roster.label_of(x.sender_id)) for x in lines]
    if data_dir is not None:
        return _people(lines, data_dir)
    book = NameBook((x.sender_id, x.name) for x in lines if x.name)
    return [replace(x, label=book.label(x.name, x.sender_id)) for x in lines]


def _people(lines: list[LogLine], data_dir: Path) -> list[LogLine]:
    """Lines labelled as the node labels them (app/members/device_labels.py): the device
    logs the node kept and those the log holds, folded in log order; a certified
    device's line has its person's name, its ``person`` (the root id: the label's
    fingerprint is the root's) and ``device``. The device logs are no lines."""
    try:
        own = person_file.load(data_dir)
    except person_file.PersonFileError:
        own = None
    devices = device_labels.load(data_dir, "", own)
    for x in lines:
        if is_device_log(x.content):
            devices.take(x.sender_id, x.content)
    authors = Authors(devices)
    kept = [x for x in lines if not is_device_log(x.content)]
    for x in kept:
        authors.note("", x.sender_id, x.name)
    out = []
    for x in kept:
        sp = devices.speaker(x.sender_id)
        label = authors.label("", x.sender_id, x.name)
        if sp is not None and sp.own and x.state is None:
            label += f" · {sp.device}"  # another device of ours (the node's mark)
        person, device = (sp.person, sp.device) if sp is not None else ("", "")
        out.append(replace(x, name=authors.name(x.sender_id, x.name), label=label,
                           person=person, device=device))  # fmt: skip
    return out


def _read_only_rows(db: sqlite3.Connection, where: Path, channel: str) -> Iterator[LogEntry]:
    if db.execute("SELECT 1 FROM channels WHERE name = ?", (channel,)).fetchone() is None:
        raise LookupError(f"channel {channel!r} was never joined in {where}")
    for row in db.execute(
        "SELECT channel, message_id, sender_id, lamport, content, state, delivered_at, "
        "received_at, digest, was_lost, recovered, missing_before FROM messages WHERE channel = ? "
        "ORDER BY lamport, message_id",
        (channel,),
    ):
        yield log_entry(row)


def _conflicted_ids(db: sqlite3.Connection, channel: str,
                    kind: str = "MessageConflict") -> set[str]:  # fmt: skip
    """Ids with a recorded ``MessageConflict`` event (``app.node.runtime`` records them), or
    another ``kind`` (``MessageRefused``: a members channel's cut left it out)."""
    return {
        str(row[0])
        for row in db.execute(
            "SELECT DISTINCT message_id FROM events WHERE channel = ? AND kind = ? "
            "AND message_id IS NOT NULL",
            (channel, kind),
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
    roster = read_roster(directory, channel)  # a members channel: the roster's names
    try:
        lines: list[LogLine] = []
        disputed = _conflicted_ids(db, channel)
        refused = _conflicted_ids(db, channel, "MessageRefused")
        for entry in _read_only_rows(db, directory, channel):
            lines.append(log_line(entry, len(lines), conflict=entry.message_id in disputed,
                                  refused=entry.message_id in refused, roster=roster))  # fmt: skip
        return _labelled(lines, roster, directory)
    except sqlite3.Error as exc:
        raise translate_error(exc, path) from exc
    finally:
        db.close()


def _when(lamport: int, tz: tzinfo | None) -> str:
    """A Lamport timestamp as the local date and time it stands for (its wall-clock ms)."""
    try:
        return datetime.fromtimestamp(lamport / 1000.0, tz).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):  # a peer's clock far off: the number
        return str(lamport)


def print_history(
    data_dir: str | Path,
    channel: str,
    *,
    as_json: bool,
    out: TextIO | None = None,
    tz: tzinfo | None = None,
) -> int:
    """``sdschat history``: print the log; returns the exit status.

    A line reads ``2026-11-24 13:31:05  1a2b3c4d  <alice> hello  [acknowledged]``: the
    author's send time (the SDS Lamport timestamp, wall-clock ms) in ``tz`` (default:
    local time), the sender id's first 8 characters, the text, :data:`RECOVERED_MARK`
    for a message that arrived after it was declared lost (:data:`LATE_MARK` for one
    that arrived late otherwise), an own message's state. A message delivered after
    lost ones has :func:`lost_line` above it, under its text's column.
    ``--json`` keeps the Lamport timestamp as it is."""
    out = out or sys.stdout
    try:
        lines = read_history(data_dir, channel)
    except LookupError as exc:
        print(f"sdschat history: {exc}", file=sys.stderr)
        return 1
    except (StorageError, sqlite3.Error) as exc:
        print(f"sdschat history: {exc}", file=sys.stderr)
        return 4
    lines = fold_lines(lines)
    try:
        for line in lines:
            if as_json:
                out.write(json_visible(json.dumps(line.to_json(), ensure_ascii=False)) + "\n")
            else:
                who = visible(line.label or line.name or "?")
                body = visible(line.text, newlines=True)  # a line break stays one
                text = human_text(line.kind, who, body)
                state = f"  [{line.state}]" if line.state else ""
                late = (
                    f"  {RECOVERED_MARK}" if line.was_lost
                    else f"  {LATE_MARK}" if line.recovered else ""
                )
                when = _when(line.lamport, tz)
                head = f"{when}  {line.sender_id[:8]}  "
                if line.missing_before:
                    out.write(" " * len(head) + lost_line(line.missing_before) + "\n")
                # the lines of a multi-line message under the first one's text
                text = text.replace("\n", "\n" + " " * len(head))
                refused = f"  {REFUSED_MARK}" if line.refused else ""
                out.write(f"{head}{text}{late}{refused}{state}\n")
        out.flush()
    except BrokenPipeError:
        # the reader went away (| head, grep -m1): stop quietly, as Unix tools do; point
        # stdout at /dev/null so the interpreter's final flush does not fail again
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
