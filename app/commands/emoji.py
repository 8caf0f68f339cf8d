"""Emoji shortcodes: ``:thumbsup:`` -> 👍 in what is sent (messages, actions, replies,
edits, reactions), and Tab completion of ``:thu`` (Rich's table of ~3,600 names).

The text is expanded before it is sent, so other clients (and the history) see the
emoji, not the code. A code Rich does not know stays as typed (``:foo:``).
"""

from __future__ import annotations

from functools import cache

from rich.emoji import Emoji

__all__ = ["complete_shortcode", "expand"]

MAX_LISTED = 12
"""Most shortcodes listed when several match."""


def expand(text: str) -> str:
    """``text`` with every known ``:shortcode:`` replaced by its emoji."""
    return Emoji.replace(text) if ":" in text else text


@cache
def _names() -> tuple[str, ...]:
    try:
        from rich._emoji_codes import EMOJI  # Rich's table (private; no completion without)
    except ImportError:
        return ()
    return tuple(sorted(EMOJI))


def complete_shortcode(word: str) -> list[str]:
    """The ``:name:`` shortcodes that complete ``word`` (``:thu`` -> ``:thumbs_up:`` ...),
    shortest first, at most :data:`MAX_LISTED`; [] unless ``word`` is ``:`` and 2+ letters."""
    if not word.startswith(":") or len(word) < 3 or word.endswith(":") or " " in word:
        return []
    stem = word[1:].lower()
    found = [n for n in _names() if n.startswith(stem)]
    found.sort(key=lambda n: (len(n), n))
    return [f":{n}:" for n in found[:MAX_LISTED]]
