"""How a :class:`~app.tui.model.Row` looks: time, state glyph, author colour, wrapped text, markers.

Pure Rich (no Textual): :func:`row_lines` returns the row's lines already
wrapped to a width, so the message log widget can cache them and draw any
100 of them without touching the rest. A row looks like::

    12:04 ●      alice │ hello @bob, the build is green
                       │ again
            ⋯ 2 earlier messages missing · fetching
    12:05        carol │ and the tests?

(the marker goes *above* the message that waits). Colours come from two
palettes, one for dark and one for light themes; an author's colour is a hash
of their authenticated sender id, so it is the same on every screen and a
display name cannot borrow someone else's colour.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, tzinfo
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.style import Style
from rich.text import Text

from app.chat.lines import EVENT_KINDS, visible
from app.names import fingerprint
from app.tui.formatting import formatted
from app.tui.model import STATE_GLYPHS, Row

__all__ = [
    "NICK_WIDTH",
    "Palette",
    "author_color",
    "day_key",
    "day_label",
    "palette",
    "progress_bar",
    "row_lines",
    "set_colours",
    "state_label",
]

NICK_WIDTH = 10
"""Columns of the (right-aligned) author column."""

WIDE_NICK_WIDTH = 16
"""The author column from :data:`WIDE_AT` columns on (long names need fewer cuts)."""

WIDE_AT = 120


def nick_width(width: int) -> int:
    """The author column's width in a log ``width`` columns wide."""
    if width >= WIDE_AT:
        return WIDE_NICK_WIDTH
    return NICK_WIDTH if width >= 48 else 6

# Ten hues far enough apart to tell authors apart at a glance, per background.
_DARK_AUTHORS = (
    "#e06c75", "#98c379", "#e5c07b", "#61afef", "#c678dd",
    "#56b6c2", "#d19a66", "#ff79c6", "#c3e88d", "#82aaff",
)  # fmt: skip
_LIGHT_AUTHORS = (
    "#b3262e", "#2e7d32", "#8a6d00", "#1f5fbf", "#7b1fa2",
    "#00796b", "#a0522d", "#ad1457", "#5c7f00", "#3949ab",
)  # fmt: skip

_MENTION = re.compile(r"(?<![\w@])@[\w][\w.-]*")

_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]}]", re.IGNORECASE)
"""A URL in a message (closing punctuation after it is not part of it)."""

STATE_LABELS = {
    "queued": "queued (not sent yet)",
    "sent": "sent",
    "possibly_acknowledged": "possibly seen",
    "acknowledged": "acknowledged",
    "failed": "failed",
}


def state_label(state: str | None) -> str:
    """A person's word for an own-message state."""
    return STATE_LABELS.get(state or "", state or "")


@dataclass(frozen=True)
class Palette:
    """The colours rows are drawn with."""

    dark: bool
    authors: tuple[str, ...]
    time: Style
    separator: Style
    marker_missing: Style
    marker_lost: Style
    new_line: Style
    mention_bg: Style
    mention_word: Style
    selected: Style
    dim: Style
    states: dict[str, Style]
    match: Style
    """A search match in the log (Ctrl+F)."""


_COLOURS: dict[str, dict[str, Any]] = {}
"""The config file's ``[colours]`` (see :func:`set_colours`)."""


def set_colours(colours: dict[str, dict[str, Any]] | None) -> None:
    """Use the config file's colours (``app.tui.config.TuiConfig.colours``: ``"dark"`` /
    ``"light"`` -> name -> colour) in every palette from now on; None: the defaults."""
    _COLOURS.clear()
    _COLOURS.update(colours or {})


#: colour name -> (Palette field, paints the background)
_FIELDS = {
    "time": ("time", False),
    "separator": ("separator", False),
    "missing": ("marker_missing", False),
    "lost": ("marker_lost", False),
    "new": ("new_line", False),
    "mention": ("mention_word", False),
    "mention_background": ("mention_bg", True),
    "selected": ("selected", True),
    "dim": ("dim", False),
    "match": ("match", True),
}


