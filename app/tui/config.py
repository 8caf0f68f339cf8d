"""The TUI's keymap and colours, from the ``[keys]`` and ``[colours]`` tables of the
config file (``sdschat join --config FILE``), checked before the screen opens.

Keys (every action and its default in :data:`ACTIONS`)::

    [keys]
    search = "ctrl+f"            # one key
    next_channel = ["ctrl+n", "alt+right"]   # or several (a list, or "a,b")
    toggle_theme = "f6"

A key is a Textual key name: modifiers ``ctrl+``, ``alt+``, ``shift+`` and a key
(a letter, a digit, a punctuation character, or a name: ``f1`` … ``f24``,
``pageup``, ``pagedown``, ``home``, ``end``, ``insert``, ``delete``, ``escape``,
``up``, ``down``, ``left``, ``right``, ``space``, ``backspace``, ``tab``,
``enter``). Refused, saying why: an unknown action, a key that is not a key name,
a key that would be typed into the input line instead (a character without
``ctrl+``/``alt+``), a key the input line needs (Enter, Tab, the arrows,
Backspace, Ctrl+C, Ctrl+Q), and one key given to two actions (an action not named
keeps its default key, which counts). Quitting (Ctrl+Q, Ctrl+C) and the find bar's
Up/Down/Enter/Esc/Tab are not configurable.

Colours (of the message log, both themes, or one under ``[colours.dark]`` /
``[colours.light]``; ``[colors]`` is the same table)::

    [colours]
    mention = "#ffd866"
    [colours.light]
    selected = "#dbe7f7"
    authors = ["#b3262e", "#2e7d32", "#1f5fbf"]

A colour is ``#rrggbb``, ``rgb(r,g,b)``, ``color(N)`` or a name (``red``,
``bright_blue``…: Rich's colour names). The names are :data:`COLOUR_NAMES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.color import Color, ColorParseError

from app.tui.chatlog import LogSettings, log_settings

__all__ = [
    "ACTIONS",
    "COLOUR_NAMES",
    "TuiConfig",
    "key_label",
    "tui_config",
]

ACTIONS: dict[str, tuple[str, str, str]] = {
    "next_channel": ("ctrl+n", "app.cycle(1)", "next channel"),
    "previous_channel": ("ctrl+p", "app.cycle(-1)", "previous channel"),
    **{
        f"channel_{i}": (f"alt+{i}", f"app.goto({i})", f"channel {i} of the list")
        for i in range(1, 10)
    },
    "scroll_up": ("pageup", "app.page(-1)", "scroll back a page (older history loads)"),
    "scroll_down": ("pagedown", "app.page(1)", "scroll forward a page"),
    "oldest": ("ctrl+home", "app.log_end(-1)", "top of the loaded history (loads more)"),
    "newest": ("ctrl+end", "app.log_end(1)", "the newest messages"),
    "select_previous": ("ctrl+up", "app.select(-1)", "select the message above"),
    "select_next": ("ctrl+down", "app.select(1)", "select the message below"),
    "unselect": ("escape", "app.unselect", "clear the selection, back to the newest"),
    "search": ("ctrl+f", "app.search", "find in this channel as you type"),
    "search_all": ("alt+f", "app.search_all", "search every joined channel"),
    "retry": ("ctrl+r", "app.retry", "send again the messages that failed"),
    "help": ("f1", "app.help", "help"),
    "peers": ("f2", "app.toggle_peers", "show / hide the peer list"),
    "theme": ("f3", "app.toggle_theme", "dark / light theme"),
    "events": ("f4", "app.toggle_events", "hide / show join, leave and nick lines"),
    "hotlist": ("alt+a", "app.hotlist", "next channel with news (mentions first)"),
}
"""action id -> (default key, Textual action, what it does): the chat screen's keys."""

BINDING_PREFIX = "sdschat."
"""Textual binding ids are this and the action's name (never one of Textual's own ids)."""

NOT_PRIORITY = ("unselect",)
"""Actions whose key goes to the focused widget first (Esc closes a dialog, the find bar)."""

RESERVED = {
    "enter": "sends the line",
    "tab": "completes in the input line",
    "up": "is the input's history",
    "down": "is the input's history",
    "left": "moves the cursor",
    "right": "moves the cursor",
    "backspace": "deletes in the input line",
    "ctrl+c": "quits",
    "ctrl+q": "quits",
}
"""Keys no action may take, and why."""

