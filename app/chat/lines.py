"""What sdschat puts in an SDS message's ``content``: a display name, a kind and the text.

Format (version 1): compact UTF-8 JSON, one object::

    {"v": 1, "name": "alice", "kind": "msg", "text": "hello"}

* ``name``: the author's display name (at most :data:`app.names.MAX_NAME_CHARS` characters,
  control characters removed). It is the *claimed* name; the authenticated
  author is the envelope's ``sender_id``, which a UI shows beside it.
* ``kind``: ``"msg"`` (an ordinary line), ``"me"`` (an action, ``/me waves``) or
  ``"nick"``, ``"join"``, ``"leave"`` (a name change, joining or leaving the
  channel, announced to it; the text is the sentence: ``alice joined #ops``), or
  ``"topic"`` (the channel's topic from now on; the text is the topic).
* ``text``: the line as typed.

Why JSON and not a protobuf: the content is end-to-end encrypted inside the
envelope (nobody but channel members reads it), it is small next to the SDS
metadata around it (the bloom filter alone is 18 KB), and JSON keeps it easy to
read in ``sdschat history`` and in other clients. Unknown keys are ignored and
``v`` lets the format grow.

Typed content (version 2): replies, reactions, edits and deletions are a
protobuf ``TypedContent`` (schema ``app/chat/chat_content.proto``) after the 4 bytes
``FF 'S' 'C' 02`` (0xFF never starts UTF-8 text, so the formats cannot be
confused). In this module's API (and the node's ``post``/``Delivered``) such a
message is a kind from :data:`TYPED_KINDS` and a ``text`` of the form
``"TARGET_ID\nBODY"`` (:func:`typed_text`, :func:`split_typed`): the emoji of a
reaction, the new text of an edit, the text of a reply, empty for a deletion.

Receivers accept anything: content that is not such an object (for example
plain text from a js-waku peer) decodes as ``kind="raw"`` with ``name=None``
and the bytes as text (invalid UTF-8 replaced). Decoding never raises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from app.names import C1_AND_BIDI, INVISIBLE, clean_name, visible

__all__ = [
    "CONTENT_VERSION",
    "EVENT_KINDS",
    "KINDS",
    "MAX_REACTION_CHARS",
    "TYPED_KINDS",
    "ChatContent",
    "decode_line",
    "encode_content",
    "json_visible",
    "split_typed",
    "typed_text",
    "visible",
]

CONTENT_VERSION = 1
"""The content format version this module writes."""

TYPED_KINDS = ("reply", "react", "unreact", "edit", "delete")
"""Kinds carried as typed content (version 2, protobuf): each names a target message."""

TYPED_MAGIC = b"\xffSC\x02"
"""What typed content starts with (0xFF: never UTF-8 text or JSON; 0x02: the version)."""

EVENT_KINDS = ("nick", "join", "leave", "topic")
"""Lines that say what someone did (a name change, joining, leaving), not what they said:
shown dimmed, and can be hidden. Their ``text`` reads as a sentence for any client."""

LINE_KINDS = ("msg", "me", *EVENT_KINDS)
"""Kinds carried as version 1 JSON (a line of the log)."""

KINDS = (*LINE_KINDS, *TYPED_KINDS)
"""Kinds a sender may choose; receivers also produce ``"raw"`` for foreign content.
``"nick"`` announces a name change (``text``: ``"alice is now known as alicia"``,
readable as it is by a client that does not know the kind)."""



def nick_text(old: str, new: str) -> str:
    """The text of a ``"nick"`` message: what any client shows."""
    return f"{old} is now known as {new}"



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
    target: str | None = None
    """The message a typed kind (:data:`TYPED_KINDS`) is about."""


def typed_text(target: str, body: str = "") -> str:
    """The ``text`` of a typed message in this module's API: ``"TARGET\nBODY"``."""
    if not target or "\n" in target:
        raise ValueError("a typed message needs the id of its target")
    return f"{target}\n{body}"


def split_typed(text: str) -> tuple[str, str]:
    """``(target, body)`` of a typed message's ``text`` (see :func:`typed_text`)."""
    target, _, body = text.partition("\n")
    return target, body


