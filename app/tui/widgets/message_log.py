"""The message log: a Line API view over a channel's window of rows (never one widget per message).

:class:`MessageLog` draws the current :class:`~app.tui.model.ChannelView`.
Each row is wrapped once per width and cached as :class:`~textual.strip.Strip`
lines (keyed by the row's ``version``); ``render_line`` finds the row under a
screen line by bisecting the rows' line offsets, so drawing costs the same for
200 rows as for a window paged out of 100,000. When the person scrolls to
the top of the window the widget posts :class:`MessageLog.NeedOlder` (the
app pages older rows in from SQLite and the view stays where it was); at
the bottom of a window that does not reach the newest message it posts
:class:`MessageLog.NeedNewer`. While the view is at the bottom it follows
new messages. A log shorter than the pane is drawn at its bottom, the newest line
just above the input.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Iterable, Sequence
from datetime import tzinfo

from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from app.tui.model import ChannelView, Key, Row
from app.tui.render import Palette, day_key, day_label, palette, row_height, row_lines

SLICE_PAUSE = 0.001
"""Pause between slices of background work (building a page's rows, wrapping
them ahead): not ``sleep(0)``, since a key takes several event-loop turns from
the terminal to the frame, and a pause lets all of them run."""

CACHED_ROWS = 300
"""Beyond this many wrapped rows, the rows far from the viewport are unwrapped (their
heights kept) when the log is drawn."""

PREFETCH_SCREENS = 2
"""Page in older/newer rows once fewer screens than this are left to the window's edge."""

__all__ = ["MessageLog"]


