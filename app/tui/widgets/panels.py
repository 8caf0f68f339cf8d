"""The small panels around the log: channel list, peer list, channel bar, typing line, status bar.

Each renders one Rich :class:`~rich.text.Text` from plain data the app hands
it (``update_*`` methods), so the app decides when to redraw (once per batch
of node events, not once per event).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from app.tui.config import key_label
from app.tui.render import author_color, palette

__all__ = [
    "ChannelBar",
    "ChannelEntry",
    "ChannelList",
    "PeerEntry",
    "PeerList",
    "StatusBar",
    "StatusInfo",
    "TypingLine",
]


@dataclass(frozen=True)
class ChannelEntry:
    name: str
    unread: int
    mentioned: bool
    current: bool
    public: bool
    level: str = "all"
    """Notification level: ``all``, ``mentions`` (marked ``⊙``), ``none`` (``⊘``)."""
    label: str = ""
    """How the list shows it (a direct conversation: ``@bob``); default ``#name``."""


LEVEL_MARKS = {"mentions": " ⊙", "none": " ⊘"}
"""The channel list's mark of a channel's notification level (/mute, /unmute)."""


class ChannelList(Widget):
    """``1 #general  3 @``: channels with unread counts, a mention badge and the
    notification level's mark (``⊙`` mentions only, ``⊘`` muted)."""

    class Clicked(Message):
        def __init__(self, channel: str) -> None:
            super().__init__()
            self.channel = channel

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: tuple[ChannelEntry, ...] = ()

    def update_entries(self, entries: Sequence[ChannelEntry]) -> None:
        entries = tuple(entries)
        if entries != self.entries:
            self.entries = entries
            self.refresh()

    def render(self) -> Text:
        dark = self.app.current_theme.dark
        pal = palette(dark)
        width = max(8, self.size.width)
        out = Text()
        out.append("Channels\n", Style(bold=True, dim=True))
        for i, e in enumerate(self.entries, 1):
            num = f"{i}" if i <= 9 else " "
            badge = ""
            if e.unread:
                badge = f" {e.unread if e.unread < 1000 else '999+'}"
            if e.mentioned:
                badge += " @"
            mark = LEVEL_MARKS.get(e.level, "")
            badge = mark + badge
            label = e.label or f"#{e.name}"
            room = width - len(num) - 1 - len(badge)
            if len(label) > room:
                label = label[: max(1, room - 1)] + "…"
            line = Text()
            line.append(num + " ", pal.time)
            line.append(label, Style(bold=e.current or bool(e.unread)))
            pad = width - len(num) - 1 - len(label) - len(badge)
            line.append(" " * max(0, pad))
            if mark:
                line.append(mark, pal.dim)
            if e.unread:
                line.append(f" {e.unread if e.unread < 1000 else '999+'}", pal.states["sent"])
            if e.mentioned:
                line.append(" @", pal.mention_word + pal.mention_bg)
            if e.current:
                line.stylize(pal.selected)
            out.append_text(line)
            out.append("\n")
        return out

    def on_click(self, event: events.Click) -> None:
        i = event.y - 1
        if 0 <= i < len(self.entries):
            self.post_message(self.Clicked(self.entries[i].name))


@dataclass(frozen=True)
class PeerEntry:
    sender_id: str
    name: str
    seen: str
    you: bool = False
    typing: bool = False
    online: bool = True
    """Heard from recently enough to be here now (see ``app.tui.app.online``)."""
    role: str = ""
    """In a members channel: ``admin``, ``member``; ``verified`` is added when it is."""


class PeerList(Widget):
    """Who is in the current channel: a coloured dot per author, last seen."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: tuple[PeerEntry, ...] = ()

    def update_entries(self, entries: Sequence[PeerEntry]) -> None:
        entries = tuple(entries)
        if entries != self.entries:
            self.entries = entries
            self.refresh()

    def render(self) -> Text:
        pal = palette(self.app.current_theme.dark)
        out = Text()
        online = sum(1 for e in self.entries if e.online)
        out.append(
            f"Peers ({online} online, {len(self.entries)} heard from)\n"
            if online != len(self.entries)
            else f"Peers ({online} online)\n",
            Style(bold=True, dim=True),
        )
        for e in self.entries:
            # ● online now, ○ heard from earlier (in the author's colour either way)
            out.append("● " if e.online else "○ ", Style(color=author_color(e.sender_id, pal)))
            out.append(e.name, Style(bold=e.you, dim=not e.online))
            if e.you:
                out.append(" (you)", pal.time)
            elif e.typing:
                out.append(" ✎", pal.marker_missing)
            out.append("\n")
            role = f" · {e.role}" if e.role else ""
            out.append(f"  {e.sender_id[:8]}{role} · {e.seen}\n", pal.time)
        return out


class ChannelBar(Widget):
    """The line above the log: channel, its protection, what it is waiting for."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = Text()

    def update_text(self, text: Text) -> None:
        if text.plain != self.text.plain or text.spans != self.text.spans:
            self.text = text
            self.refresh()

    def render(self) -> Text:
        return self.text