def palette(dark: bool) -> Palette:
    """The palette for a dark or a light theme (with the config file's colours)."""
    pal = _base_palette(dark)
    own = _COLOURS.get("dark" if dark else "light")
    if not own:
        return pal
    changes: dict[str, Any] = {}
    states = dict(pal.states)
    for name, value in own.items():
        if name == "authors":
            changes["authors"] = tuple(value)
        elif name in states:
            states[name] = states[name] + Style(color=value)
        elif name in _FIELDS:
            attr, background = _FIELDS[name]
            extra = Style(bgcolor=value) if background else Style(color=value)
            changes[attr] = getattr(pal, attr) + extra
    return replace(pal, states=states, **changes)


def _base_palette(dark: bool) -> Palette:
    """sdschat's own colours for a dark or a light theme."""
    if dark:
        return Palette(
            dark=True,
            authors=_DARK_AUTHORS,
            time=Style(color="#7f848e"),
            separator=Style(color="#4b5263"),
            marker_missing=Style(color="#e5c07b", italic=True),
            marker_lost=Style(color="#e06c75", bold=True),
            new_line=Style(color="#61afef", bold=True),
            mention_bg=Style(bgcolor="#3b3320"),
            mention_word=Style(color="#ffd866", bold=True),
            selected=Style(bgcolor="#2c3a4f"),
            dim=Style(color="#7f848e", italic=True),
            states={
                "queued": Style(color="#7f848e"),
                "sent": Style(color="#abb2bf"),
                "possibly_acknowledged": Style(color="#61afef"),
                "acknowledged": Style(color="#98c379"),
                "failed": Style(color="#e06c75", bold=True),
            },
            match=Style(color="#1e2127", bgcolor="#e5c07b", bold=True),
        )
    return Palette(
        dark=False,
        authors=_LIGHT_AUTHORS,
        time=Style(color="#6a737d"),
        separator=Style(color="#b0b7c0"),
        marker_missing=Style(color="#8a6d00", italic=True),
        marker_lost=Style(color="#b3262e", bold=True),
        new_line=Style(color="#1f5fbf", bold=True),
        mention_bg=Style(bgcolor="#fff3c4"),
        mention_word=Style(color="#8a4b00", bold=True),
        selected=Style(bgcolor="#dbe7f7"),
        dim=Style(color="#6a737d", italic=True),
        states={
            "queued": Style(color="#6a737d"),
            "sent": Style(color="#444d56"),
            "possibly_acknowledged": Style(color="#1f5fbf"),
            "acknowledged": Style(color="#2e7d32"),
            "failed": Style(color="#b3262e", bold=True),
        },
        match=Style(color="#000000", bgcolor="#ffd866", bold=True),
    )


def author_color(sender_id: str, pal: Palette) -> str:
    """A stable colour for an author (a hash of the sender id)."""
    digest = hashlib.sha256(sender_id.encode("utf-8", "replace")).digest()
    return pal.authors[int.from_bytes(digest[:4], "big") % len(pal.authors)]


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _nick(name: str, width: int) -> str:
    """``name`` right-aligned in ``width`` terminal cells (wide characters count two).

    A longer name keeps its start and its end around a ``…`` (``bartho…reat``):
    names that differ only at the end (``alice-laptop``, ``alice-phone``) stay
    apart. ``/who``, F2 and ``/info`` show it whole."""
    if cell_len(name) > width:
        if width < 8:
            return set_cell_size(name, width - 1) + "…"
        tail = 3
        end = name[-tail:]
        while cell_len(end) > tail:
            end = end[1:]
        return set_cell_size(name, width - 1 - cell_len(end)) + "…" + end
    return " " * (width - cell_len(name)) + name


def _fp_tag(row: Row, nick_w: int) -> str:
    """The fingerprint of an author whose name looks like another's, when its label
    (``alice (3f9a2b1c)``) does not fit the author column: shown whole at the start of
    the text column instead (a cut label would hide what tells the two apart)."""
    if not row.shared_name or row.kind == "me" or row.kind in EVENT_KINDS:
        return ""
    if cell_len(row.who) <= nick_w:
        return ""
    return f"({fingerprint(row.author_id)}) "