def _json_escape(c: int) -> str:
    if c < 0x10000:
        return f"\\u{c:04x}"
    c -= 0x10000  # a surrogate pair: JSON escapes UTF-16 code units
    return f"\\u{0xD800 + (c >> 10):04x}\\u{0xDC00 + (c & 0x3FF):04x}"


#: What JSON leaves raw that a terminal acts on, as JSON escapes. They can only occur
#: inside JSON strings, where ``\\u009b`` means the same character: the document is
#: unchanged for a parser.
_JSON_VISIBLE = {c: _json_escape(c) for c in (*C1_AND_BIDI, *INVISIBLE)}


def json_visible(line: str) -> str:
    """A JSON text with C1, bidi and invisible characters written as ``\\uXXXX`` escapes:
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
    if kind in TYPED_KINDS:
        return _encode_typed(text, name, kind)
    obj = {"v": CONTENT_VERSION, "name": clean_name(name), "kind": kind, "text": text}
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _encode_typed(text: str, name: str, kind: str) -> bytes:
    from app.chat import chat_content_pb2 as pb

    target, body = split_typed(text)
    if not target:
        raise ValueError("a typed message needs the id of its target")
    msg = pb.TypedContent(version=2, name=clean_name(name))
    if kind == "reply":
        if not body:
            raise ValueError("a reply needs text")
        msg.reply.target, msg.reply.text = target, body
    elif kind in ("react", "unreact"):
        if not body or len(body) > MAX_REACTION_CHARS:
            raise ValueError(f"a reaction is 1 to {MAX_REACTION_CHARS} characters")
        msg.reaction.target, msg.reaction.emoji = target, body
        msg.reaction.remove = kind == "unreact"
    elif kind == "edit":
        if not body:
            raise ValueError("an edit needs the new text (/delete removes a message)")
        msg.edit.target, msg.edit.text = target, body
    else:
        msg.delete.target = target
    return TYPED_MAGIC + msg.SerializeToString()


def _decode_typed(content: bytes) -> ChatContent | None:
    from google.protobuf.message import DecodeError

    from app.chat import chat_content_pb2 as pb

    msg = pb.TypedContent()
    try:
        msg.ParseFromString(content[len(TYPED_MAGIC) :])
    except (DecodeError, RecursionError):
        return None
    name = clean_name(msg.name) if msg.name else None
    which = msg.WhichOneof("body")
    if which == "reply":
        target, kind, body = msg.reply.target, "reply", msg.reply.text
    elif which == "reaction":
        r = msg.reaction
        target, kind, body = r.target, "unreact" if r.remove else "react", r.emoji
    elif which == "edit":
        target, kind, body = msg.edit.target, "edit", msg.edit.text
    elif which == "delete":
        target, kind, body = msg.delete.target, "delete", ""
    else:
        return None  # a body of a later version: shown as unknown content
    if not target or "\n" in target:
        return None
    return ChatContent(text=f"{target}\n{body}", name=name, kind=kind, target=target)


MAX_REACTION_CHARS = 16
"""Longest reaction (an emoji, possibly several code points, or a short word)."""


def decode_line(content: bytes) -> ChatContent:
    """Decode the content bytes of a line (this module's formats); never raises: anything
    else becomes ``kind="raw"`` (:func:`app.chat.content.decode_content` also summarises
    the other typed content of :mod:`app.chat.content`)."""
    if content.startswith(TYPED_MAGIC):
        typed = _decode_typed(content)
        if typed is not None:
            return typed
        return ChatContent(text="(content sdschat does not know)", name=None, kind="raw")
    try:
        obj: Any = orjson.loads(content)  # ~6x faster than json.loads: once per delivery
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and json takes (NaN, integers beyond 64 bits)
            obj = json.loads(content)
        except (ValueError, UnicodeDecodeError, RecursionError):
            obj = None
    if isinstance(obj, dict) and isinstance(obj.get("text"), str) and isinstance(obj.get("v"), int):
        name = obj.get("name")
        kind = obj.get("kind")
        return ChatContent(
            text=obj["text"],
            name=clean_name(name) if isinstance(name, str) else None,
            kind=kind if kind in LINE_KINDS else "msg",
        )
    return ChatContent(text=content.decode("utf-8", errors="replace"), name=None, kind="raw")