class TypingLine(Widget):
    """Under the log: who is typing, or how many new messages wait below."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = ""

    def update_text(self, text: str) -> None:
        if text != self.text:
            self.text = text
            self.refresh()

    def render(self) -> Text:
        pal = palette(self.app.current_theme.dark)
        return Text(self.text, pal.dim)


@dataclass(frozen=True)
class StatusInfo:
    transport: str
    """e.g. ``relay 127.0.0.1:8765``."""
    state: str
    """``connecting``, ``connected``, ``disconnected``, ``closed``, ``offline``."""
    reason: str | None
    retry_in: float | None
    lan: str
    sync: str
    """``synced`` or ``syncing · 3 missing``."""
    store: str
    me: str
    """``alice (1a2b3c4d)``."""
    me_short: str = ""
    """``alice``: what is left of ``me`` in a narrow pane."""


class StatusBar(Widget):
    """The bottom line: transport and its state, LAN, sync state, store peer, who you are."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info: StatusInfo | None = None

    def update_info(self, info: StatusInfo) -> None:
        if info != self.info:
            self.info = info
            self.refresh()

    def render(self) -> Text:
        info = self.info
        pal = palette(self.app.current_theme.dark)
        if info is None:
            return Text(" starting…", pal.time)
        sep = Text(" │ ", pal.separator)
        good = pal.states["acknowledged"]
        warn = pal.marker_missing
        bad = pal.marker_lost
        transport = Text()
        if info.state == "connected":
            transport.append("● ", good)
            transport.append(f"{info.transport} connected")
        elif info.state == "connecting":
            transport.append("◌ ", warn)
            transport.append(f"{info.transport} connecting…")
        else:
            transport.append("✗ ", bad)
            what = "unreachable" if info.state == "disconnected" else info.state
            transport.append(f"{info.transport} {what}", bad)
            if info.retry_in is not None:
                wait = math.ceil(info.retry_in)
                transport.append(f" · retry in {wait}s" if wait else " · retrying…", pal.time)
        sync = Text(info.sync, good if info.sync == "synced" else warn)
        lan = Text(f"LAN {info.lan}")
        store = Text(f"store {info.store}")
        me = Text(info.me, pal.time)
        me_short = Text(info.me_short or info.me, pal.time)
        short = transport.copy()  # "● relay connected": the address goes first
        if info.state == "connected" and " " in info.transport:
            short = Text()
            short.append("● ", good)
            short.append(f"{info.transport.split(' ', 1)[0]} connected")
        config = getattr(self.app, "tui_config", None)
        help_key = config.keys("help").split(",")[0] if config is not None else "f1"
        helps = Text(f"{key_label(help_key)} help", pal.time)
        # the fullest line that fits: in a narrow pane (80 columns, a tmux split) the
        # help hint, the LAN part, the sender id and the relay's address go, in that
        # order, before who you are and the store peer do
        variants = [
            [transport, sync, lan, store, me, helps],
            [transport, sync, lan, store, me],
            [transport, sync, store, me],
            [transport, sync, store, me_short],
            [short, sync, store, me_short],
        ]
        width = max(1, self.size.width)

        def fits(parts: list[Text]) -> bool:
            return 1 + sum(p.cell_len + 3 for p in parts) - 3 <= width

        parts = next((v for v in variants if fits(v)), variants[-1])
        while len(parts) > 2 and not fits(parts):
            parts = parts[:-1]
        out = Text(" ")
        for i, part in enumerate(parts):
            if i:
                out.append_text(sep)
            out.append_text(part)
        return out
