"""What the TUI knows about each channel, without Textual: rows, markers, states, counts.

:class:`ChatModel` turns node events (:mod:`app.node.events`) and pages of
the stored log (:meth:`storage.Store.page`) into per-channel
:class:`ChannelView` windows that the message log widget draws. Keeping this
apart from the widgets makes the reliability rules testable on their own:

* **Rows in SDS order.** A window holds at most :data:`MAX_WINDOW` rows of a
  channel's log, sorted by ``(lamport, message_id)`` (the same order on every
  participant). Older rows are paged in from SQLite when the person scrolls
  up, newer ones when they scroll back down; the window never holds the whole
  history (100,000 messages open as fast as 200).
* **Own messages** appear the moment they are typed (``queued``, keyed by
  their outbox ``local_id`` after everything else), take their place in the
  order once the core made a message of them (``logged``), then move through
  ``sent`` -> ``possibly_acknowledged`` -> ``acknowledged`` (or ``failed``).
* **A message waiting for its causal dependencies** is shown at once (from
  :class:`~app.node.events.Missing`), marked "N earlier messages missing";
  the count falls as the dependencies arrive (they are inserted before it, in
  order, marked *recovered*); when it is finally delivered the marker goes, or
  becomes "N messages lost" if the core gave some up
  (:class:`~app.node.events.Lost`).
* **Unread and mentions** count per channel while it is not the current one;
  ``new_after`` is where the "── new ──" line goes.
* **Typing**: who is typing, until when (expiry is the reader's clock).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.chat.authors import authored
from app.chat.lines import EVENT_KINDS, TYPED_KINDS, split_typed
from app.node.events import (
    ChannelJoined,
    ChannelLeft,
    Conflict,
    ConnectionChanged,
    Delivered,
    Lost,
    MembersEvent,
    Missing,
    NodeEvent,
    OwnMessage,
    PeerSeen,
)
from app.tui.names import ColourSlots, NameBook, label
from storage import Cursor, LogEntry

if TYPE_CHECKING:
    from app.members.device_labels import DeviceBook
    from app.members.roster import Roster

__all__ = [
    "MAX_WINDOW",
    "PAGE",
    "PENDING_LAMPORT",
    "STATE_GLYPHS",
    "ChannelView",
    "ChatModel",
    "FileState",
    "Row",
    "mentions",
]

PAGE = 200
"""Rows fetched from SQLite per page."""

MAX_WINDOW = 1200
"""Most rows a channel's window holds; the far end is dropped (and paged in again)."""

MAX_REPORTED = 10_000
"""Most disputed ids per channel remembered (to mark their rows when they are shown)."""

PENDING_LAMPORT = 2**63 - 1
"""Sort key of own lines the core has not logged yet: after everything."""

STATE_GLYPHS = {
    "queued": "◌",
    "sent": "○",
    "possibly_acknowledged": "◐",
    "acknowledged": "●",
    "failed": "✗",
}
"""Own-message delivery state -> glyph (see the README's user guide)."""

Key = tuple[int, str]

NOTIFY_LEVELS = {
    "all": "every message counts as unread; mentions ring and notify",
    "mentions": "only lines for you count, ring and notify (/mute mentions)",
    "none": "nothing counts, rings or notifies (/mute); the lines are in the log",
}
"""Per-channel notification levels (WeeChat's notify levels, Matrix's room settings)."""

