"""Alt+digit as the terminals sdschat runs in send it.

xterm, tmux, GNOME Terminal, Konsole and others send Alt+1 as ESC then ``1``.
Textual maps ESC+digit to the characters macOS types with Option+digit
(``"\\x1b1"`` -> ``¡``, for WezTerm on macOS), so on those terminals Alt+1...9
typed ``¡™£¢∞§¶•ª`` into the input line instead of switching channels.
:func:`use_alt_digits` removes those nine mappings (and ESC+0) from Textual's
sequence table, so its parser reports ESC+digit as ``alt+1`` ... ``alt+9``
(the ESC-prefix rule it applies to every other key). On macOS the table is
left alone: there Option+digit is how people type those characters.

The table is a private part of Textual (``textual._ansi_sequences``): if it is
not there, nothing changes and Ctrl+N/P and ``/switch`` still switch channels.
"""

from __future__ import annotations

import sys
from typing import cast

__all__ = ["use_alt_digits"]

_ESC_DIGITS = tuple(f"\x1b{d}" for d in "0123456789")


def use_alt_digits(platform: str = sys.platform) -> bool:
    """Make ESC+digit read as Alt+digit (not on macOS); whether anything changed."""
    if platform == "darwin":
        return False
    try:
        from textual._ansi_sequences import ANSI_SEQUENCES_KEYS as table
    except ImportError:  # a Textual without that private table: keep its behaviour
        return False
    keys = cast("dict[str, object]", table)  # typed as a Mapping; it is a dict
    changed = False
    for seq in _ESC_DIGITS:
        if isinstance(keys.get(seq), str):  # a macOS character, not a key
            del keys[seq]
            changed = True
    return changed
