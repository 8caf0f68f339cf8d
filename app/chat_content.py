"""What sdschat puts in an SDS message's ``content``: a display name, a kind and the text.

Format (version 1): compact UTF-8 JSON, one object::

    {"v": 1, "name": "alice", "kind": "msg", "text": "hello"}

* ``name``: the author's display name (at most :data:`MAX_NAME_CHARS` characters,
  control characters removed). It is the *claimed* name; the authenticated
  author is the envelope's ``sender_id``, which a UI shows beside it.
* ``kind``: ``"msg"`` (an ordinary line) or ``"me"`` (an action, ``/me waves``).
* ``text``: the line as typed.

Why JSON and not a protobuf: the content is end-to-end encrypted inside the
envelope (nobody but channel members reads it), it is small next to the SDS
metadata around it (the bloom filter alone is 18 KB), and JSON keeps it easy to
read in ``sdschat history`` and in other clients. Unknown keys are ignored and
``v`` lets the format grow.

Receivers accept anything: content that is not such an object (for example
plain text from a js-waku peer) decodes as ``kind="raw"`` with ``name=None``
and the bytes as text (invalid UTF-8 replaced). Decoding never raises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONTENT_VERSION",
    "KINDS",
    "MAX_NAME_CHARS",
    "ChatContent",
    "clean_name",
    "decode_content",
    "encode_content",
    "json_visible",
    "visible",
]

CONTENT_VERSION = 1
"""The content format version this module writes."""

KINDS = ("msg", "me")
"""Kinds a sender may choose; receivers also produce ``"raw"`` for foreign content."""

MAX_NAME_CHARS = 64
"""Longest display name kept (longer ones are cut)."""


@dataclass(frozen=True, slots=True)
class ChatContent:
    """A decoded message content.

    Attributes:
        text: the message text.
        name: the author's claimed display name, ``None`` when the content did
            not carry one (foreign or raw content).
        kind: ``"msg"``, ``"me"`` or ``"raw"``.
    """

    text: str
    name: str | None = None
    kind: str = "msg"


def clean_name(name: str) -> str:
    """A display name with control characters removed, stripped, cut to :data:`MAX_NAME_CHARS`."""
    cleaned = "".join(ch for ch in name if ch.isprintable()).strip()
    return cleaned[:MAX_NAME_CHARS]


#: DEL, C1 and the bidirectional embeddings, overrides and isolates: what a terminal
#: acts on beyond C0 (which JSON already escapes).
_C1_AND_BIDI = (*range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))

#: Control characters (C0 but tab, DEL, C1) and the bidi controls, written as escapes:
#: a peer's text must not move the cursor, clear the screen, retitle or recolour the
#: terminal, or reorder what is shown around it.
_VISIBLE: dict[int, str] = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in (*(c for c in range(0x20) if c != 0x09), *_C1_AND_BIDI)
}
_VISIBLE_LINES = {c: v for c, v in _VISIBLE.items() if c != 0x0A}


def visible(text: str, *, newlines: bool = False) -> str:
    """``text`` safe to put on a terminal: control and bidi-override characters become
    escapes such as ``\\x1b`` and ``\\u202e`` (tab stays); with ``newlines`` a line
    break stays a line break (a multi-line message in a log), otherwise it is ``\\x0a``.

    Text from peers (message text, names of raw content, message ids) goes through it
    before it is shown: Rich and Textual pass ESC and C1 bytes to the terminal."""
    if text.isprintable():  # C speed; the usual case (an escape is never printable)
        return text
    return text.translate(_VISIBLE_LINES if newlines else _VISIBLE)


#: What JSON leaves raw that a terminal acts on, as JSON escapes. They can only occur
#: inside JSON strings, where ``\\u009b`` means the same character: the document is
#: unchanged for a parser.
_JSON_VISIBLE = {c: f"\\u{c:04x}" for c in _C1_AND_BIDI}


def json_visible(line: str) -> str:
    """A JSON text with C1 and bidi-override characters written as ``\\uXXXX`` escapes:
    the same JSON, safe to print on a terminal (``--headless`` and ``history --json``
    write peers' text to stdout, often a terminal)."""
    if line.isascii():  # C speed; the usual case
        return line
    return line.translate(_JSON_VISIBLE)


def encode_content(text: str, name: str, kind: str = "msg") -> bytes:
    """Content bytes for ``text`` by ``name`` (see the module docstring).

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS` or ``text`` is empty.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not text:
        raise ValueError("text must not be empty")
    obj = {"v": CONTENT_VERSION, "name": clean_name(name), "kind": kind, "text": text}
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_content(content: bytes) -> ChatContent:
    """Decode content bytes; never raises (foreign content becomes ``kind="raw"``)."""
    try:
        obj: Any = json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("text"), str) and isinstance(obj.get("v"), int):
        name = obj.get("name")
        kind = obj.get("kind")
        return ChatContent(
            text=obj["text"],
            name=clean_name(name) if isinstance(name, str) else None,
            kind=kind if kind in KINDS else "msg",
        )
    if content[:1] == b"\xff":  # typed content (app/content.py): its one-line summary
        from app.content import summary_content

        return summary_content(content)
    return ChatContent(text=content.decode("utf-8", errors="replace"), name=None, kind="raw")
