"""Message formatting as the log draws it: ``**bold**``, ``_italic_`` / ``*italic*``,
``` `code` ``` and fenced code blocks (lines between two ```` ``` ```` lines).

The text stays plain on the wire (what was typed is what is sent and stored), so
other clients read it as it was written; only this screen draws it formatted,
without the markers. A marker that is not closed, or is inside a word
(``snake_case_name``, ``2*3*4``), stays as typed.
"""

from __future__ import annotations

import re

from rich.style import Style
from rich.text import Text

__all__ = ["CODE", "formatted"]

CODE = Style(color="#e5c07b", bgcolor="#2b2b2b")
"""Inline code and code blocks (readable on both themes)."""

_FENCE = re.compile(r"^```[^\n`]*\n(.*?)\n?```[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(
    r"`(?P<code>[^`\n]+)`"
    r"|\*\*(?P<bold>\S(?:[^\n]*?\S)?)\*\*"
    r"|(?<![\w*])\*(?P<star>[^\s*](?:[^\n*]*?[^\s*])?)\*(?![\w*])"
    r"|(?<![\w])_(?P<under>[^\s_](?:[^\n_]*?[^\s_])?)_(?!\w)"
)


def _inline(out: Text, text: str, base: Style) -> None:
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(text[pos : m.start()], base)
        if m.group("code") is not None:
            out.append(m.group("code"), base + CODE)
        elif m.group("bold") is not None:
            out.append(m.group("bold"), base + Style(bold=True))
        else:
            out.append(m.group("star") or m.group("under") or "", base + Style(italic=True))
        pos = m.end()
    out.append(text[pos:], base)


def formatted(text: str, base: Style | None = None) -> Text:
    """``text`` (already made visible: control characters shown) drawn formatted."""
    base = base or Style()
    out = Text()
    pos = 0
    for m in _FENCE.finditer(text):
        _inline(out, text[pos : m.start()], base)
        out.append(m.group(1), base + CODE)
        pos = m.end()
    _inline(out, text[pos:], base)
    return out
