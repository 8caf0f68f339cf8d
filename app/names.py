"""What a name a person types may be, how a name is shown, and when two names look alike.

* a nick (``/nick``, ``--name``, a display name in a peer's content) and the channel a
  person means (``sdschat join NAME``, ``/join``);
* :func:`visible`: text from peers made safe for a terminal (control characters,
  terminal escapes, bidi controls and invisible characters written as escapes);
* :func:`confusable` and :class:`NameBook`: two names compared by their Unicode TR39
  (UTS #39) skeletons, ICU's :class:`SpoofChecker` through PyICU, never by a check of
  one string alone; a name that looks like another author's is shown with a short
  fingerprint of its author's id (:func:`label`).

A leaf inside :mod:`app`: it imports nothing of the other packages of app (the rules of a
channel's *name* itself are :func:`net.channel_key.check_channel_name`'s).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, Final

__all__ = [
    "FINGERPRINT_HEX",
    "MAX_NAME_CHARS",
    "NameBook",
    "channel_arg",
    "check_new_channel_name",
    "check_nick",
    "clean_name",
    "confusable",
    "fingerprint",
    "label",
    "name_keys",
    "visible",
]

MAX_NAME_CHARS = 64
"""Longest display name: ``/nick`` and ``--name`` refuse longer ones (saying so); a longer
name in a peer's content is cut."""

FINGERPRINT_HEX: Final = 8
"""Hex digits of the author's sender id shown after a name that looks like another's
(``alice (3f9a2b1c)``): 32 bits, so a look-alike author must make about 2^31 keys to
match the fingerprint too (docs/security.md, "Names")."""

# -- what a terminal must not receive raw ------------------------------------------------

#: DEL, C1 and the bidirectional embeddings, overrides and isolates: what a terminal
#: acts on beyond C0 (which JSON already escapes).
C1_AND_BIDI: Final = (*range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))

#: Characters that show nothing yet change what a line means or how it is read: the
#: soft hyphen, the Arabic letter mark, zero-width spaces and (non-)joiners, the
#: left-to-right and right-to-left marks, the line and paragraph separators, word
#: joiners and invisible operators, deprecated format controls, the byte order mark,
#: interlinear annotations, shorthand format controls, musical format controls, the
#: language tag, and the Hangul fillers (blank letters that make an empty-looking name).
INVISIBLE: Final = (
    0x00AD, 0x061C, 0x115F, 0x1160, 0x180E, *range(0x200B, 0x2010), 0x2028, 0x2029,
    *range(0x2060, 0x2065), *range(0x206A, 0x2070), 0x3164, 0xFEFF, 0xFFA0,
    *range(0xFFF9, 0xFFFC), *range(0x1BCA0, 0x1BCA4), *range(0x1D173, 0x1D17B), 0xE0001,
    *range(0xE0020, 0xE0080),
)  # fmt: skip

ZWJ: Final = 0x200D


def _escape(c: int) -> str:
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


#: Control characters (C0 but tab, DEL, C1), the bidi controls and the invisible
#: characters, written as escapes: a peer's text must not move the cursor, clear the
#: screen, retitle or recolour the terminal, reorder what is shown around it, or hide.
_VISIBLE: dict[int, str] = {
    c: _escape(c) for c in (*(c for c in range(0x20) if c != 0x09), *C1_AND_BIDI, *INVISIBLE)
}
_VISIBLE_LINES = {c: v for c, v in _VISIBLE.items() if c != 0x0A}

#: A zero-width joiner or a tag character that belongs to an emoji sequence (a family
#: 👨‍👩‍👧, a flag 🏴 + tags): kept, the rest is shown. (Pictographs and dingbats, their
#: variation selector and skin tones, then a pictograph after the joiner.)
_EMOJI = "\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f"
_KEPT = re.compile(
    f"(?<=[{_EMOJI}])\u200d(?=[{_EMOJI}])"
    "|(?<=[\U0001f3f4\U000e0020-\U000e007e])[\U000e0020-\U000e007f]"
)


