"""What the TUI keeps per data directory between runs (not the chat: that is SQLite):
where you left off in each channel, the theme and display choices in ``tui.json``,
and the lines you typed, per channel, in ``input_history.json`` (mode 0600: it is
what you wrote).

:class:`SavedState` owns both documents: it reads them once at start, hands the
display choices to the :class:`~app.tui.model.ChatModel`, and writes them back
(replaced atomically) when the app saves; the input history a second after the
last line typed. With ``remember`` off (tests, screenshots) nothing is read or
written.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.launch.last_setup import record_open
from app.tui.model import ChatModel

__all__ = ["HISTORY_CHANNELS", "HISTORY_KEPT", "INPUT_HISTORY_FILE", "TUI_STATE_FILE",
           "SavedState"]  # fmt: skip

TUI_STATE_FILE = "tui.json"
"""Where the app keeps, per data directory, where you left off and the theme."""

INPUT_HISTORY_FILE = "input_history.json"
"""Lines typed, per channel (Up/Down), kept between runs (mode 0600: it is what you wrote)."""

HISTORY_KEPT = 200
"""Lines of input history kept on disk per channel (the newest)."""

HISTORY_CHANNELS = 100
"""Channels whose input history is kept on disk (the most recently used)."""

Timer = Callable[[float, Callable[[], None]], Any]
"""``set_timer(delay_s, callback)`` (Textual's ``App.set_timer``)."""


class SavedState:
    """``tui.json`` and ``input_history.json`` of one data directory."""

    def __init__(self, data_dir: Path, *, remember: bool, set_timer: Timer) -> None:
        self.data_dir = data_dir
        self.remember = remember
        self._set_timer = set_timer
        self._doc = self._load_state()
        self.histories: dict[str, list[str]] = self._load_histories()
        """channel -> lines typed there (the input's Up/Down list while it is current)."""
        self._history_timer: Any = None

    # ------------------------------------------------------------------ tui.json

    @property
    def path(self) -> Path:
        return self.data_dir / TUI_STATE_FILE

    def _load_state(self) -> dict[str, Any]:
        if not self.remember:
            return {}
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def restore(self, model: ChatModel) -> None:
        """The display choices kept (join/leave lines hidden, highlight words, each
        channel's notification level) into ``model``."""
        model.hide_events = bool(self._doc.get("hide_events", False))
        words = self._doc.get("highlights", [])
        model.set_highlights(w for w in words if isinstance(w, str))
        levels = self._doc.get("notify_levels", {})
        if isinstance(levels, dict):
            model.levels = {str(c): str(v) for c, v in levels.items() if v in ("mentions", "none")}

    @property
    def theme(self) -> str | None:
        """``dark`` or ``light`` as last used, if kept."""
        theme = self._doc.get("theme")
        return theme if isinstance(theme, str) else None

    def _marks(self) -> dict[str, Any]:
        marks = self._doc.get("last_read", {})
        return marks if isinstance(marks, dict) else {}

    def last_read(self, channel: str) -> tuple[int, str] | None:
        """Where you left off in ``channel`` (the cursor of the last message read)."""
        stored = self._marks().get(channel)
        if isinstance(stored, list) and len(stored) == 2:
            return int(stored[0]), str(stored[1])
        return None

    def channels_read(self) -> set[str]:
        """The channels you left off in, in this run or an earlier one."""
        return set(self._marks())

    @property
    def desktop_notify(self) -> bool:
        """``/notify on|off`` (on by default)."""
        return bool(self._doc.get("desktop_notify", True))

    @desktop_notify.setter
    def desktop_notify(self, on: bool) -> None:
        self._doc["desktop_notify"] = on

    def save(self, model: ChatModel, *, dark: bool) -> None:
        """Write where you left off (``model``'s read marks over those kept), the theme
        and display choices, and the input history."""
        if not self.remember:
            return
        self.save_histories()
        read = dict(self._marks())
        for name, view in model.channels.items():
            if view.last_read is not None:
                read[name] = list(view.last_read)
        self._doc = {
            "last_read": read,
            "theme": "dark" if dark else "light",
            "hide_events": model.hide_events,
            "desktop_notify": self.desktop_notify,
            "highlights": list(model.highlights),
            "notify_levels": dict(model.levels),
        }
        with contextlib.suppress(OSError):
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._doc), "utf-8")
            tmp.replace(self.path)
        record_open(self.data_dir, model.current)  # `sdschat join` alone opens it next time

    def forget(self, channel: str) -> None:
        """``/forget``: nothing kept of ``channel`` (where you left off, what you typed)."""
        self._marks().pop(channel, None)
        if self.histories.pop(channel, None) is not None:
            self.save_histories()

    # ------------------------------------------------------------------ input history

    def _load_histories(self) -> dict[str, list[str]]:
        if not self.remember:
            return {}
        try:
            data = json.loads((self.data_dir / INPUT_HISTORY_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {
            str(ch): [x for x in lines if isinstance(x, str)][-HISTORY_KEPT:]
            for ch, lines in data.items()
            if isinstance(lines, list)
        }

    def history(self, channel: str) -> list[str]:
        """The lines typed in ``channel`` (the input's Up/Down list; it appends to it)."""
        return self.histories.setdefault(channel, [])

    def history_changed(self, channel: str | None) -> None:
        """A line was typed in ``channel``: it is the most recently used, and the
        history is written a second later (once for a burst)."""
        if channel is None:
            return
        lines = self.histories.pop(channel, None)
        if lines is not None:
            self.histories[channel] = lines  # most recently used last
        if self._history_timer is None:
            self._history_timer = self._set_timer(1.0, self.save_histories)

    def save_histories(self) -> None:
        """Write the input history (newest :data:`HISTORY_KEPT` lines of the
        :data:`HISTORY_CHANNELS` channels used last), mode 0600, replaced atomically."""
        self._history_timer = None
        if not self.remember:
            return
        items = [(ch, lines[-HISTORY_KEPT:]) for ch, lines in self.histories.items() if lines]
        doc = dict(items[-HISTORY_CHANNELS:])
        path = self.data_dir / INPUT_HISTORY_FILE
        tmp = path.with_name(f".{INPUT_HISTORY_FILE}.tmp")
        with contextlib.suppress(OSError):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, ensure_ascii=False)
            tmp.replace(path)