_NAMED = {
    "backspace", "delete", "down", "end", "enter", "escape", "home", "insert", "left",
    "pagedown", "pageup", "right", "space", "tab", "up", *(f"f{i}" for i in range(1, 25)),
}  # fmt: skip
_TYPING_NAMED = {"space", "backspace", "delete", "home", "end", "left", "right", "up", "down",
                 "enter", "tab", "insert"}  # fmt: skip
"""Named keys that edit or move in the input line without a modifier."""

_MODIFIERS = ("ctrl", "alt", "shift")

COLOUR_NAMES: dict[str, str] = {
    "time": "the time column and notes",
    "separator": "the │ between the name and the text",
    "missing": "⋯ N earlier messages missing",
    "lost": "✗ N messages lost",
    "new": "── new ── (where you left off)",
    "mention": "@name and highlight words",
    "mention_background": "the background of a line for you",
    "selected": "the background of the selected message",
    "dim": "join, leave and nick lines, ↺ recovered, (edited)",
    "match": "the background of a search match (Ctrl+F)",
    "queued": "◌ queued",
    "sent": "○ sent",
    "possibly_acknowledged": "◐ possibly seen, file progress bars",
    "acknowledged": "● acknowledged",
    "failed": "✗ failed",
    "authors": "a list of colours the authors' names take (by sender id)",
}
"""Colour names of ``[colours]`` and what they paint."""