def visible(text: str, *, newlines: bool = False) -> str:
    """``text`` safe to put on a terminal: control, bidi and invisible characters become
    escapes such as ``\\x1b``, ``\\u202e`` and ``\\u200b`` (tab stays; a zero-width
    joiner inside an emoji sequence stays); with ``newlines`` a line break stays a line
    break (a multi-line message in a log), otherwise it is ``\\x0a``.

    Text from peers (message text, names, message ids) goes through it before it is
    shown: Rich and Textual pass ESC and C1 bytes to the terminal, and a terminal
    reorders a line around a bidi override."""
    if text.isprintable():  # C speed; the usual case (an escape is never printable)
        return text
    table = _VISIBLE_LINES if newlines else _VISIBLE
    if "\u200d" not in text and max(text) < "\U000e0020":
        return text.translate(table)
    # keep the joiners and tags of emoji sequences: escape the text around them
    out: list[str] = []
    at = 0
    for m in _KEPT.finditer(text):
        out.append(text[at : m.start()].translate(table))
        out.append(m.group(0))
        at = m.end()
    out.append(text[at:].translate(table))
    return "".join(out)


# -- nicks ------------------------------------------------------------------------------


def clean_name(name: str) -> str:
    """A display name from a peer's content as it may be shown: control, bidi and
    invisible characters written as escapes (``al\\u200bice``, never a bare
    ``alice``), stripped, cut to :data:`MAX_NAME_CHARS`."""
    return visible(name).strip()[:MAX_NAME_CHARS]


def check_nick(name: str) -> str:
    """A display name a person typed (``/nick``, ``--name``), or ValueError saying why not.

    A name is 1 to :data:`MAX_NAME_CHARS` printable characters without spaces (a name
    is one word: ``@name`` mentions and completion match it as one), and without
    invisible characters (zero-width spaces, bidi marks, Hangul fillers)."""
    name = name.strip()
    if not name:
        raise ValueError("a name must not be empty")
    if any(ch.isspace() for ch in name):
        raise ValueError(f"a name is one word, without spaces: {name!r}")
    if not name.isprintable() or any(ord(ch) in _INVISIBLE_SET for ch in name):
        raise ValueError(f"a name must not hold control or invisible characters: {name!r}")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"a name is at most {MAX_NAME_CHARS} characters, got {len(name)}")
    return name


_INVISIBLE_SET: Final = frozenset(INVISIBLE)


def channel_arg(text: str) -> str:
    """The channel a person means by ``text`` (``sdschat join``, ``--channel``, ``/join``,
    ``/leave``, ``/switch``, ``sdschat history``): one rule everywhere, as in IRC clients.

    Surrounding spaces are dropped and one leading ``#`` is the channel prefix, not
    part of the name (``#ops`` and ``ops`` are the same channel). The name is then
    checked by :func:`net.channel_key.check_channel_name`.

    Raises:
        ValueError: empty or whitespace-only (``#`` alone too), or not a valid name.
    """
    from net.channel_key import check_channel_name

    name = text.strip()
    if name.startswith("#"):
        name = name[1:].strip()
    if not name:
        raise ValueError(f"a channel name must not be empty or only spaces: {text!r}")
    return check_channel_name(name)


def check_new_channel_name(name: str) -> str:
    """The name of a channel to be made here (``/join``, ``/create``, ``sdschat join``
    of a channel this data directory never joined), or ValueError saying why not.

    Stricter than :func:`channel_arg`, for new names only (a channel joined before keeps
    working under its name): one word without ``/``, so that it never reads as a command
    or a path (``#random/forget random`` was taken as a channel name)."""
    if "/" in name or any(ch.isspace() for ch in name):
        raise ValueError(f"a new channel's name is one word, without spaces or '/': {name!r}")
    return name


# -- names that look alike ----------------------------------------------------------------


@lru_cache(maxsize=1)
def _checker() -> Any:
    import icu  # type: ignore[import-untyped]  # PyICU: ICU's SpoofChecker (UTS #39 data)

    return icu.SpoofChecker()


