"""Alt+digit and Alt+letter as the terminals sdschat runs in send them.

xterm, tmux, GNOME Terminal, Konsole and others send Alt+1 as ESC then ``1``
and Alt+F as ESC then ``f``. Textual maps some of those pairs to other keys:

* ESC+digit to the characters macOS types with Option+digit (``"\\x1b1"`` ->
  ``¡``, for WezTerm on macOS), so on those terminals Alt+1...9 typed
  ``¡™£¢∞§¶•ª`` into the input line instead of switching channels;
* ESC+f and ESC+b to Ctrl+Right and Ctrl+Left (iTerm's "natural editing"), so
  Alt+F (search every channel) moved the cursor a word instead.

:func:`use_alt_digits` removes the ESC+digit mappings and :func:`use_alt_letters`
the ESC+letter ones of the Alt+letter keys the keymap uses, so Textual's parser
reports them as ``alt+1`` ... ``alt+9``, ``alt+f`` (the ESC-prefix rule it
applies to every other key). On macOS the digits are left alone: there
Option+digit is how people type those characters.

The table is a private part of Textual (``textual._ansi_sequences``): if it is
not there, nothing changes and Ctrl+N/P, ``/switch`` and ``/search -a`` still work.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import cast

__all__ = ["use_alt_digits", "use_alt_enter", "use_alt_letters"]

_ESC_DIGITS = tuple(f"\x1b{d}" for d in "0123456789")


def _table() -> dict[str, object] | None:
    try:
        from textual._ansi_sequences import ANSI_SEQUENCES_KEYS as table
    except ImportError:  # a Textual without that private table: keep its behaviour
        return None
    return cast("dict[str, object]", table)  # typed as a Mapping; it is a dict


def use_alt_digits(platform: str = sys.platform) -> bool:
    """Make ESC+digit read as Alt+digit (not on macOS); whether anything changed."""
    if platform == "darwin":
        return False
    keys = _table()
    if keys is None:
        return False
    changed = False
    for seq in _ESC_DIGITS:
        if isinstance(keys.get(seq), str):  # a macOS character, not a key
            del keys[seq]
            changed = True
    return changed


def use_alt_letters(bound: Iterable[str]) -> list[str]:
    """Make ESC+letter read as Alt+letter for each ``alt+LETTER`` in ``bound`` (the keys
    of the keymap, e.g. ``"alt+f"``) that Textual reads as another key; the keys freed."""
    keys = _table()
    if keys is None:
        return []
    freed = []
    for key in bound:
        key = key.strip().lower()
        if not (key.startswith("alt+") and len(key) == 5 and key[4].isalpha()):
            continue
        seq = f"\x1b{key[4]}"
        if seq in keys:
            del keys[seq]
            freed.append(key)
    return freed


def use_alt_enter() -> bool:
    """Make ESC CR (Alt+Enter in xterm and tmux) read as Ctrl+J, the input line's "new
    line" key, instead of a plain Enter that sends; whether anything changed."""
    keys = _table()
    if keys is None or "\x1b\r" in keys:
        return False
    from textual.keys import Keys

    keys["\x1b\r"] = (Keys.ControlJ,)
    return True