@dataclass(frozen=True)
class TuiConfig:
    """The checked ``[keys]`` and ``[colours]`` of a config file."""

    keymap: dict[str, str] = field(default_factory=dict)
    """action id -> keys (comma-separated, Textual's keymap form), only those set."""
    colours: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``"dark"`` / ``"light"`` -> colour name -> a colour (``authors``: a list)."""
    log: LogSettings = field(default_factory=LogSettings)
    """``[log]``: continuous logging to files (app/tui/chatlog.py), off by default."""

    def textual_keymap(self) -> dict[str, str]:
        """The keymap for :meth:`textual.app.App.set_keymap` (binding id -> keys)."""
        return {f"{BINDING_PREFIX}{k}": v for k, v in self.keymap.items()}

    def keys(self, action: str) -> str:
        """The keys of ``action`` in effect (comma-separated)."""
        return self.keymap.get(action, ACTIONS[action][0])


def _key_error(key: str) -> str | None:
    """Why ``key`` is not usable for an action, or None."""
    if not key or key != key.strip() or " " in key:
        return "is not a key name (no spaces: e.g. ctrl+f)"
    parts = key.split("+")
    mods, base = parts[:-1], parts[-1]
    if not base:
        return "ends with '+': the key is missing (e.g. ctrl+f)"
    bad = [m for m in mods if m not in _MODIFIERS]
    if bad or len(set(mods)) != len(mods):
        return f"has an unknown modifier {bad[0] if bad else mods[0]!r} (ctrl, alt, shift)"
    if len(base) != 1 and base not in _NAMED:
        return (
            f"has an unknown key {base!r} (a letter, digit or punctuation character, or "
            "f1..f24, pageup, pagedown, home, end, insert, delete, escape, up, down, left, "
            "right, space, backspace, tab, enter)"
        )
    if len(base) == 1 and not base.isprintable():
        return "is not a key name"
    if len(base) == 1 and base.isupper():
        return f"uses an upper-case letter: write shift+{base.lower()}"
    reason = RESERVED.get(key)
    if reason is not None:
        return f"{reason}: it cannot be given to an action"
    typing = (len(base) == 1 or base in _TYPING_NAMED) and not ({"ctrl", "alt"} & set(mods))
    if typing:
        return "would be typed into the input line: use it with ctrl+ or alt+"
    return None


def _keys_of(value: object) -> list[str] | None:
    if isinstance(value, str):
        return [k.strip() for k in value.split(",")] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value]
    return None


def _check_keys(table: object, where: str) -> dict[str, str]:
    if not isinstance(table, dict):
        raise ValueError(f"{where}: [keys] must be a table of action = \"key\"")
    keymap: dict[str, str] = {}
    for action, value in table.items():
        if action not in ACTIONS:
            raise ValueError(
                f"{where}: [keys] {action}: unknown action; the actions are "
                + ", ".join(ACTIONS)
            )
        keys = _keys_of(value)
        if not keys:
            raise ValueError(
                f"{where}: [keys] {action} must be a key (\"ctrl+f\") or a list of keys, "
                f"got {value!r}"
            )
        for key in keys:
            why = _key_error(key)
            if why is not None:
                raise ValueError(f"{where}: [keys] {action} = {key!r} {why}")
        keymap[action] = ",".join(keys)
    taken: dict[str, str] = {}
    for action, (default, _a, _h) in ACTIONS.items():
        for key in keymap.get(action, default).split(","):
            other = taken.get(key)
            if other is not None:
                moved = [a for a in (other, action) if a not in keymap]
                hint = (
                    f" ({moved[0]} has it by default: give {moved[0]} another key)"
                    if moved
                    else ""
                )
                raise ValueError(
                    f"{where}: [keys] {other} and {action} both use {key!r}{hint}"
                )
            taken[key] = action
    return keymap


def _colour(value: object, where: str, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: {name} must be a colour string (\"#ffd866\"), got {value!r}")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ValueError(
            f"{where}: {name} = {value!r} is not a colour (use #rrggbb, rgb(r,g,b), "
            "color(N) or a name such as red or bright_blue)"
        ) from None
    return value


def _check_colours(table: object, where: str, section: str) -> dict[str, dict[str, Any]]:
    if not isinstance(table, dict):
        raise ValueError(f"{where}: [{section}] must be a table of name = \"#rrggbb\"")
    out: dict[str, dict[str, Any]] = {"dark": {}, "light": {}}
    for name, value in table.items():
        if name in ("dark", "light"):
            if not isinstance(value, dict):
                raise ValueError(f"{where}: [{section}.{name}] must be a table")
            for sub, colour in value.items():
                out[name][sub] = _one_colour(sub, colour, where, f"[{section}.{name}]")
            continue
        checked = _one_colour(name, value, where, f"[{section}]")
        for theme in ("dark", "light"):
            out[theme].setdefault(name, checked)  # a [colours.dark] entry wins
    return {k: v for k, v in out.items() if v}


def _one_colour(name: str, value: object, where: str, section: str) -> Any:
    if name not in COLOUR_NAMES:
        raise ValueError(
            f"{where}: {section} {name}: unknown colour name; the names are "
            + ", ".join(COLOUR_NAMES)
            + " (and the tables dark and light)"
        )
    if name == "authors":
        if not isinstance(value, list) or not value:
            raise ValueError(f"{where}: {section} authors must be a list of colours")
        return [_colour(v, where, f"{section} authors") for v in value]
    return _colour(value, where, f"{section} {name}")


def tui_config(data: dict[str, Any], path: object = "") -> TuiConfig:
    """The checked ``[keys]`` and ``[colours]`` (or ``[colors]``) of a parsed config
    file (:func:`app.launch.settings.load_config_file`).

    Raises:
        ValueError: a bad entry; the message names the table, the entry, and what is
        allowed.
    """
    where = f"config file {path}" if path else "config file"
    keymap = _check_keys(data["keys"], where) if "keys" in data else {}
    colours: dict[str, dict[str, Any]] = {}
    for section in ("colours", "colors"):
        if section in data:
            if colours:
                raise ValueError(f"{where}: give [colours] or [colors], not both")
            colours = _check_colours(data[section], where, section)
    log = log_settings(data["log"], where) if "log" in data else LogSettings()
    return TuiConfig(keymap=keymap, colours=colours, log=log)


_LABELS = {
    "pageup": "PgUp", "pagedown": "PgDn", "escape": "Esc", "ctrl": "Ctrl", "alt": "Alt",
    "shift": "Shift", "home": "Home", "end": "End", "insert": "Ins", "delete": "Del",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right", "space": "Space",
    "backspace": "Backspace", "tab": "Tab", "enter": "Enter",
}  # fmt: skip


def key_label(keys: str) -> str:
    """``ctrl+n,alt+right`` -> ``Ctrl+N, Alt+Right`` (the help screen's way)."""
    out = []
    for key in keys.split(","):
        parts = key.split("+")
        words = [_LABELS.get(p, p.upper() if len(p) <= 3 else p.capitalize()) for p in parts]
        out.append("+".join(words))
    return ", ".join(out)