#: Forward only; a late acknowledgement turns "failed" into "acknowledged".
_STATE_RANK = {"queued": 0, "sent": 1, "possibly_acknowledged": 2, "failed": 3, "acknowledged": 4}


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` mentions ``name``: ``@name``, ``name:`` (what Tab completes at the
    start of a line) or the bare name, as a whole word in any case (WeeChat's default
    highlight); not inside a word, an address (``alice@example.org``) or a path."""
    if not name:
        return False
    pattern = rf"(?<![\w@./-])@?{re.escape(name)}(?![\w@/-])"
    return re.search(pattern, text, re.IGNORECASE) is not None


_SEGMENT_TEXT = re.compile(r"file segment (\d+) of ([0-9a-f]{8})")
"""A segment's summary text (``app.chat.content.decode``): its index and its file id's start."""


@dataclass(eq=False)
class FileState:
    """A received file's reassembly as the log shows it (``app/tui/files.py`` reads it
    from the store): ``present`` segments of ``total`` (received, delivered or still
    waiting for an earlier one), and, once every segment is stored, whether the sha256
    of the joined bytes matches the manifest (``intact``; None until checked)."""

    file_id: str
    name: str
    size: int
    total: int
    segment_size: int
    present: set[int] = field(default_factory=set)
    intact: bool | None = None
    not_kept: bool = False
    """Some of its segments were stored empty here (over the sender's file quota or
    the channel's file cap, ``app/chat/file_quota.py``): it can never complete."""

    @property
    def received_bytes(self) -> int:
        """Bytes of the file in the segments present (the last one is shorter)."""
        seg, size = self.segment_size, self.size
        return sum(max(0, min(seg, size - i * seg)) for i in self.present)

    @property
    def complete(self) -> bool:
        return len(self.present) >= self.total


@dataclass(eq=False, slots=True)
class Row:
    """One line of a channel's log as shown (a message, own or others').

    ``version`` changes whenever something drawn changes, so renderers can
    cache by ``(row, version)``.
    """

    key: Key
    sender_id: str
    name: str | None
    kind: str
    text: str
    time_ms: int
    """When it arrived here (or was typed, for an own line), local clock, ms."""
    message_id: str | None = None
    local_id: int | None = None
    own_state: str | None = None
    waiting_for: set[str] = field(default_factory=set)
    """Dependencies this (not yet delivered) message waits for; empty once delivered."""
    arrived: set[str] = field(default_factory=set)
    """Those of ``waiting_for`` that arrived and wait themselves (shown, dimmed): not
    missing any more, but not delivered yet."""
    lost: int = 0
    """Dependencies given up as lost before it (at delivery ``Delivered.missing_before``,
    stored with the message: ``LogEntry.missing_before``)."""
    recovered: bool = False
    """It arrived late: after it was reported missing (by any later message, a sync
    message or a reminder), or after a later message of its author (repair, resend,
    sync or the store filled the gap). The node decides it (``app/node/late_arrivals.py``:
    ``Delivered.recovered``, ``Missing.recovered``) and stores it with the message
    (``LogEntry.recovered``), so a row read back from SQLite is marked the same."""
    after_lost: bool = False
    """It arrived after the protocol had reported it lost."""
    disputed: str | None = None
    """Another member sent a different message under this id (``Conflict.reason``:
    ``author``, ``content`` or ``timestamp``): the row shows the one this
    participant received first, marked, never silently replaced."""
    refused: bool = False
    """A members channel refused it after it was shown: its sender was removed and the
    removal did not accept it (a ``members`` event ``refused``; ``sdschat history`` marks
    it too)."""
    mention: bool = False
    retried: bool = False
    version: int = 0
    target: str | None = None
    """For a typed message (reply, reaction, edit, deletion): the message it is about."""
    hidden: bool = False
    """A reaction, edit or deletion: folded into its target, not a line of its own."""
    original: str = ""
    """The text as first sent (``text`` follows the author's edits)."""
    quote: str | None = None
    """A reply's target as ``name: text`` (None: not known yet)."""
    reactions: dict[str, list[str]] = field(default_factory=dict)
    """emoji -> sender ids who reacted with it (in the order they did)."""
    edited: bool = False
    deleted: bool = False
    file: FileState | None = None
    """A file line's reassembly (None until its manifest was read from the store)."""
    seen_by: list[str] = field(default_factory=list)
    """Own message: the members whose causal history named it (the acknowledgement)."""
    filter_hits: list[str] = field(default_factory=list)
    """Own message: the members whose bloom filter held it (``/info``: who has it)."""
    shared_name: bool = False
    """Another sender id uses the same display name: shown as ``name (3f9a)``."""
    colour: int | None = None
    """Index of the author's colour in the palette (distinct per author in a channel)."""

    person: str = ""
    """The root id of the person whose device log certifies the author (``Delivered.person``):
    its lines are told apart by the root's fingerprint; our own sender id for another
    device of our own person (its lines are ours)."""
    device: str = ""
    """Another device of our own person: its name, shown after ours (``bob · laptop``)."""

    @property
    def author_id(self) -> str:
        """Who the line is by, for names, colours and fingerprints: the person, else the key."""
        return self.person or self.sender_id

    @property
    def who(self) -> str:
        """The author as written on the line: ``label`` of :mod:`app.tui.names`."""
        who = label(self.name, self.author_id, self.shared_name)
        return f"{who} · {self.device}" if self.device else who

    def __post_init__(self) -> None:
        self._parse_typed()

    def _parse_typed(self) -> None:
        if self.kind in TYPED_KINDS:
            self.target, self.text = split_typed(self.text)
            self.hidden = self.kind != "reply"
        elif self.kind == "segment":  # a piece of a file: the file's line stands for it
            self.hidden = True
        self.original = self.text

    def set_content(self, name: str | None, kind: str, text: str) -> None:
        """New content for the row (a waiting message delivered); whether it is hidden
        is decided again (:meth:`ChannelView.set_row_content` redoes the rest)."""
        self.name, self.kind, self.text = name, kind, text
        self.hidden = False
        self._parse_typed()

    @property
    def own(self) -> bool:
        return self.own_state is not None

    @property
    def sent_ms(self) -> int:
        """When the author sent it: its SDS Lamport timestamp (wall-clock ms of the author,
        the same on every screen), or, for an own line the core has not stamped yet, when
        it was typed. ``time_ms`` is when it arrived here (``/info`` shows both)."""
        lamport = self.key[0]
        if self.message_id is not None and 0 < lamport < PENDING_LAMPORT:
            return lamport
        return self.time_ms

    @property
    def waiting(self) -> bool:
        return bool(self.waiting_for)

    def touch(self) -> None:
        self.version += 1


def quote_of(row: Row) -> str:
    """A reply's quote of its target: ``name: first line of the text``."""
    who = row.who
    if row.deleted:
        return f"{who}: message deleted"
    first = row.text.split("\n", 1)[0]
    return f"{who}: {first}"


def apply_effects(row: Row, effects: Iterable[Row]) -> None:
    """Set ``row``'s reactions, edit and deletion from the typed messages about it, in
    SDS order (the same result on every screen, whatever order they arrived in). Edits
    and deletions count only from the row's own author."""
    reactions: dict[str, list[str]] = {}
    text, edited, deleted = row.original, False, False
    for e in sorted(effects, key=lambda r: r.key):
        if e.kind == "react":
            who = reactions.setdefault(e.text, [])
            if e.sender_id not in who:
                who.append(e.sender_id)
        elif e.kind == "unreact":
            who = reactions.get(e.text, [])
            if e.sender_id in who:
                who.remove(e.sender_id)
        elif e.sender_id == row.sender_id and e.kind == "edit":
            text, edited = e.text, True
        elif e.sender_id == row.sender_id and e.kind == "delete":
            deleted = True
    reactions = {k: v for k, v in reactions.items() if v}
    if (reactions, text, edited, deleted) != (row.reactions, row.text, row.edited, row.deleted):
        row.reactions, row.text, row.edited, row.deleted = reactions, text, edited, deleted
        row.touch()


@dataclass(eq=False)
class ChannelView:
    """A channel's window of rows and its counters (see the module docstring)."""

    name: str
    public: bool = False
    keys: list[Key] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    at_tail: bool = True
    """The window reaches the newest stored message (live rows are appended)."""
    more_before: bool = False
    """Older stored rows exist before the window."""
    loaded: bool = False
    unread: int = 0
    mentioned: bool = False
    new_after: Key | None = None
    """The "── new ──" line goes before the first row after this key."""
    last_read: Key | None = None
    """Newest row the person has seen here (persisted between runs)."""
    new_below: int = 0
    """Messages that arrived below what the reader looks at: beyond the window while it
    does not reach the newest message, or under the screen while they are scrolled up."""
    following: bool = True
    """The log shows the bottom (set by the app): new rows may push old ones out."""
    typing: dict[str, tuple[str, float]] = field(default_factory=dict)
    sealed_ids: set[str] = field(default_factory=set)
    """Messages of a members channel from before we were added (app/members): shown
    once, as one "N messages from before you joined" line (``sealed_row``)."""
    sealed_row: Row | None = None
    """sender id -> (name, expires at, seconds)."""
    missing: dict[str, set[str]] = field(default_factory=dict)
    """missing dependency id -> waiting message ids that named it."""
    disputed: dict[str, str] = field(default_factory=dict)
    """message id -> conflict reason, for rows loaded or arriving after the report."""
    version: int = 0
    """Changes whenever rows are added, removed or re-keyed."""
    by_id: dict[str, Row] = field(default_factory=dict)
    """message id -> row, for the rows in the window."""
    hide_events: bool = False
    """Join, leave and nick lines are hidden (F4)."""
    topic: str = ""
    """The channel's topic: the newest topic line (``/topic``) in SDS order."""
    topic_key: Key | None = None
    topic_by: str = ""
    replies: dict[str, list[Row]] = field(default_factory=dict)
    """target id -> the replies to it seen here (their quotes follow its edits)."""
    unquoted: dict[str, list[Row]] = field(default_factory=dict)
    """target id -> replies shown without their quote (the target not in the window)."""
    effects: dict[str, dict[str, Row]] = field(default_factory=dict)
    """target message id -> (effect's message id or local key -> the reaction, edit or
    deletion row): kept so a target paged in later, or shown again, gets them."""
    segments: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    """(sender id, file id's first 8 hex) -> indices of that file's segments seen here
    (delivered, or arrived and waiting), whether or not they are in the window."""
    files: dict[str, FileState] = field(default_factory=dict)
    """file line's message id -> its reassembly (kept when the line leaves the window)."""
    files_todo: set[str] = field(default_factory=set)
    """File lines whose manifest must be read, or whose complete bytes must be checked,
    from the store (the app does it: ``app/tui/files.py``)."""
    book: NameBook = field(default_factory=NameBook)
    """Who claims which name (shared by the model's views: :mod:`app.tui.names`)."""
    colours: ColourSlots = field(default_factory=ColourSlots)
    """This channel's author colours: distinct while the palette lasts."""

    def note_segment(self, sender_id: str, text: str) -> bool:
        """A segment of a file arrived (``text``: its summary); True if a file line
        shown here changed (its progress moved)."""
        m = _SEGMENT_TEXT.fullmatch(text)
        if m is None:
            return False
        index, short = int(m.group(1)), m.group(2)
        if index >= 65_536:  # stored empty (app/chat/file_quota.py): the file cannot complete
            return self._not_kept(sender_id, short)
        seen = self.segments.setdefault((sender_id, short), set())
        if index in seen:
            return False
        seen.add(index)
        changed = False
        for mid, state in self.files.items():
            row = self.by_id.get(mid)
            owner = row.sender_id if row is not None else None
            ours = state.file_id[:8] == short and owner in (None, sender_id)
            if ours and 0 <= index < state.total and index not in state.present:
                state.present.add(index)
                if state.complete and state.intact is None:
                    self.files_todo.add(mid)
                if row is not None:
                    row.touch()
                    changed = True
        return changed

    def _not_kept(self, sender_id: str, short: str) -> bool:
        changed = False
        for mid, state in self.files.items():
            row = self.by_id.get(mid)
            owner = row.sender_id if row is not None else None
            if state.file_id[:8] == short and owner in (None, sender_id) and not state.not_kept:
                state.not_kept = True
                if row is not None:
                    row.touch()
                    changed = True
        return changed

    def recheck_files(self, text: str) -> None:
        """A segment was delivered (stored): a file it belongs to that has every segment
        but is not checked yet (one was still waiting) is checked again."""
        m = _SEGMENT_TEXT.fullmatch(text)
        for mid, state in self.files.items():
            ours = m is not None and state.file_id[:8] == m.group(2)
            if ours and state.complete and state.intact is None:
                self.files_todo.add(mid)

    def set_file(self, message_id: str, state: FileState) -> None:
        """The app read a file line's manifest (and what the store holds of it)."""
        row = self.by_id.get(message_id)
        sender = row.sender_id if row is not None else None
        if sender is not None:
            seen = self.segments.get((sender, state.file_id[:8]), set())
            state.present |= {i for i in seen if 0 <= i < state.total}
        self.files[message_id] = state
        if row is not None:
            row.file = state
            row.touch()

    def _adopt_file(self, row: Row) -> None:
        if row.kind == "segment":
            self.note_segment(row.sender_id, row.text)
        elif row.kind == "file" and row.message_id is not None:
            state = self.files.get(row.message_id)
            if state is None:
                self.files_todo.add(row.message_id)
            elif row.file is not state:
                row.file = state
                row.touch()

    def _requote(self, target: Row) -> None:
        """Replies quoting ``target`` show its current text (edited, deleted)."""
        text = quote_of(target)
        for reply in self.replies.get(target.message_id or "", ()):
            if reply.quote != text:
                reply.quote = text
                reply.touch()

    def set_topic(self, row: Row) -> None:
        """``row`` (a topic line) is the topic if it is the newest one seen (SDS order)."""
        if self.topic_key is None or row.key > self.topic_key:
            self.topic, self.topic_key = row.original, row.key
            self.topic_by = row.who

    def set_row_content(self, row: Row, name: str | None, kind: str, text: str) -> None:
        """``row`` (shown while it waited) is delivered with this content: what its old
        kind decided is undone (a line first shown as unreadable, ``sealed``, was folded
        into the "messages from before you joined" line and hidden), the new one
        decided (a key share hidden, a join line hidden under F4)."""
        was = row.kind
        row.set_content(name, kind, text)
        if was == "sealed" and kind != "sealed" and row.message_id is not None:
            self.sealed_ids.discard(row.message_id)
            if self.sealed_row is row:
                self.sealed_row = next((r for r in self.rows if r.kind == "sealed"), None)
            first = self.sealed_row
            if first is not None:
                n = len(self.sealed_ids)
                first.hidden = False
                first.text = f"{n} message{'s' if n != 1 else ''} from before you joined"
                first.touch()
        if kind == "keys":
            row.hidden = True
        elif kind == "sealed" and was != "sealed":
            self._adopt(row)
        elif kind in EVENT_KINDS:
            row.hidden = self.hide_events

    def _adopt(self, row: Row) -> None:
        """A row entered the window: fold a typed effect into its target, give a target
        its effects, a reply its quote; hide a join/leave/nick line if they are hidden;
        mark it disputed if a conflict was reported for its id."""
        if row.message_id is not None and row.message_id in self.disputed:
            row.disputed = self.disputed[row.message_id]
        row.colour = self.colours.slot(row.author_id)
        if self.book.note(row.author_id, row.name) and self.book.on_shared is not None:
            self.book.on_shared(row.name or "")  # a second id with this name: retag lines
        row.shared_name = self.book.shared(row.name)
        if row.kind in ("file", "segment"):
            self._adopt_file(row)
        if row.kind == "keys":  # a members channel's key shares and rekeys: not news
            row.hidden = True
        elif row.kind == "sealed":  # unreadable (sent before we joined): one line for all
            if row.message_id is not None:
                self.sealed_ids.add(row.message_id)
            first = self.sealed_row
            if first is None or first not in self.rows:
                first = self.sealed_row = row
            row.hidden = row is not first
            n = len(self.sealed_ids)
            first.text = f"{n} message{'s' if n != 1 else ''} from before you joined"
            first.touch()
        if row.kind in EVENT_KINDS:
            row.hidden = self.hide_events
            if row.kind == "topic":
                self.set_topic(row)
        if row.hidden and row.target is not None:
            ident = row.message_id or f"local:{row.local_id}"
            mine = self.effects.setdefault(row.target, {})
            if row.message_id is not None:
                mine.pop(f"local:{row.local_id}", None)  # the queued copy, now logged
            mine[ident] = row
            target = self.by_id.get(row.target)
            if target is not None:
                apply_effects(target, mine.values())
                self._requote(target)
        if row.message_id is not None and row.message_id in self.effects:
            apply_effects(row, self.effects[row.message_id].values())
        if row.kind == "reply" and row.target is not None:
            replies = self.replies.setdefault(row.target, [])
            if row not in replies:
                replies.append(row)
            quoted = self.by_id.get(row.target)
            if quoted is not None:
                row.quote = quote_of(quoted)
            elif row.quote is None:
                self.unquoted.setdefault(row.target, []).append(row)
        if row.message_id is not None and row.message_id in self.unquoted:
            for reply in self.unquoted.pop(row.message_id):  # shown before their target
                if reply.quote is None:
                    reply.quote = quote_of(row)
                    reply.touch()

    # ------------------------------------------------------------------ lookup

    def index_of(self, key: Key) -> int | None:
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            return i
        return None

    def find_message(self, message_id: str) -> Row | None:
        return self.by_id.get(message_id)

    def set_message_id(self, row: Row, message_id: str) -> None:
        row.message_id = message_id
        self.by_id[message_id] = row

    def _reindex(self) -> None:
        self.by_id = {r.message_id: r for r in self.rows if r.message_id is not None}

    def find_local(self, local_id: int) -> Row | None:
        for row in reversed(self.rows):
            if row.local_id == local_id and row.message_id is None:
                return row
        return None

    @property
    def newest_key(self) -> Key | None:
        for key in reversed(self.keys):
            if key[0] != PENDING_LAMPORT:
                return key
        return None

    @property
    def oldest_cursor(self) -> Cursor | None:
        return self.keys[0] if self.keys and self.keys[0][0] != PENDING_LAMPORT else None

    @property
    def newest_cursor(self) -> Cursor | None:
        return self.newest_key

    def first_new_index(self) -> int | None:
        """Index of the row the "── new ──" line goes above, if it is in the window."""
        if self.new_after is None:
            return None
        i = bisect.bisect_right(self.keys, self.new_after)
        while i < len(self.rows) and (self.rows[i].own or self.rows[i].hidden):
            i += 1
        return i if i < len(self.rows) else None

    def waiting_count(self) -> int:
        return sum(1 for r in self.rows if r.waiting)

    # ------------------------------------------------------------------ edits

    def insert(self, row: Row) -> int:
        i = bisect.bisect_left(self.keys, row.key)
        self.keys.insert(i, row.key)
        self.rows.insert(i, row)
        if row.message_id is not None:
            self.by_id[row.message_id] = row
        self.version += 1
        self._adopt(row)
        return i

    def remove_at(self, i: int) -> Row:
        del self.keys[i]
        row = self.rows.pop(i)
        if row.message_id is not None and self.by_id.get(row.message_id) is row:
            del self.by_id[row.message_id]
        self.version += 1
        return row

    def rekey(self, row: Row, key: Key) -> None:
        i = self.rows.index(row)
        self.remove_at(i)
        row.key = key
        row.touch()
        self.insert(row)

    def set_page(self, rows: Sequence[Row], *, at_tail: bool, more_before: bool) -> None:
        """Replace the window (a jump, or the first load).

        At the tail, rows already shown that the page lacks are kept: own lines
        not logged yet, messages waiting for dependencies, and rows that arrived
        while the page was being read.
        """
        old = self.rows
        self.rows = list(rows)
        # an own row's state read from the store can be behind the one shown ("sent"
        # is written with the next round): keep the furthest (it only moves forward)
        shown = {r.message_id: r.own_state for r in old if r.message_id and r.own_state}
        if shown:
            for r in self.rows:
                was = shown.get(r.message_id) if r.own_state and r.message_id else None
                if was is not None and _STATE_RANK.get(was, -1) > _STATE_RANK.get(
                    r.own_state or "", -1
                ):
                    r.own_state = was
        self.keys = [r.key for r in self.rows]
        self._reindex()
        for r in self.rows:
            self._adopt(r)
        self.at_tail = at_tail
        self.more_before = more_before
        self.loaded = True
        self.version += 1
        if at_tail:
            self.new_below = 0
            last = self.keys[-1] if self.keys else None
            ids = {r.message_id for r in self.rows}
            for r in old:
                pending = r.message_id is None
                live = pending or r.waiting
                newer = last is None or r.key > last
                fresh = pending or r.message_id not in ids
                if (live or newer) and fresh and self.index_of(r.key) is None:
                    self.insert(r)

    def prepend(self, rows: Sequence[Row], *, more_before: bool) -> int:
        """Older rows in front; returns how many were added."""
        first = self.keys[0] if self.keys else None
        fresh = [r for r in rows if first is None or r.key < first]
        self.rows[:0] = fresh
        self.keys[:0] = [r.key for r in fresh]
        for r in fresh:
            if r.message_id is not None:
                self.by_id[r.message_id] = r
        for r in fresh:
            self._adopt(r)
        self.more_before = more_before
        self.version += 1
        return len(fresh)

    def append_page(self, rows: Sequence[Row], *, at_tail: bool) -> int:
        """Newer stored rows after the window; returns how many were added."""
        added = 0
        for r in rows:
            if self.index_of(r.key) is None and self.find_message(r.message_id or "") is None:
                self.insert(r)
                added += 1
        self.at_tail = at_tail
        if at_tail:
            self.new_below = 0
        self.version += 1
        return added

    def trim(self, *, keep_end: bool) -> int:
        """Drop rows beyond :data:`MAX_WINDOW` from the far end; returns how many."""
        excess = len(self.rows) - MAX_WINDOW
        if excess <= 0:
            return 0
        if keep_end:
            for r in self.rows[:excess]:
                if r.message_id is not None:
                    self.by_id.pop(r.message_id, None)
            del self.rows[:excess]
            del self.keys[:excess]
            self.more_before = True
        else:
            # Keep live-only rows (own lines not logged, waiting messages) at the tail.
            cut = [r for r in self.rows[-excess:] if r.key[0] != PENDING_LAMPORT and not r.waiting]
            if cut:
                gone = {id(r) for r in cut}
                self.rows = [r for r in self.rows if id(r) not in gone]
                self.keys = [r.key for r in self.rows]
                self._reindex()
                self.at_tail = False
            excess = len(cut)
        self.version += 1
        return excess


@dataclass
class Changes:
    """What one batch of events changed (the app redraws only that)."""

    channels: set[str] = field(default_factory=set)
    channel_list: bool = False
    peers: bool = False
    status: bool = False
    bell: bool = False
    notices: list[tuple[str, str]] = field(default_factory=list)
    """(severity, text) to show as notifications."""
    alerts: list[tuple[str, str, str]] = field(default_factory=list)
    """(channel, author, text) of mentions and replies to us in channels not in view:
    desktop notifications."""

    def merge(self, other: Changes) -> None:
        self.channels |= other.channels
        self.channel_list |= other.channel_list
        self.peers |= other.peers
        self.status |= other.status
        self.bell |= other.bell
        self.notices.extend(other.notices)
        self.alerts.extend(other.alerts)


class ChatModel:
    """Every channel view plus the connection state, fed by node events.

    Args:
        sender_id: our own sender id (own rows are recognised by it).
        name: our display name (for @mentions).
    """

    def __init__(self, sender_id: str = "", name: str = "") -> None:
        self.sender_id = sender_id
        self.name = name
        self.channels: dict[str, ChannelView] = {}
        self.order: list[str] = []
        self.current: str | None = None
        self.connection = "connecting"
        self.connection_reason: str | None = None
        self.retry_at_ms: int | None = None
        """When the transport tries again (``disconnected``), on the app's clock."""
        self.names: dict[str, str] = {}
        """sender id -> last display name heard."""
        self.levels: dict[str, str] = {}
        """channel -> notification level (:data:`NOTIFY_LEVELS`; absent: ``all``)."""
        self.book = NameBook()
        """Who uses which name, in every channel (:mod:`app.tui.names`): the names
        claimed in public and passphrase channels, the rosters' in members channels."""
        self.book.on_shared = self._retag
        self.book.note(sender_id, name)
        self.roster_of: Callable[[str], Roster | None] = lambda channel: None
        """A members channel's roster (the app asks the node): its names are the
        authors' names there, whatever a line claims (``app/chat/authors.py``)."""
        self.devices: DeviceBook | None = None
        """The node's device logs (``node.devices.book``): a row read back from the
        database of a device its person's log certifies is that person's."""
        self.hide_events = False
        """Join, leave and nick lines are hidden (F4; kept in tui.json)."""
        self.highlights: list[str] = []
        """Words that highlight a line like an @mention (``/highlight``)."""
        self._highlight: re.Pattern[str] | None = None

    def mentions(self, text: str) -> bool:
        """Whether ``text`` is for us: ``@name``, or one of the highlight words (whole
        words, any case; ``/highlight WORD``, kept in tui.json)."""
        if mentions(text, self.name):
            return True
        return self._highlight is not None and self._highlight.search(text) is not None

    def set_highlights(self, words: Iterable[str]) -> None:
        self.highlights = sorted({w for w in words if w.strip()})
        self._highlight = (
            re.compile(
                r"(?<!\w)(" + "|".join(re.escape(w) for w in self.highlights) + r")(?!\w)",
                re.IGNORECASE,
            )
            if self.highlights
            else None
        )

    def set_hide_events(self, hide: bool) -> None:
        """Show or hide the join, leave and nick lines of every channel."""
        self.hide_events = hide
        for view in self.channels.values():
            view.hide_events = hide
            for row in view.rows:
                if row.kind in EVENT_KINDS and row.hidden != hide:
                    row.hidden = hide
                    row.touch()
            view.version += 1

    # ------------------------------------------------------------------ channels

    def _retag(self, name: str) -> None:
        """A second sender id uses ``name`` (or a name that looks like it): every line of
        those names shows its author's fingerprint now."""
        for view in self.channels.values():
            for row in view.rows:
                if row.name and not row.shared_name and self.book.shared(row.name):
                    row.shared_name = True
                    row.touch()
                    if row.message_id is not None:
                        for reply in view.replies.get(row.message_id, ()):
                            reply.quote = quote_of(row)
                            reply.touch()
            view.version += 1

    def label(self, sender_id: str, name: str | None, channel: str | None = None) -> str:
        """How ``sender_id`` is written (``alice``, or ``alice (3f9a2b1c)`` when another
        author's name looks like it); in a members ``channel`` by its roster name."""
        roster = self.roster_of(channel) if channel is not None else None
        if roster is not None:
            name = roster.name_of(sender_id)
            self.book.note(sender_id, name)
        known = name or self.names.get(sender_id) or self.book.name_of(sender_id)
        return self.book.label(known, sender_id)

    def own_name(self, channel: str) -> str:
        """Our name in ``channel``: the roster's in a members channel."""
        roster = self.roster_of(channel)
        return (roster.name_of(self.sender_id) if roster is not None else None) or self.name

    def relabel(self, channel: str) -> bool:
        """A members channel's roster moved (an add, a rename, the chain folded at
        last): every member's name is noted, and each line of the channel shows its
        author's roster name (membership lines described with names). True if a line
        changed."""
        roster = self.roster_of(channel)
        view = self.channels.get(channel)
        if roster is None or view is None:
            return False
        shared = False
        for mid, m in roster.members.items():
            if self.book.note(mid, m.name):
                shared = True
            if mid != self.sender_id:
                self.names[mid] = m.name
        changed = False
        for row in view.rows:
            name = roster.name_of(row.sender_id)
            if name is not None and name != row.name:
                row.name = name
                self.book.note(row.sender_id, name)
                row.shared_name = self.book.shared(name)
                row.touch()
                changed = True
        if shared:
            self._retag("")
        if changed:
            view.version += 1
        return changed or shared

    def add_channel(self, name: str, public: bool = False) -> ChannelView:
        view = self.channels.get(name)
        if view is None:
            view = ChannelView(name, public, hide_events=self.hide_events, book=self.book)
            self.channels[name] = view
            self.order.append(name)
        view.public = public
        if self.current is None:
            self.current = name
        return view

    def remove_channel(self, name: str) -> None:
        self.channels.pop(name, None)
        if name in self.order:
            idx = self.order.index(name)
            self.order.remove(name)
            if self.current == name:
                self.current = self.order[min(idx, len(self.order) - 1)] if self.order else None

    def switch(self, name: str) -> bool:
        """Make ``name`` current: its unread line is where it was left, counts reset."""
        view = self.channels.get(name)
        if view is None:
            return False
        old = self.channels.get(self.current or "")
        if old is not None and old is not view:
            old.new_after = None
        view.new_after = view.last_read if view.unread else None
        view.unread = 0
        view.mentioned = False
        self.current = name
        return True

    def cycle(self, step: int) -> str | None:
        """The channel ``step`` places from the current one (the caller switches: a
        second switch would find nothing unread and drop the "── new ──" line)."""
        if not self.order:
            return None
        i = self.order.index(self.current) if self.current in self.order else 0
        return self.order[(i + step) % len(self.order)]

    def mark_read(self, name: str) -> None:
        view = self.channels.get(name)
        if view is not None and view.at_tail:
            newest = view.newest_key
            if newest is not None and (view.last_read is None or newest > view.last_read):
                view.last_read = newest

    # ------------------------------------------------------------------ rows

    def row_from_entry(self, entry: LogEntry) -> Row:
        content = authored(entry.content, entry.sender_id, self.roster_of(entry.channel))
        own = entry.sender_id == self.sender_id
        time_ms = entry.delivered_at if entry.delivered_at is not None else entry.received_at
        row = Row(
            key=entry.cursor,
            sender_id=entry.sender_id,
            name=content.name,
            kind=content.kind,
            text=content.text,
            time_ms=time_ms,
            message_id=entry.message_id,
            own_state=(entry.state.value if entry.state is not None else "sent") if own else None,
            # stored with it: marked after a restart as it was when it came
            lost=entry.missing_before,
            recovered=entry.recovered or entry.was_lost,
            after_lost=entry.was_lost,
        )
        sp = self.devices.speaker(entry.sender_id) if (
            self.devices is not None and not own and self.roster_of(entry.channel) is None
        ) else None  # fmt: skip
        if sp is not None and self.devices is not None:  # as the node labels it when it comes
            row.person, row.device = ((self.sender_id, sp.device) if sp.own
                                      else (sp.person, ""))  # fmt: skip
            row.name = self.devices.name_of(entry.sender_id, row.name)
        row.mention = not own and not row.hidden and self.mentions(row.text)
        if content.name and not own:  # known before it speaks again (F2, completion)
            self.names.setdefault(entry.sender_id, content.name)
        return row

    def rows_from_entries(self, entries: Iterable[LogEntry]) -> list[Row]:
        return [self.row_from_entry(e) for e in entries]

    # ------------------------------------------------------------------ events

    def apply(self, ev: NodeEvent, now_ms: int) -> Changes:
        """Fold one node event in; returns what changed."""
        ch = Changes()
        if isinstance(ev, Delivered):
            self._delivered(ev, now_ms, ch)
        elif isinstance(ev, OwnMessage):
            self._own(ev, now_ms, ch)
        elif isinstance(ev, Missing):
            self._missing(ev, now_ms, ch)
        elif isinstance(ev, Lost):
            self._lost(ev, ch)
        elif isinstance(ev, Conflict):
            self._conflict(ev, ch)
        elif isinstance(ev, MembersEvent) and ev.what == "refused":
            self._refused(ev, ch)
        elif isinstance(ev, ConnectionChanged):
            self.connection = ev.state
            self.connection_reason = ev.reason
            self.retry_at_ms = (
                now_ms + round(ev.retry_in * 1000) if ev.retry_in is not None else None
            )
            ch.status = True
        elif isinstance(ev, ChannelJoined):
            self.add_channel(ev.channel, ev.public)
            ch.channel_list = True
            ch.channels.add(ev.channel)
        elif isinstance(ev, ChannelLeft):
            self.remove_channel(ev.channel)
            ch.channel_list = True
        elif isinstance(ev, PeerSeen):
            if ev.name:
                self.names[ev.sender_id] = ev.name
            ch.peers = True
        return ch

    def _delivered(self, ev: Delivered, now_ms: int, ch: Changes) -> None:
        view = self.channels.get(ev.channel)
        if view is None:
            return
        if ev.name:
            self.names[ev.sender_id] = ev.name
        view.typing.pop(ev.sender_id, None)
        if ev.kind == "segment":
            if view.note_segment(ev.sender_id, ev.text):
                ch.channels.add(ev.channel)  # a file line's progress moved
            view.recheck_files(ev.text)  # stored now: a complete file can be checked
        key = (ev.lamport, ev.message_id)
        # late or not, the node decided (app/node/late_arrivals.py) and stored it: a row read
        # back after a restart is marked the same
        was_lost = ev.was_lost  # the core reported this very message lost before it came
        recovered = (ev.recovered or was_lost) and ev.sender_id != self.sender_id
        waiters = view.missing.pop(ev.message_id, set())
        for wid in waiters:
            w = view.find_message(wid)
            if w is not None and ev.message_id in w.waiting_for:
                w.waiting_for.discard(ev.message_id)
                w.arrived.discard(ev.message_id)
                w.touch()
        row = view.find_message(ev.message_id)
        own_device = ev.device if ev.own_device else ""
        # another device of ours is us (our colour, our name's key), marked with its name
        person = self.sender_id if own_device else ev.person
        if row is not None:  # it was shown while waiting: now it is delivered
            row.person, row.device = person, own_device
            if row.waiting_for:
                for dep in row.waiting_for:
                    others = view.missing.get(dep)
                    if others is not None:
                        others.discard(ev.message_id)
                        if not others:
                            del view.missing[dep]
                row.waiting_for = set()
                row.arrived = set()
            row.lost = ev.missing_before  # exact now, and as stored
            row.recovered = row.recovered or recovered  # shown while waiting: marked alike
            row.after_lost = row.after_lost or was_lost
            view.set_row_content(row, ev.name, ev.kind, ev.text)
            if row.key != key:
                view.rekey(row, key)
            if row.kind == "file":
                view._adopt_file(row)
            row.touch()
            ch.channels.add(ev.channel)
            return
        effect = ev.kind in TYPED_KINDS and ev.kind != "reply"  # folded into its target
        mention = not effect and self.mentions(ev.text)
        if ev.kind == "reply":  # a reply to one of ours is for us, like an @mention
            target = view.find_message(split_typed(ev.text)[0])
            mention = mention or (target is not None and target.own)
        if ev.channel != self.current and view.last_read is None:
            # first news in a channel never looked at: the "new" line goes above it
            view.last_read = view.newest_key or (0, "")
        if view.at_tail and not view.following and len(view.rows) >= MAX_WINDOW:
            view.at_tail = False  # the reader is scrolled up: do not push their rows out
        if view.at_tail or (view.keys and key < view.keys[-1]):
            if view.at_tail and not view.following and (not view.keys or key > view.keys[-1]):
                view.new_below += 1  # below a reader scrolled up: counted for "↓ N new"
            view.insert(
                Row(
                    key=key,
                    sender_id=ev.sender_id,
                    name=ev.name,
                    kind=ev.kind,
                    text=ev.text,
                    time_ms=now_ms,
                    message_id=ev.message_id,
                    lost=ev.missing_before,
                    recovered=recovered,
                    after_lost=was_lost,
                    mention=mention,
                    person=person,
                    device=own_device,
                )
            )
            if view.at_tail and len(view.rows) > MAX_WINDOW:
                view.trim(keep_end=True)
        else:
            view.new_below += 1
        level = self.levels.get(ev.channel, "all")
        if level == "none" or (level == "mentions" and not mention):
            pass  # /mute: no unread count, no badge, no bell (the line is in the log)
        elif (ev.channel != self.current and ev.kind not in EVENT_KINDS and not effect
              and ev.kind not in ("keys", "sealed")):  # fmt: skip
            view.unread += 1  # a name change, a join, a reaction or an edit is no news
            ch.channel_list = True
            if mention:
                view.mentioned = True
                ch.bell = True
                body = split_typed(ev.text)[1] if ev.kind == "reply" else ev.text
                ch.alerts.append((ev.channel, ev.name or ev.sender_id[:8], body))
        ch.channels.add(ev.channel)

    def _own(self, ev: OwnMessage, now_ms: int, ch: Changes) -> None:
        view = self.channels.get(ev.channel)
        if view is None:
            return
        ch.channels.add(ev.channel)
        if ev.state == "queued":
            if ev.local_id is None or view.find_local(ev.local_id) is not None:
                return
            view.insert(
                Row(
                    key=(PENDING_LAMPORT, f"{ev.local_id:020d}"),
                    sender_id=self.sender_id,
                    name=self.own_name(ev.channel),
                    kind=ev.kind or "msg",
                    text=ev.text or "",
                    time_ms=now_ms,
                    local_id=ev.local_id,
                    own_state="queued",
                )
            )
            view.new_after = None  # we spoke: everything above is read
            return
        if ev.state == "logged":
            assert ev.message_id is not None and ev.lamport is not None
            key = (ev.lamport, ev.message_id)
            row = view.find_local(ev.local_id) if ev.local_id is not None else None
            if row is None:
                if view.find_message(ev.message_id) is not None or not view.at_tail:
                    return
                row = Row(
                    key=key,
                    sender_id=self.sender_id,
                    name=self.own_name(ev.channel),
                    kind=ev.kind or "msg",
                    text=ev.text or "",
                    time_ms=now_ms,
                    own_state="queued",
                )
                row.message_id = ev.message_id
                view.insert(row)
                return
            existing = view.find_message(ev.message_id)
            if existing is not None and existing is not row:
                # a page read from the store already holds it (a /join reads the
                # channel's tail while its joined line is being logged): one row
                view.remove_at(view.rows.index(row))
                return
            row.message_id = ev.message_id
            view.rekey(row, key)
            return
        if ev.message_id is None:
            return
        row = view.find_message(ev.message_id)
        if row is None or row.own_state is None:
            return
        by = ev.detail.get("by")
        if isinstance(by, str) and by:  # /info: who showed they have it, and how
            if ev.state == "acknowledged" and ev.detail.get("causal", True):
                if by not in row.seen_by:
                    row.seen_by.append(by)
            elif ev.state in ("acknowledged", "possibly_acknowledged") and (
                by not in row.filter_hits
            ):
                row.filter_hits.append(by)
        if _STATE_RANK.get(ev.state, -1) <= _STATE_RANK.get(row.own_state, -1):
            return
        row.own_state = ev.state
        row.touch()
        if ev.state == "failed":
            ch.notices.append(
                ("error", f"a message in #{ev.channel} could not be delivered: Ctrl+R retries")
            )

    def _missing(self, ev: Missing, now_ms: int, ch: Changes) -> None:
        view = self.channels.get(ev.channel)
        if view is None:
            return
        ch.status = True
        arrived = ev.kind == "segment" and ev.text is not None
        if arrived and view.note_segment(ev.sender_id, ev.text or ""):  # waits its turn
            ch.channels.add(ev.channel)
        if not ev.waiting or not ev.ids:
            return
        # ev.waiting has arrived (it waits in its turn): the rows that were told it was
        # missing count it as arrived, no longer as missing
        for wid in view.missing.get(ev.waiting, ()):
            w = view.find_message(wid)
            if w is not None and ev.waiting in w.waiting_for and ev.waiting not in w.arrived:
                w.arrived.add(ev.waiting)
                w.touch()
                ch.channels.add(ev.channel)
        row = view.find_message(ev.waiting)
        if row is None and ev.text is not None and ev.lamport is not None:
            if not view.at_tail:
                view.new_below += 1
                return
            if ev.name:
                self.names[ev.sender_id] = ev.name
            row = Row(
                key=(ev.lamport, ev.waiting),
                sender_id=ev.sender_id,
                name=ev.name,
                kind=ev.kind or "msg",
                text=ev.text,
                time_ms=now_ms,
                message_id=ev.waiting,
                mention=self.mentions(ev.text),
                recovered=ev.recovered,  # late as it arrives: the node judged it
            )
            view.insert(row)
            if ev.channel != self.current:
                view.unread += 1
                ch.channel_list = True
        if row is None or row.own:
            return
        for dep in ev.ids:
            view.missing.setdefault(dep, set()).add(ev.waiting)
            row.waiting_for.add(dep)
        row.touch()
        ch.channels.add(ev.channel)

    def _conflict(self, ev: Conflict, ch: Changes) -> None:
        view = self.channels.get(ev.channel)
        if view is None:
            return
        view.disputed[ev.message_id] = ev.reason
        while len(view.disputed) > MAX_REPORTED:
            del view.disputed[next(iter(view.disputed))]
        row = view.find_message(ev.message_id)
        if row is not None:
            row.disputed = ev.reason
            row.touch()
            ch.channels.add(ev.channel)

    def _refused(self, ev: MembersEvent, ch: Changes) -> None:
        view = self.channels.get(ev.channel)
        ids = ev.data.get("ids", [])
        if view is None or not isinstance(ids, list):
            return
        for mid in ids:
            row = view.find_message(str(mid))
            if row is not None:
                row.refused = True
                row.touch()
                ch.channels.add(ev.channel)

    def _lost(self, ev: Lost, ch: Changes) -> None:
        view = self.channels.get(ev.channel)
        if view is None:
            return
        ids = ev.message_ids or (ev.message_id,)
        for mid in ids:
            view.missing.pop(mid, None)
        for wid in ev.waiting:
            row = view.find_message(wid)
            if row is None:
                continue
            named = [m for m in ids if m in row.waiting_for or m in row.arrived]
            row.waiting_for.difference_update(ids)
            row.arrived.difference_update(ids)
            row.lost += len(named) or 1  # exact again at its delivery (missing_before)
            row.touch()
        ch.channels.add(ev.channel)
        ch.status = True

    # ------------------------------------------------------------------ typing

    def typing(self, channel: str, sender_id: str, name: str, until: float) -> bool:
        view = self.channels.get(channel)
        if view is None or sender_id == self.sender_id:
            return False
        view.typing[sender_id] = (name, until)
        return True

    def expire_typing(self, now: float) -> set[str]:
        """Forget typing indicators past their time; the channels that changed."""
        changed = set()
        for view in self.channels.values():
            gone = [s for s, (_, until) in view.typing.items() if until <= now]
            for s in gone:
                del view.typing[s]
            if gone:
                changed.add(view.name)
        return changed