class MessageLog(ScrollView, can_focus=False):
    """The scrollback of the current channel (see the module docstring)."""

    DEFAULT_CSS = """
    MessageLog {
        overflow-x: hidden;
    }
    """

    class NeedOlder(Message):
        """Scrolled to the top of the window: page older rows in."""

        def __init__(self, channel: str) -> None:
            super().__init__()
            self.channel = channel

    class NeedNewer(Message):
        """Scrolled to the bottom of a window that is not at the tail: page newer rows in."""

        def __init__(self, channel: str) -> None:
            super().__init__()
            self.channel = channel

    class Selected(Message):
        """A row was selected (click or Ctrl+Up/Down)."""

        def __init__(self, channel: str, key: Key | None) -> None:
            super().__init__()
            self.channel = channel
            self.key = key

    def __init__(self, *, tz: tzinfo | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view: ChannelView | None = None
        self.tz = tz
        self.dark = True
        self._pal: Palette = palette(True)
        self.selected: Key | None = None
        self._cache: dict[int, tuple[tuple[object, ...], list[Strip]]] = {}
        self._pre: dict[int, tuple[tuple[object, ...], list[Strip]]] = {}
        """Rows of a page being loaded, wrapped ahead (see :meth:`prerender`)."""
        self._lazy: dict[int, tuple[tuple[object, ...], int]] = {}
        """Rows laid out but not wrapped yet (off screen, height known): wrapped when drawn."""
        self._pass: tuple[Style, int] = (Style(), 0)
        """The widget's style and content width, taken once per paint (see render_lines)."""
        self._offsets: list[int] = []
        self._drawn: list[Row] = []
        self._header: list[Strip] = []
        self._total = 0
        self._width = 0
        self._layout_version: tuple[object, ...] | None = None
        self.follow = True
        self._older_requested = False
        self._newer_requested = False
        self._last_direction = 0
        self._days: dict[int, tuple[int, int, int]] = {}
        """minute (ms // 60000) -> calendar day, in ``tz`` (a layout looks every row up)."""
        self.layouts = 0
        """How many times the layout was recomputed (for tests and benchmarks)."""
        self.find: str | None = None
        """The text searched for (Ctrl+F): highlighted wherever it occurs."""

    # ------------------------------------------------------------------ API

    def show(self, view: ChannelView | None) -> None:
        """Show another channel's view (scrolled to its bottom)."""
        self.view = view
        self.selected = None
        self.follow = True
        self._older_requested = self._newer_requested = False
        self._forget(self._cache)
        self._lazy.clear()
        self._layout_version = None
        self.sync(force=True)
        self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.call_after_refresh(self._stick_to_bottom)

    def set_find(self, text: str | None) -> None:
        """Highlight ``text`` (any case) in every row, or nothing (None)."""
        text = text or None
        if text != self.find:
            self.find = text
            self._forget(self._cache)
            self._lazy.clear()
            self._forget(self._pre)
            self.sync(force=True)

    def set_dark(self, dark: bool) -> None:
        if dark != self.dark:
            self.dark = dark
            self._pal = palette(dark)
            self._forget(self._cache)
            self._lazy.clear()
            self.sync(force=True)

    def page_loaded(self) -> None:
        """The app finished a NeedOlder/NeedNewer request (rows may have been added)."""
        self._older_requested = self._newer_requested = False
        self.sync()
        self._forget(self._pre)
        self._check_edges(self._last_direction)

    async def prerender(
        self, rows: Sequence[Row], chunk: int = 8, pause: float = SLICE_PAUSE
    ) -> None:
        """Wrap the rows of a page about to be added, a few at a time between frames.

        Wrapping 200 rows takes ~100-200 ms; done inside one layout it would
        freeze the keys pressed meanwhile. The page is read while the reader
        is still a few screens from the edge (see :meth:`_check_edges`), so
        this runs in the background and the layout that adds the page finds
        its lines ready. Rows that fit on one line are left for the layout, which
        does not wrap them until they are drawn.
        """
        width = self._width
        if width <= 0:
            return
        for i, row in enumerate(rows):
            ident = (row.version, width, row.key == self.selected, False, self.dark, None)
            if id(row) not in self._cache and row_height(row, width, self._pal) is None:
                self._pre[id(row)] = (ident, self._wrap(row, width, ident))
            if i % chunk == chunk - 1:
                await asyncio.sleep(pause)

    def on_mount(self) -> None:
        self.set_dark(self.app.current_theme.dark)

    def sync(self, *, force: bool = False) -> None:
        """Re-layout after the view changed, keeping what the person looks at in place."""
        width = self.scrollable_content_region.width or self.size.width
        if width <= 0:
            return
        dark = self.app.current_theme.dark
        if dark != self.dark:
            self.dark = dark
            self._pal = palette(dark)
            self._forget(self._cache)
            self._lazy.clear()
        view = self.view
        stamp: tuple[object, ...] = (
            id(view),
            view.version if view else 0,
            sum(r.version for r in view.rows) if view else 0,
            width,
            self.selected,
            view.first_new_index() if view else None,
            view.more_before if view else None,
            self.dark,
        )
        if not force and stamp == self._layout_version:
            return
        following = self.follow or self.max_scroll_y == 0
        anchor = None if following else self._anchor()
        self._layout(width)
        self._layout_version = stamp
        if following:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
            self.call_after_refresh(self._stick_to_bottom)
        elif anchor is not None:
            row, delta = anchor
            y = self._offset_of(row.key)
            if y is not None:
                self.scroll_to(y=y + delta, animate=False, immediate=True)
        self.refresh()

    def _stick_to_bottom(self) -> None:
        """After the layout settled (sizes, scrollbars): still at the bottom if following."""
        if self.follow and self.scroll_y < self.max_scroll_y:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)

    def select_step(self, step: int) -> Key | None:
        """Move the selection up (-1) or down (+1); selects the newest row first."""
        view = self.view
        if view is None or not view.rows:
            return None
        if self.selected is None:
            i = len(view.rows) - 1 if step < 0 else 0
        else:
            cur = view.index_of(self.selected)
            i = (len(view.rows) - 1) if cur is None else max(0, min(len(view.rows) - 1, cur + step))
        direction = step if step else -1
        while 0 <= i < len(view.rows) and view.rows[i].hidden:  # reactions, edits: no lines
            i += -1 if direction < 0 else 1
        if not 0 <= i < len(view.rows):
            return self.selected
        self.select(view.rows[i].key)
        return self.selected

    def select(self, key: Key | None) -> None:
        self.selected = key
        self.sync()
        if key is not None:
            self.scroll_to_key(key)
        if self.view is not None:
            self.post_message(self.Selected(self.view.name, key))

    def scroll_to_key(self, key: Key) -> None:
        y = self._offset_of(key)
        if y is None:
            return
        height = self.scrollable_content_region.height
        if y < self.scroll_y or y >= self.scroll_y + height - 1:
            target = max(0, y - height // 3)
            self.follow = target >= self.max_scroll_y
            self.scroll_to(y=target, animate=False, immediate=True)

    def selected_row(self) -> Row | None:
        view = self.view
        if view is None or not view.rows:
            return None
        if self.selected is not None:
            i = view.index_of(self.selected)
            if i is not None:
                return view.rows[i]
        return next((r for r in reversed(view.rows) if not r.hidden), None)

    def page(self, direction: int) -> None:
        """PgUp (-1) / PgDn (+1): scroll by a page; at the edge of the window, page in more."""
        height = max(1, self.scrollable_content_region.height - 1)
        target = self.scroll_y + direction * height
        self.scroll_to(y=max(0, min(target, self.max_scroll_y)), animate=False, immediate=True)
        self.follow = self.scroll_y >= self.max_scroll_y
        self._check_edges(direction)

    def to_top(self) -> None:
        """To the top of the window (older rows page in)."""
        self.follow = False
        self.scroll_to(y=0, animate=False, immediate=True)
        self._check_edges(-1)

    def to_bottom(self) -> None:
        self.follow = True
        self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
        self._check_edges(1)

    # ------------------------------------------------------------------ layout

    @staticmethod
    def _forget(cache: dict[int, tuple[tuple[object, ...], list[Strip]]]) -> None:
        for _ident, strips in cache.values():
            release_strips(strips)
        cache.clear()

    def _wrap(self, row: Row, width: int, ident: tuple[object, ...]) -> list[Strip]:
        _version, _width, selected, is_new, _dark, day = ident
        console = self.app.console
        lines = row_lines(
            row,
            width,
            console,
            self._pal,
            tz=self.tz,
            selected=bool(selected),
            new_line=bool(is_new),
            day=day if isinstance(day, str) else None,
            find=self.find,
        )
        return [_strip(t, console, width) for t in lines]

    def _header_lines(self, width: int) -> list[Strip]:
        view = self.view
        if view is None:
            return []
        console = self.app.console
        if view.more_before:
            return [_strip(Text("  ↑ older messages: scroll up", self._pal.time), console, width)]
        note = f"This is the start of #{view.name}."
        if view.public:
            note += " It is PUBLIC: anyone who knows its name can read it."
        wrapped = Text(note, self._pal.time).wrap(console, max(10, width - 2))
        out = [_strip(Text("  ") + line, console, width) for line in wrapped]
        if not view.rows:
            out.append(_strip(Text("  No messages yet. Say hello!", self._pal.dim), console, width))
        return out

    def _layout(self, width: int) -> None:
        self.layouts += 1
        self._width = width
        view = self.view
        release_strips(self._header)
        self._header = self._header_lines(width)
        offsets: list[int] = []
        y = len(self._header)
        keep: dict[int, tuple[tuple[object, ...], list[Strip]]] = {}
        keep_lazy: dict[int, tuple[tuple[object, ...], int]] = {}
        if view is not None:
            # O(1) per row when its lines are cached (the usual case: a page
            # or an incoming batch only wraps the rows it adds).
            new_index = view.first_new_index()
            cache, pre, lazy = self._cache, self._pre, self._lazy
            selected, dark, pal, tz = self.selected, self.dark, self._pal, self.tz
            clock = getattr(self.app, "clock", None)
            now_ms = int(clock() * 1000) if callable(clock) else None
            append = offsets.append
            last_day: tuple[int, int, int] | None = None
            days = self._days
            if len(days) > 50_000:
                days.clear()
            for i, row in enumerate(view.rows):
                append(y)
                rid = id(row)
                # the first row of each day (and of the window) gets the day's separator
                day = None
                if not row.hidden:  # a reaction or an edit: no lines, no separator
                    minute = row.sent_ms // 60_000
                    this_day = days.get(minute)
                    if this_day is None:
                        this_day = days[minute] = day_key(row.sent_ms, tz)
                    if this_day != last_day:
                        day = day_label(row.sent_ms, tz, now_ms)
                    last_day = this_day
                ident = (row.version, width, row.key == selected, i == new_index, dark, day)
                hit = cache.get(rid) or pre.pop(rid, None)
                if hit is not None and hit[0] == ident:
                    y += len(hit[1])
                    keep[rid] = hit
                    continue
                known = lazy.get(rid)
                if known is not None and known[0] == ident:
                    keep_lazy[rid] = known
                    y += known[1]
                    continue
                # Its height known without wrapping (a one-line message): wrapped
                # when it is drawn, so a batch or a page only wraps what is seen.
                height = row_height(row, width, pal)
                if height is not None:
                    height += (i == new_index) + (day is not None)
                    keep_lazy[rid] = (ident, height)
                    y += height
                    continue
                strips = self._wrap(row, width, ident)
                keep[rid] = (ident, strips)
                y += len(strips)
        for rid, entry in self._cache.items():  # rows gone, or wrapped anew
            if keep.get(rid) is not entry:
                release_strips(entry[1])
        self._cache = keep
        self._lazy = keep_lazy
        self._offsets = offsets
        self._drawn = list(view.rows) if view is not None else []
        self._total = y
        self.virtual_size = Size(width, y)

    def _offset_of(self, key: Key) -> int | None:
        view = self.view
        if view is None:
            return None
        i = view.index_of(key)
        if i is None or i >= len(self._offsets):
            return None
        return self._offsets[i]

    def _anchor(self) -> tuple[Row, int] | None:
        """The row drawn at the top of the viewport (last layout) and how far into it we are."""
        if not self._offsets:
            return None
        y = int(self.scroll_y)
        i = max(0, bisect.bisect_right(self._offsets, y) - 1)  # in the header: the first row
        if i >= len(self._drawn):
            return None
        return self._drawn[i], y - self._offsets[i]

    # ------------------------------------------------------------------ Line API

    def render_lines(self, crop: Region) -> list[Strip]:
        # Once per paint, not once per line: the widget's style is worked out by
        # walking its ancestors' styles (~0.1-0.4 ms a line, a whole log
        # repaint per incoming batch while following).
        base = self.rich_style
        width = self.scrollable_content_region.width
        self._pass = (base, width)
        if len(self._cache) > CACHED_ROWS:
            self._unwrap_far()
        return super().render_lines(crop)

    def _unwrap_far(self) -> None:
        """Keep wrapped lines only for the rows within a few screens of the viewport; the
        others keep their height and are wrapped again if drawn (memory: a full window of
        1,200 wrapped rows was ~10 MB of lines nobody looks at)."""
        height = max(1, self.scrollable_content_region.height)
        top = int(self.scroll_y) - self.bottom_pad
        first = max(0, bisect.bisect_right(self._offsets, top - 3 * height) - 1)
        last = bisect.bisect_right(self._offsets, top + 4 * height)
        near = {id(r) for r in self._drawn[first:last]}
        cache, lazy = self._cache, self._lazy
        for rid in [rid for rid in cache if rid not in near]:
            ident, strips = cache.pop(rid)
            lazy[rid] = (ident, len(strips))
            release_strips(strips)

    @property
    def bottom_pad(self) -> int:
        """Blank rows above the first line when the log is shorter than the pane: the
        newest line sits just above the input (as in WeeChat, irssi, gomuks)."""
        return max(0, self.scrollable_content_region.height - self._total)

    def render_line(self, y: int) -> Strip:
        base, width = self._pass
        line = y + int(self.scroll_y) - self.bottom_pad
        if line < 0:
            return Strip.blank(width, base)
        if line < len(self._header):
            return self._header[line].crop_extend(0, width, base).apply_style(base)
        view = self.view
        if view is None or not self._offsets:
            return Strip.blank(width, base)
        i = bisect.bisect_right(self._offsets, line) - 1
        if i < 0 or i >= len(view.rows):
            return Strip.blank(width, base)
        row = view.rows[i]
        hit = self._cache.get(id(row))
        if hit is None:
            known = self._lazy.pop(id(row), None)
            if known is None:
                return Strip.blank(width, base)
            hit = (known[0], self._wrap(row, self._width, known[0]))
            self._cache[id(row)] = hit
            if len(hit[1]) != known[1]:  # not as estimated: lay out again
                self.call_later(self.sync, force=True)
        strips = hit[1]
        j = line - self._offsets[i]
        if j >= len(strips):
            return Strip.blank(width, base)
        return strips[j].crop_extend(0, width, base).apply_style(base)

    # ------------------------------------------------------------------ events

    def on_resize(self, event: events.Resize) -> None:
        self.sync(force=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            if new_value >= self.max_scroll_y:
                self.follow = True  # back at the bottom: follow new messages again
            self._check_edges(1 if new_value > old_value else -1)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.follow = False  # the reader scrolls back: keep what they look at in place

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.follow = self.scroll_target_y >= self.max_scroll_y

    def _check_edges(self, direction: int) -> None:
        """Moving up (-1) towards the top, or down (+1) towards the bottom, of the window:
        page in, already when fewer than :data:`PREFETCH_SCREENS` screens are left
        (the page is read and wrapped in the background, so no key waits for it)."""
        view = self.view
        if view is None or not view.loaded:
            return
        self._last_direction = direction
        margin = PREFETCH_SCREENS * max(1, self.scrollable_content_region.height)
        if (
            direction < 0
            and self.scroll_y <= margin
            and view.more_before
            and not self._older_requested
        ):
            self._older_requested = True
            self.post_message(self.NeedOlder(view.name))
        if (
            direction > 0
            and self.scroll_y >= self.max_scroll_y - margin
            and not view.at_tail
            and not self._newer_requested
        ):
            self._newer_requested = True
            self.post_message(self.NeedNewer(view.name))

    def on_click(self, event: events.Click) -> None:
        view = self.view
        if view is None or not self._offsets:
            return
        line = event.y + int(self.scroll_y) - self.bottom_pad
        if line < len(self._header):
            return
        i = bisect.bisect_right(self._offsets, line) - 1
        if 0 <= i < len(view.rows):
            self.select(view.rows[i].key)


_STRIP_CACHES = (
    "_divide_cache", "_crop_cache", "_style_cache", "_filter_cache", "_line_length_cache",
    "_crop_extend_cache", "_offsets_cache",
)  # fmt: skip


def release_strips(strips: Iterable[Strip]) -> None:
    """Empty the caches of strips the log no longer uses, and of the strips made from them.

    Textual's :class:`~textual.strip.Strip` caches what it derives from itself, and
    when the result is the strip itself (a crop or a padding to the width it already
    has) it caches itself: a reference cycle. The app keeps the heap frozen between
    full collections (:mod:`app.tui.collector`), so every dropped line of the log was
    garbage that only the next full collection gave back: the TUI grew by ~5 KB per
    message received (164 MB after 20,000). Emptied caches leave no cycle, and the
    lines are freed as soon as they are dropped. (Private attributes of Textual's
    strips: a Textual without them is left alone.)
    """
    stack = list(strips)
    for _ in range(100_000):  # bounded: a strip's caches hold a few strips each
        if not stack:
            return
        strip = stack.pop()
        for name in _STRIP_CACHES:
            inner = getattr(getattr(strip, name, None), "_cache", None)
            if not isinstance(inner, dict) or not inner:
                continue
            for value in inner.values():
                if isinstance(value, Strip):
                    if value is not strip:
                        stack.append(value)
                elif isinstance(value, list):
                    stack.extend(v for v in value if isinstance(v, Strip) and v is not strip)
            inner.clear()


def _strip(text: Text, console: object, width: int) -> Strip:
    segments = [s for s in text.render(console) if s.text != "\n"]  # type: ignore[arg-type]
    return Strip(segments).adjust_cell_length(width, None)
