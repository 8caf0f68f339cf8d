"""Typing indicators as SDS ephemeral messages: the content format, throttling and wording.

A participant who types a line (not a command) sends, at most once every
:data:`SEND_INTERVAL` seconds, an ephemeral message (``Node.send_ephemeral``:
no Lamport timestamp, never logged, acknowledged or resent) whose content is::

    {"v": 1, "kind": "typing", "name": "bob"}

Receivers show "bob is typing…" until :data:`SHOW_FOR` seconds after the last
such message, or until a message from bob is delivered. Nothing is sent when
the line is cleared: the indicator simply expires.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from app.names import clean_name

__all__ = [
    "SEND_INTERVAL",
    "SHOW_FOR",
    "TypingThrottle",
    "decode_typing",
    "encode_typing",
    "typing_text",
]

SEND_INTERVAL = 3.0
"""Least seconds between two typing notices from one participant."""

SHOW_FOR = 6.0
"""Seconds a typing indicator is shown after the last notice."""


def encode_typing(name: str) -> bytes:
    """The ephemeral content announcing that ``name`` is typing."""
    obj = {"v": 1, "kind": "typing", "name": clean_name(name)}
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_typing(content: bytes) -> str | None:
    """The typist's name if ``content`` is a typing notice (``""`` when unnamed), else None."""
    try:
        obj = json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("kind") != "typing":
        return None
    name = obj.get("name")
    return clean_name(name) if isinstance(name, str) else ""


class TypingThrottle:
    """Decides when to send the next typing notice (per channel)."""

    def __init__(self, interval: float = SEND_INTERVAL) -> None:
        self.interval = interval
        self._last: dict[str, float] = {}

    def should_send(self, channel: str, now: float) -> bool:
        last = self._last.get(channel)
        if last is not None and now - last < self.interval:
            return False
        self._last[channel] = now
        return True

    def reset(self, channel: str) -> None:
        """After a line was sent: the next keystroke may announce again."""
        self._last.pop(channel, None)


def typing_text(names: Sequence[str]) -> str:
    """ "bob is typing…", "bob and carol are typing…", "4 people are typing…"."""
    names = sorted(names)
    if not names:
        return ""
    if len(names) == 1:
        return f"{names[0]} is typing…"
    if len(names) == 2:
        return f"{names[0]} and {names[1]} are typing…"
    if len(names) == 3:
        return f"{names[0]}, {names[1]} and {names[2]} are typing…"
    return f"{len(names)} people are typing…"