def _body(row: Row, pal: Palette, color: str, *, marks: bool = True) -> Text:
    """The message's text, then (``marks``) what :func:`_marks` adds after it."""
    text = Text(no_wrap=False, overflow="fold")
    style = pal.dim if row.waiting else Style()
    if row.deleted:
        text.append("message deleted", pal.dim)
    elif row.kind == "me":
        text.append(row.who, Style(color=color, bold=True, italic=True))
        text.append(" ")
        text.append(visible(row.text, newlines=True), style + Style(italic=True))
    elif row.kind == "topic":
        text.append(row.who, Style(color=color) + pal.dim)  # the sender, always
        text.append(" set the topic: ", pal.dim)
        text.append(visible(row.text), style)
    elif row.kind == "file":  # its segments are hidden lines: /save keeps it
        _file(text, row, pal, style)
    elif row.kind in EVENT_KINDS:  # the sender, always: not only the name it claims
        claimed = visible(row.text)
        text.append(row.who, Style(color=color) + pal.dim)
        if row.name and claimed.startswith(f"{row.name} "):
            text.append(claimed[len(row.name) :], pal.dim)  # "alice joined #x"
        else:
            text.append(f": {claimed}", pal.dim)  # a line about someone else
    else:
        text.append_text(formatted(visible(row.text, newlines=True), style))  # **bold** ...
    for m in _MENTION.finditer(text.plain):
        text.stylize(pal.mention_word, m.start(), m.end())
    for m in _URL.finditer(text.plain):  # an OSC 8 hyperlink; word wrap keeps it whole
        text.stylize(Style(link=m.group(0), underline=True), m.start(), m.end())
    for mark in _marks(row, pal) if marks else ():
        text.append(f"  {mark.plain}", mark.style)
    return text


