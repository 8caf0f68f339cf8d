"""What a name a person types may be: a nick (``/nick``, ``--name``, a display name in a
peer's content) and the channel a person means (``sdschat join NAME``, ``/join``).

A leaf inside :mod:`app`: it imports nothing of the other packages of app (the rules of a
channel's *name* itself are :func:`net.channel_key.check_channel_name`'s).
"""

from __future__ import annotations

__all__ = ["MAX_NAME_CHARS", "channel_arg", "check_new_channel_name", "check_nick", "clean_name"]

MAX_NAME_CHARS = 64
"""Longest display name: ``/nick`` and ``--name`` refuse longer ones (saying so); a longer
name in a peer's content is cut."""


def clean_name(name: str) -> str:
    """A display name with control characters removed, stripped, cut to :data:`MAX_NAME_CHARS`."""
    printable = name if name.isprintable() else "".join(ch for ch in name if ch.isprintable())
    cleaned = printable.strip()
    return cleaned[:MAX_NAME_CHARS]


def check_nick(name: str) -> str:
    """A display name a person typed (``/nick``, ``--name``), or ValueError saying why not.

    A name is 1 to :data:`MAX_NAME_CHARS` printable characters without spaces (a name
    is one word: ``@name`` mentions and completion match it as one)."""
    name = name.strip()
    if not name:
        raise ValueError("a name must not be empty")
    if any(ch.isspace() for ch in name):
        raise ValueError(f"a name is one word, without spaces: {name!r}")
    if not name.isprintable():
        raise ValueError(f"a name must not hold control characters: {name!r}")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"a name is at most {MAX_NAME_CHARS} characters, got {len(name)}")
    return name


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