@lru_cache(maxsize=32768)
def name_keys(name: str) -> frozenset[str]:
    """The TR39 skeletons ``name`` is compared by: of the name and of its case folding
    (``Alice`` looks like ``alice``; ``I`` like ``l``, which folding alone would lose),
    both without the characters that show nothing (:data:`INVISIBLE`, combining
    grapheme joiners aside) and after NFC. Two names are confusable when they share a
    key (:func:`confusable`)."""
    shown = (ch for ch in name
             if ord(ch) not in _INVISIBLE_SET and unicodedata.category(ch) != "Cc")  # fmt: skip
    base = unicodedata.normalize("NFC", "".join(shown))
    check = _checker()
    return frozenset({check.getSkeleton(0, base), check.getSkeleton(0, base.casefold())})


def confusable(a: str, b: str) -> bool:
    """Whether names ``a`` and ``b`` can be taken for one another: their TR39 skeletons
    (:func:`name_keys`) meet. ``alice`` and ``аlice`` (Cyrillic а), ``alice`` and
    ``Alice``, ``rn`` and ``m``, ``paypal`` and ``paypa1`` are; ``bob`` and ``bób``
    are not (the accent shows)."""
    return bool(name_keys(a) & name_keys(b))


def fingerprint(sender_id: str) -> str:
    """The short fingerprint shown after a name that looks like another: the author's
    sender id's first :data:`FINGERPRINT_HEX` hex digits."""
    return sender_id[:FINGERPRINT_HEX]


def label(name: str | None, sender_id: str, shared: bool) -> str:
    """How an author is written: ``name``, ``name (3f9a2b1c)`` when ``shared`` (another
    author's name looks like it), or the id's start when there is no name."""
    if not name:
        return sender_id[:8]
    return f"{name} ({fingerprint(sender_id)})" if shared else name


class NameBook:
    """Which authors (sender ids) use which names, by skeleton (:func:`name_keys`):
    a name is *shared* when another author uses a name confusable with it. Every name
    an author was seen with counts (its earlier lines still show it)."""

    def __init__(self, names: Iterable[tuple[str, str]] = ()) -> None:
        self._ids: dict[str, set[str]] = {}
        self._last: dict[str, str] = {}
        """sender id -> the name it was last seen with."""
        self.on_shared: Callable[[str], None] | None = None
        """For the caller of :meth:`note` to call when it returned True (the TUI model
        marks the lines of the name's authors)."""
        for sender_id, name in names:
            self.note(sender_id, name)

    def note(self, sender_id: str, name: str | None) -> bool:
        """``sender_id`` uses ``name``; True if that made the name shared (a second id)."""
        if not name or not sender_id:
            return False
        self._last[sender_id] = name
        became = False
        for key in name_keys(name):
            ids = self._ids.setdefault(key, set())
            if sender_id in ids:
                continue
            ids.add(sender_id)
            became = became or len(ids) == 2
        return became

    def use(self, sender_id: str, name: str) -> None:
        """``sender_id`` uses ``name`` now and its earlier name no more (a roster's rename;
        :meth:`note` keeps every name an author was seen with)."""
        old = self._last.get(sender_id)
        if old is not None and old != name:
            for key in name_keys(old):
                ids = self._ids.get(key)
                if ids is not None:
                    ids.discard(sender_id)
                    if not ids:
                        del self._ids[key]
        self.note(sender_id, name)

    def ids_of(self, name: str) -> set[str]:
        """Every author seen with ``name`` or a name confusable with it."""
        out: set[str] = set()
        for key in name_keys(name):
            out |= self._ids.get(key, set())
        return out

    def shared(self, name: str | None) -> bool:
        return bool(name) and len(self.ids_of(name or "")) > 1

    def others(self, name: str, sender_id: str) -> set[str]:
        """The authors other than ``sender_id`` whose names look like ``name``."""
        return self.ids_of(name) - {sender_id}

    def label(self, name: str | None, sender_id: str) -> str:
        return label(name, sender_id, self.shared(name))

    def name_of(self, sender_id: str) -> str | None:
        return self._last.get(sender_id)