def progress_bar(done: int, total: int, width: int = 10) -> str:
    """``▰▰▰▱▱▱▱▱▱▱``: ``done`` of ``total`` in ``width`` cells."""
    filled = 0 if total <= 0 else min(width, done * width // total)
    return "▰" * filled + "▱" * (width - filled)


def _file(text: Text, row: Row, pal: Palette, style: Style) -> None:
    """A file's line: a progress bar while segments are missing (or its bytes are being
    checked), the saveable line once they are all here and match the sha256."""
    state = row.file
    name = row.text[5:] if row.text.startswith("file ") else row.text
    text.append("📎 ", style)
    if state is None or state.intact is True:  # the manifest not read yet: a moment
        text.append(visible(name), style + Style(bold=True))
        text.append("  · /save keeps it" if state is not None else "  · …", pal.dim)
        return
    text.append(visible(state.name), style + Style(bold=True))
    if state.intact is False:
        text.append(
            "  ✗ damaged: its bytes do not match the sha256 sent; it cannot be saved",
            pal.states["failed"],
        )
        return
    have = len(state.present)
    if state.not_kept and not state.complete:
        text.append(
            f"  ✗ not kept here: {have}/{state.total} segments; over the sender's file quota"
            " or the channel's file cap, it cannot be saved",
            pal.states["failed"],
        )
        return
    text.append(f"  {progress_bar(have, state.total)} ", pal.states["possibly_acknowledged"])
    done, size = state.received_bytes, state.size
    amount = (
        f"{done / 1024:,.0f}/{size / 1024:,.0f} KiB" if size >= 10_240 else f"{done}/{size} bytes"
    )
    text.append(f"{have}/{state.total} segments · {amount}", pal.dim)
    text.append(
        " · checking" if state.complete
        else " · sending" if row.own
        else f" · incomplete · waiting for {visible(row.who)}",
        pal.dim,
    )


def _marks(row: Row, pal: Palette) -> list[Text]:
    """What follows the text: ``(edited)``, ``⚠ disputed``, ``↺ recovered``, ``not
    delivered`` (each one style); :func:`row_lines` keeps each whole when the message
    wraps."""
    marks = []
    if row.edited and not row.deleted:
        marks.append(Text("(edited)", pal.dim))
    if row.disputed is not None:
        marks.append(Text(f"⚠ disputed: {_DISPUTE[row.disputed]}", pal.states["failed"]))
    if row.refused:
        marks.append(Text("✗ refused: its sender was removed", pal.states["failed"]))
    if row.after_lost:
        marks.append(Text("↺ recovered after it was reported lost", pal.dim))
    elif row.recovered:
        marks.append(Text("↺ recovered", pal.dim))
    if row.own_state == "failed":
        marks.append(
            Text("not delivered · Ctrl+R retries", pal.states["failed"])
            if not row.retried
            else Text("retried", pal.dim)
        )
    return marks


def _wrap(
    row: Row, pal: Palette, color: str, console: Console, width: int, find: str = ""
) -> list[Text]:
    """The message's lines ``width`` wide: its text wrapped (every match of ``find``
    highlighted, any case: Ctrl+F), then each mark on the last line when it fits
    there, else on the next (folded only when wider than a line), never split between
    two lines ("↺" here, "recovered" below)."""
    body = _body(row, pal, color, marks=False)
    if find:
        body.highlight_words([find], pal.match, case_sensitive=False)
    wrapped = body.wrap(console, width, overflow="fold") if body.plain else [Text("")]
    for mark in _marks(row, pal):
        last = wrapped[-1]
        last.rstrip()
        if not last.plain:
            last.append_text(mark)
        elif last.cell_len + 2 + mark.cell_len <= width:
            last.append(f"  {mark.plain}", mark.style)
        else:
            wrapped.extend(mark.wrap(console, width, overflow="fold"))
    return list(wrapped)


#: What a conflict's reason means, for the mark after a disputed message.
_DISPUTE = defaultdict(
    lambda: "another member sent a different message under this id",
    {
        "author": "another member sent a message under this id",
        "content": "another member sent a different text under this id",
        "timestamp": "its author sent it again at another time",
    },
)


def day_label(ms: int, tz: tzinfo | None, now_ms: int | None = None) -> str:
    """``Tuesday 24 November`` for the day of ``ms`` (the year too when it is not the
    year of ``now_ms``): the day separator's words."""
    day = datetime.fromtimestamp(ms / 1000.0, tz)
    label = f"{day:%A} {day.day} {day:%B}"
    if now_ms is not None and datetime.fromtimestamp(now_ms / 1000.0, tz).year != day.year:
        label += f" {day.year}"
    return label


def day_key(ms: int, tz: tzinfo | None) -> tuple[int, int, int]:
    """The calendar day of ``ms`` in ``tz`` (rows of another day get a separator)."""
    day = datetime.fromtimestamp(ms / 1000.0, tz)
    return day.year, day.month, day.day


def _rule(label: str, width: int, style: Style) -> Text:
    label = f" {label} "
    side = max(2, (width - len(label)) // 2)
    return Text("─" * side + label + "─" * max(2, width - side - len(label)), style)


def row_height(row: Row, width: int, pal: Palette) -> int | None:
    """How many lines :func:`row_lines` gives for ``row`` (without the new line),
    when that is known without wrapping: the body fits on one line. None otherwise.

    Lets the log lay out rows that are off screen without wrapping them."""
    if row.hidden:
        return 0
    if row.quote is not None or row.kind == "reply" or row.reactions:
        return None
    width = max(width, 20)
    nick_w = nick_width(width)
    body_w = max(8, width - (5 + 1 + 1 + 1 + nick_w + 3) - len(_fp_tag(row, nick_w)))
    plain = _body(row, pal, "default").plain
    if "\n" in plain or cell_len(plain) > body_w:
        return None
    return 1 + bool(row.waiting) + bool(row.lost)


def row_lines(
    row: Row,
    width: int,
    console: Console,
    pal: Palette,
    *,
    tz: tzinfo | None = None,
    selected: bool = False,
    new_line: bool = False,
    day: str | None = None,
    find: str | None = None,
) -> list[Text]:
    """The row's lines (a day separator and markers above it, then the wrapped message),
    each ``width`` wide. ``day``: the first row of a day gets ``── Tuesday 24 November ──``;
    ``find``: the text searched for (Ctrl+F), highlighted wherever it occurs.

    A reply has its target quoted on a line above it (``┌ bob: the build is green``),
    reactions go on a line under the message (``👍 2  🎉 1``); a reaction, an edit or a
    deletion (``hidden``) has no lines: it shows on its target."""
    if row.hidden:
        return []
    width = max(width, 20)
    nick_w = nick_width(width)
    prefix_w = 5 + 1 + 1 + 1 + nick_w + 3
    tag = _fp_tag(row, nick_w)
    body_w = max(8, width - prefix_w - len(tag))
    color = (
        pal.authors[row.colour % len(pal.authors)]
        if row.colour is not None
        else author_color(row.author_id, pal)
    )
    lines: list[Text] = []
    if day is not None:
        lines.append(_rule(day, width, pal.time))
    if new_line:
        lines.append(_rule("new", width, pal.new_line))
    indent = " " * (prefix_w - 2)
    if row.waiting:
        n = len(row.waiting_for - row.arrived)
        marker = (
            f"⋯ {_plural(n, 'earlier message', 'earlier messages')} missing · fetching" if n
            else "⋯ waiting for "
            f"{_plural(len(row.waiting_for), 'earlier message', 'earlier messages')} above"
        )
        lines.append(Text(f"{indent}{marker}", pal.marker_missing))
    if row.lost:
        lines.append(
            Text(f"{indent}✗ {_plural(row.lost, 'message', 'messages')} lost", pal.marker_lost)
        )
    if row.kind == "reply":
        quote = visible(row.quote) if row.quote is not None else "a message not loaded here"
        room = max(4, width - prefix_w)
        if cell_len(quote) > room:
            quote = set_cell_size(quote, room - 1) + "…"
        lines.append(Text(f"{indent}┌ {quote}", pal.dim))
    when = datetime.fromtimestamp(row.sent_ms / 1000.0, tz)  # tz None: local time
    prefix = Text()
    prefix.append(when.strftime("%H:%M"), pal.time)
    prefix.append(" ")
    if row.own_state is not None:
        prefix.append(STATE_GLYPHS.get(row.own_state, "?"), pal.states.get(row.own_state, Style()))
    elif row.waiting:
        prefix.append("⋯", pal.marker_missing)
    else:
        prefix.append(" ")
    prefix.append(" ")
    if row.kind == "me":
        prefix.append(" " * (nick_w - 1) + "*", Style(color=color, bold=True))
    elif row.kind in EVENT_KINDS:
        arrow = {"join": "-->", "leave": "<--"}.get(row.kind, "--")
        prefix.append(" " * (nick_w - len(arrow)) + arrow, pal.dim)
    else:  # a look-alike's fingerprint goes whole into the text column if need be
        author = (row.name or row.who) if tag else row.who
        prefix.append(_nick(author, nick_w), Style(color=color, bold=True))
    prefix.append(" │ ", pal.separator)
    if tag:
        prefix.append(tag, Style(color=color, bold=True))
    cont = Text(" " * (prefix_w - 3))
    cont.append(" │ ", pal.separator)
    wrapped = _wrap(row, pal, color, console, body_w, find or "")
    for i, part in enumerate(wrapped):
        part.rstrip()
        line = (prefix if i == 0 else cont).copy()
        line.append_text(part)
        lines.append(line)
    body_lines = len(wrapped)
    if row.reactions and not row.deleted:
        under = cont.copy()
        for i, (emoji, who) in enumerate(row.reactions.items()):
            if i:
                under.append("  ")
            under.append(f"{visible(emoji)} {len(who)}", pal.time)
        lines.append(under)
        body_lines += 1
    if row.mention or selected:
        bg = pal.selected if selected else pal.mention_bg
        for line in lines[-body_lines:]:
            pad = width - line.cell_len
            if pad > 0:
                line.append(" " * pad)
            line.stylize(bg)
    return lines
