"""Typed content (replies, reactions, edits, deletions, the topic, nick and join/leave
lines, files) and the *conversation view* that folds a channel's log into what to show.

Formats, told apart by their first bytes (``docs/content.md``):

* ``FF 'S' 'C' 02`` + ``TypedContent`` (``app/chat/chat_content.proto``, schema version 2):
  replies, reactions (``remove`` takes one back), edits, deletions, each naming its
  target by SDS message id; written by the TUI and by these encoders alike;
* ``FF 08`` … : :data:`MAGIC` + a ``Content`` protobuf (``app/chat/content.proto``, version
  1): file manifests and file segments (:mod:`app.chat.files`), and bodies to come;
* ``{`` … : sdschat's JSON lines (:mod:`app.chat.lines`): kinds ``msg``, ``me`` and
  the announcements ``topic`` (the text is the topic), ``nick``, ``join``, ``leave``
  (the text is the sentence, readable by any client);
* anything else: plain UTF-8 text (js-waku peers), kind ``raw``.

0xFF never occurs in UTF-8, so plain text is never mistaken for typed content.
Decoding never raises: content with another schema version, a body this version does
not know, or a malformed body decodes as ``kind="unsupported"`` with the text
``unsupported message (type N, version V)``; it is shown, never dropped.

The view (:class:`ConversationView`) is pure: feed it the channel's delivered
messages (``add``; any order, duplicates ignored) and read :meth:`~ConversationView.items`.
Everything it shows is a function of the *set* of messages, ordered by SDS order
``(lamport, message_id)``, so two participants holding the same messages show the
same thing, whatever order they received them in, and a restart recomputes it from
the stored log.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from app.chat import chat_content_pb2 as cpb
from app.chat import content_pb2 as pb
from app.chat.lines import ChatContent, decode_line
from app.members.device_labels import is_device_log
from app.members.display import describe as describe_members_content
from app.members.display import is_members_content
from app.names import clean_name

__all__ = [
    "MAGIC",
    "MAX_EMOJI_CHARS",
    "MAX_QUOTE_CHARS",
    "SCHEMA_VERSION",
    "SYSTEM_KINDS",
    "TYPED_MAGIC",
    "ConversationView",
    "Decoded",
    "FileInfo",
    "FileStatus",
    "ReplyRef",
    "ViewItem",
    "decode",
    "decode_content",
    "encode_delete",
    "encode_edit",
    "encode_membership",
    "encode_nick",
    "encode_reaction",
    "encode_reply",
    "encode_topic",
    "is_typed",
    "make_quote",
    "summary_content",
]

MAGIC = b"\xff"
"""First byte of typed content: never the first byte of UTF-8 text (nor of JSON)."""

TYPED_MAGIC = b"\xffSC\x02"
"""What replies, reactions, edits and deletions start with (``app/chat/chat_content.proto``)."""

TYPED_VERSION = 2
"""The ``TypedContent.version`` written and read."""

SCHEMA_VERSION = 1
"""The ``Content`` (files) schema major version this module writes and reads."""

DEVICE_LOG_TEXT = "device list"
"""The text of a person's device-log content (kind ``keys``: never shown as a line)."""

MAX_QUOTE_CHARS = 120
"""Longest quote of a reply's target shown (longer ones are cut with an ellipsis)."""

MAX_EMOJI_CHARS = 16
"""Longest reaction (one emoji, possibly a ZWJ sequence or with modifiers)."""

MAX_TOPIC_CHARS = 500
"""Longest topic."""

SYSTEM_KINDS = ("topic", "nick", "join", "leave")
"""Kinds of view items that are announcements rather than someone's message."""

_ID = re.compile(r"[0-9a-f]{64}")
_FILE_ID = re.compile(r"[0-9a-f]{32}")

# type numbers of the TypedContent bodies (their oneof field numbers)
_T_REPLY, _T_REACTION, _T_EDIT, _T_DELETE = 10, 11, 12, 13


# ------------------------------------------------------------------ decoded content


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A file manifest as sent (``name`` is the sender's; sanitise before saving)."""

    file_id: str
    name: str
    size: int
    sha256: bytes
    segment_count: int
    segment_size: int


@dataclass(frozen=True, slots=True)
class Decoded:
    """One content, decoded. ``kind`` is one of ``msg``, ``me``, ``raw`` (foreign plain
    text), ``reply``, ``reaction``, ``edit``, ``delete``, ``topic``, ``nick``, ``join``,
    ``leave``, ``file``, ``segment``, ``unsupported``; the other fields are set as the
    kind needs (``text`` is always a readable one-line summary at least)."""

    kind: str
    text: str
    name: str | None = None
    target_id: str | None = None
    emoji: str = ""
    remove: bool = False
    file: FileInfo | None = None
    segment_index: int = -1
    segment_data: bytes = b""
    type_number: int = 0
    version: int = 0


def is_typed(content: bytes) -> bool:
    """Whether ``content`` is typed content of either protobuf format (starts with 0xFF)."""
    return content[:1] == MAGIC


def _unsupported(type_number: int, version: int, name: str | None) -> Decoded:
    return Decoded(
        "unsupported",
        f"unsupported message (type {type_number}, version {version})",
        name=name,
        type_number=type_number,
        version=version,
    )


def decode(content: bytes) -> Decoded:
    """Decode any content bytes; never raises (see the module docstring)."""
    if is_members_content(content):  # a members channel's own contents (app/members)
        kind, text = describe_members_content(content)
        return Decoded(kind, text)
    if is_device_log(content):  # a person's device log (app/members/device_labels.py)
        return Decoded("keys", DEVICE_LOG_TEXT)
    if content.startswith(TYPED_MAGIC):
        return _decode_typed(content)
    if not is_typed(content):
        return _decode_line(content)
    msg = pb.Content()
    try:
        msg.ParseFromString(content[1:])
    except (DecodeError, ValueError, RecursionError):
        return _unsupported(0, 0, None)
    name = clean_name(msg.name) if msg.name else None
    version, type_number = msg.version, msg.type
    if version != SCHEMA_VERSION:
        return _unsupported(type_number, version, name)
    try:
        out = _decode_file_body(msg, name)
    except ValueError:
        out = None
    if out is None or out.type_number != type_number:
        return _unsupported(type_number, version, name)
    return out


def _decode_line(content: bytes) -> Decoded:
    """JSON lines (with the announcement kinds) and plain text."""
    c = decode_line(content)
    kind = c.kind
    if kind != "raw":
        try:
            obj: Any = json.loads(content)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and obj.get("kind") in SYSTEM_KINDS:
            kind = str(obj["kind"])
    text = c.text[:MAX_TOPIC_CHARS] if kind == "topic" else c.text
    return Decoded(kind, text, name=c.name)


def _target(value: str) -> str:
    if not _ID.fullmatch(value):
        raise ValueError("bad target id")
    return value


def _decode_typed(content: bytes) -> Decoded:
    """``FF 'S' 'C' 02`` + ``TypedContent``: reply, reaction, edit, deletion."""
    msg = cpb.TypedContent()
    try:
        msg.ParseFromString(content[len(TYPED_MAGIC) :])
    except (DecodeError, ValueError, RecursionError):
        return _unsupported(0, TYPED_VERSION, None)
    name = clean_name(msg.name) if msg.name else None
    which = msg.WhichOneof("body")
    v = TYPED_VERSION
    try:
        if which == "reply":
            r = msg.reply
            if not r.text:
                raise ValueError("empty reply")
            return Decoded(
                "reply",
                r.text,
                name=name,
                target_id=_target(r.target),
                type_number=_T_REPLY,
                version=v,
            )
        if which == "reaction":
            e = msg.reaction
            if not e.emoji or len(e.emoji) > MAX_EMOJI_CHARS or not e.emoji.isprintable():
                raise ValueError("bad emoji")
            verb = "took back" if e.remove else "reacted"
            return Decoded(
                "reaction",
                f"{verb} {e.emoji} on {e.target[:8]}",
                name=name,
                target_id=_target(e.target),
                emoji=e.emoji,
                remove=e.remove,
                type_number=_T_REACTION,
                version=v,
            )
        if which == "edit":
            ed = msg.edit
            if not ed.text:
                raise ValueError("empty edit")
            return Decoded(
                "edit",
                ed.text,
                name=name,
                target_id=_target(ed.target),
                type_number=_T_EDIT,
                version=v,
            )
        if which == "delete":
            t = _target(msg.delete.target)
            return Decoded(
                "delete",
                f"deleted {t[:8]}",
                name=name,
                target_id=t,
                type_number=_T_DELETE,
                version=v,
            )
    except ValueError:
        pass
    # a body of a later version, or a malformed one: name its field number if known
    number = {"reply": _T_REPLY, "reaction": _T_REACTION, "edit": _T_EDIT}.get(which or "", 0)
    if which == "delete":
        number = _T_DELETE
    if number == 0:
        number = _unknown_field(msg)
    return _unsupported(number, msg.version or v, name)


def _unknown_field(msg: Any) -> int:
    """The field number of the first field ``msg`` does not know (0 if none)."""
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet

        fields = UnknownFieldSet(msg)
        if len(fields):
            return int(fields[0].field_number)
    except Exception:  # an older protobuf without the API: type 0
        return 0
    return 0


def _decode_file_body(msg: pb.Content, name: str | None) -> Decoded | None:
    which = msg.WhichOneof("body")
    v = SCHEMA_VERSION
    if which == "file_manifest":
        m = msg.file_manifest
        if not _FILE_ID.fullmatch(m.file_id) or len(m.sha256) != 32 or m.segment_count < 1:
            raise ValueError("bad manifest")
        if m.segment_size < 1 or m.size > m.segment_count * m.segment_size:
            raise ValueError("bad manifest sizes")
        info = FileInfo(m.file_id, m.name, m.size, m.sha256, m.segment_count, m.segment_size)
        return Decoded(
            "file",
            f"file {m.name!s} ({m.size} bytes)",
            name=name,
            file=info,
            type_number=pb.TYPE_FILE_MANIFEST,
            version=v,
        )
    if which == "file_segment":
        s = msg.file_segment
        if not _FILE_ID.fullmatch(s.file_id):
            raise ValueError("bad segment")
        return Decoded(
            "segment",
            f"file segment {s.index} of {s.file_id[:8]}",
            name=name,
            target_id=s.file_id,
            segment_index=s.index,
            segment_data=s.data,
            type_number=pb.TYPE_FILE_SEGMENT,
            version=v,
        )
    return None  # a body this version does not know


def summary_content(content: bytes) -> ChatContent:
    """Typed content as a :class:`~app.chat.lines.ChatContent` (name, kind, one-line
    text): what code that shows plain lines uses (events, ``retry``)."""
    d = decode(content)
    text = d.text
    if d.kind == "reply":
        text = f"↪ {d.target_id[:8] if d.target_id else '?'}: {d.text}"
    elif d.kind == "edit":
        text = f"(edit of {d.target_id[:8] if d.target_id else '?'}) {d.text}"
    return ChatContent(text=text, name=d.name, kind=d.kind)


def decode_content(content: bytes) -> ChatContent:
    """Any content bytes as a :class:`~app.chat.lines.ChatContent`; never raises.

    A line (:mod:`app.chat.lines`: JSON lines, replies, reactions, edits, deletions)
    decodes as there; the other typed content of this module (topic, files, ...) as its
    one-line summary (:func:`summary_content`); foreign content as ``kind="raw"``."""
    if is_device_log(content):  # not news: shown nowhere, like a key share
        return ChatContent(text=DEVICE_LOG_TEXT, name=None, kind="keys")
    if content[:1] == b"\xff" and not content.startswith(TYPED_MAGIC):
        return summary_content(content)
    return decode_line(content)


# ------------------------------------------------------------------ encoders


def make_quote(text: str) -> str:
    """A one-line quote of ``text`` of at most :data:`MAX_QUOTE_CHARS` characters."""
    line = " ".join(text.split())
    if len(line) > MAX_QUOTE_CHARS:
        line = line[: MAX_QUOTE_CHARS - 1] + "…"
    return line


def _typed(name: str, **body: Any) -> bytes:
    msg = cpb.TypedContent(version=TYPED_VERSION, name=clean_name(name), **body)
    return TYPED_MAGIC + msg.SerializeToString()


def _line(name: str, kind: str, text: str) -> bytes:
    obj = {"v": 1, "name": clean_name(name), "kind": kind, "text": text}
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _check_target(target_id: str) -> None:
    if not _ID.fullmatch(target_id):
        raise ValueError(f"not a message id (64 lowercase hex): {target_id!r}")


def _check_text(text: str) -> None:
    if not text.strip():
        raise ValueError("text must not be empty")


def encode_reply(target_id: str, text: str, name: str) -> bytes:
    """A reply to ``target_id`` (shown under a quote of the target).

    Raises:
        ValueError: bad target id or empty text.
    """
    _check_target(target_id)
    _check_text(text)
    return _typed(name, reply=cpb.Reply(target=target_id, text=text))


def encode_reaction(target_id: str, emoji: str, name: str, *, remove: bool = False) -> bytes:
    """A reaction, or (``remove``) taking one's own back.

    Raises:
        ValueError: bad target id or emoji (empty, longer than
            :data:`MAX_EMOJI_CHARS` characters, or containing spaces/controls).
    """
    _check_target(target_id)
    emoji = emoji.strip()
    if not emoji or len(emoji) > MAX_EMOJI_CHARS or not emoji.isprintable() or " " in emoji:
        raise ValueError(f"a reaction is one emoji of at most {MAX_EMOJI_CHARS} characters")
    r = cpb.Reaction(target=target_id, emoji=emoji, remove=remove)
    return _typed(name, reaction=r)


def encode_edit(target_id: str, text: str, name: str) -> bytes:
    """New text for our message ``target_id`` (others ignore an edit by anyone else)."""
    _check_target(target_id)
    _check_text(text)
    return _typed(name, edit=cpb.Edit(target=target_id, text=text))


def encode_delete(target_id: str, name: str) -> bytes:
    """Delete our message ``target_id`` (others ignore a delete by anyone else)."""
    _check_target(target_id)
    return _typed(name, delete=cpb.Delete(target=target_id))


def encode_topic(text: str, name: str) -> bytes:
    """Set (or, with empty text, clear) the channel's topic (a JSON ``topic`` line)."""
    text = " ".join(text.split())
    if len(text) > MAX_TOPIC_CHARS:
        raise ValueError(f"a topic is at most {MAX_TOPIC_CHARS} characters")
    return _line(name, "topic", text)


def encode_nick(old_name: str, new_name: str) -> bytes:
    """Announce a nick change (a JSON ``nick`` line, sent under the new name)."""
    return _line(new_name, "nick", f"{clean_name(old_name)} is now known as {clean_name(new_name)}")


def encode_membership(name: str, channel: str, *, joined: bool) -> bytes:
    """Announce that we joined (or left) ``channel`` (a JSON ``join``/``leave`` line)."""
    verb = "joined" if joined else "left"
    return _line(name, "join" if joined else "leave", f"{clean_name(name)} {verb} #{channel}")


# ------------------------------------------------------------------ the view


@dataclass(frozen=True, slots=True)
class ReplyRef:
    """What a reply answers: ``quote`` is the target's current text (cut to
    :data:`MAX_QUOTE_CHARS`) once it is delivered (``present``), ``"message deleted"``
    when its author deleted it, ``""`` while it is not (yet) here."""

    target_id: str
    quote: str
    present: bool
    target_sender: str | None = None
    target_name: str | None = None


@dataclass(frozen=True, slots=True)
class FileStatus:
    """A file's reassembly: ``present``/``total`` segments (the progress), ``complete``
    when all are here, ``intact`` when complete and the sha256 matches (``None`` until
    complete)."""

    info: FileInfo
    present: int
    total: int
    complete: bool
    intact: bool | None

    @property
    def progress(self) -> float:
        return self.present / self.total if self.total else 0.0


@dataclass(frozen=True, slots=True)
class ViewItem:
    """One line to show, in SDS order.

    ``text`` is the current text (the latest edit by the author; ``""`` when
    deleted); ``original`` the text as first sent. ``reactions`` maps each emoji to
    the sender ids reacting with it (in SDS order of their reaction). ``kind`` is a
    :class:`Decoded` kind other than reaction/edit/delete/segment.
    """

    position: int
    message_id: str
    sender_id: str
    name: str | None
    lamport: int
    kind: str
    text: str
    original: str
    edited: bool = False
    deleted: bool = False
    reply: ReplyRef | None = None
    reactions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    file: FileStatus | None = None

    def to_json(self) -> dict[str, object]:
        """The fields ``sdschat history --json`` adds for this item."""
        out: dict[str, object] = {
            "edited": self.edited,
            "deleted": self.deleted,
            "reactions": {e: list(s) for e, s in self.reactions.items()},
            "reply_to": None,
            "file": None,
        }
        if self.reply is not None:
            out["reply_to"] = {
                "id": self.reply.target_id,
                "quote": self.reply.quote,
                "present": self.reply.present,
                "sender": self.reply.target_sender,
                "name": self.reply.target_name,
            }
        if self.file is not None:
            f = self.file
            out["file"] = {
                "file_id": f.info.file_id,
                "name": f.info.name,
                "size": f.info.size,
                "sha256": f.info.sha256.hex(),
                "segments": f.present,
                "total": f.total,
                "complete": f.complete,
                "intact": f.intact,
            }
        return out


@dataclass(frozen=True, slots=True)
class _Msg:
    position: int  # order of arrival in the view (not shown)
    message_id: str
    sender_id: str
    lamport: int
    decoded: Decoded

    @property
    def key(self) -> tuple[int, str]:
        return (self.lamport, self.message_id)


_SHOWN = ("msg", "me", "raw", "reply", "file", "unsupported", *SYSTEM_KINDS)
_EDITABLE = ("msg", "me", "reply")


class ConversationView:
    """A channel's delivered messages folded into what to show (module docstring).

    ``add`` is idempotent and order-independent; ``items`` is recomputed from what
    was added (cheap: one sort), so a TUI may call it after every delivery.
    """

    def __init__(
        self, messages: Iterable[tuple[str, str, int, bytes]] = (), *, keep_file_data: bool = True
    ) -> None:
        #: without file data, segments are counted (progress) but ``intact`` stays
        #: ``None`` and files cannot be saved: for views that only show or resolve ids
        self.keep_file_data = keep_file_data
        self._by_id: dict[str, _Msg] = {}
        # target id -> ops (reactions, edits, deletes) naming it
        self._ops: dict[str, list[_Msg]] = {}
        # (sender id, file id) -> segment index -> data
        # (sender id, file id) -> segment index -> ((lamport, id), data): when an author
        # sent two segments with one index, the first in SDS order counts (on everyone)
        self._segments: dict[tuple[str, str], dict[int, tuple[tuple[int, str], bytes]]] = {}
        self._intact: dict[tuple[str, str], bool] = {}
        for m in messages:
            self.add(*m)

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, message_id: str, sender_id: str, lamport: int, content: bytes) -> Decoded:
        """Add one delivered message; returns it decoded."""
        known = self._by_id.get(message_id)
        if known is not None:
            return known.decoded
        d = decode(content)
        if d.kind == "segment" and not self.keep_file_data:
            d = dataclasses.replace(d, segment_data=b"")
        m = _Msg(len(self._by_id), message_id, sender_id, lamport, d)
        self._by_id[message_id] = m
        if d.kind in ("reaction", "edit", "delete") and d.target_id is not None:
            self._ops.setdefault(d.target_id, []).append(m)
        elif d.kind == "segment" and d.target_id is not None:
            file_key = (sender_id, d.target_id)
            segs = self._segments.setdefault(file_key, {})
            old = segs.get(d.segment_index)
            if old is None or m.key < old[0]:
                segs[d.segment_index] = (m.key, d.segment_data if self.keep_file_data else b"")
                self._intact.pop(file_key, None)
        return d

    def resolve(self, ref: str) -> str:
        """The id of the delivered message that ``ref`` names: a full id or a unique
        prefix of at least 4 hex characters (as ``sdschat history`` and the events show).

        Raises:
            ValueError: ``ref`` is not hex, too short, unknown or ambiguous.
        """
        ref = ref.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{4,64}", ref):
            raise ValueError(f"not a message id or id prefix (4+ hex characters): {ref!r}")
        if ref in self._by_id:
            return ref
        found = [i for i in self._by_id if i.startswith(ref)]
        if not found:
            raise ValueError(f"no message {ref} in this channel")
        if len(found) > 1:
            raise ValueError(f"{ref} names {len(found)} messages: give more characters")
        return found[0]

    def get(self, message_id: str) -> Decoded | None:
        """The decoded content of a delivered message, ``None`` if not (yet) here."""
        m = self._by_id.get(message_id)
        return None if m is None else m.decoded

    def sender_of(self, message_id: str) -> str | None:
        m = self._by_id.get(message_id)
        return None if m is None else m.sender_id

    @property
    def topic(self) -> str | None:
        """The channel's current topic (the latest ``topic`` in SDS order that its
        author did not delete; ``None`` when never set, ``""`` when cleared)."""
        topics = [
            m
            for m in self._by_id.values()
            if m.decoded.kind == "topic" and not self._state(m)[2]  # deleted by its author
        ]
        if not topics:
            return None
        latest = max(topics, key=lambda m: m.key)
        return latest.decoded.text

    def _state(self, m: _Msg) -> tuple[str, bool, bool, dict[str, tuple[str, ...]]]:
        """(current text, edited, deleted, reactions) of a shown message."""
        ops = sorted(self._ops.get(m.message_id, ()), key=lambda o: o.key)
        text, edited, deleted = m.decoded.text, False, False
        # the TUI's fold (app/tui/model.py apply_effects): a reaction adds its author
        # once, taking it back removes them; emojis in the order first used
        reactions: dict[str, list[str]] = {}
        for op in ops:
            k = op.decoded.kind
            if k == "delete" and op.sender_id == m.sender_id:
                deleted = True
            elif k == "edit" and op.sender_id == m.sender_id and m.decoded.kind in _EDITABLE:
                text, edited = op.decoded.text, True
            elif k == "reaction":
                who = reactions.setdefault(op.decoded.emoji, [])
                if op.decoded.remove:
                    if op.sender_id in who:
                        who.remove(op.sender_id)
                elif op.sender_id not in who:
                    who.append(op.sender_id)
        folded = {} if deleted else {e: tuple(w) for e, w in reactions.items() if w}
        return ("" if deleted else text), edited and not deleted, deleted, folded

    def _file_status(self, m: _Msg) -> FileStatus | None:
        info = m.decoded.file
        if info is None:
            return None
        key = (m.sender_id, info.file_id)
        segs = self._segments.get(key, {})
        present = sum(1 for i in segs if 0 <= i < info.segment_count)
        complete = present == info.segment_count
        intact: bool | None = None
        if complete and self.keep_file_data:
            intact = self._intact.get(key)
            if intact is None:
                intact = hashlib.sha256(self.file_bytes_unchecked(m.message_id)).digest() == (
                    info.sha256
                )
                self._intact[key] = intact
        return FileStatus(info, present, info.segment_count, complete, intact)

    def file_bytes_unchecked(self, message_id: str) -> bytes:
        """The segments of the file announced by ``message_id`` joined in order (only
        the manifest author's segments count), without checking completeness."""
        m = self._by_id[message_id]
        info = m.decoded.file
        if info is None:
            raise KeyError(f"{message_id} is not a file")
        segs = self._segments.get((m.sender_id, info.file_id), {})
        data = b"".join(segs[i][1] if i in segs else b"" for i in range(info.segment_count))
        return data[: info.size]

    def file_status(self, message_id: str) -> FileStatus | None:
        """The reassembly of the file announced by ``message_id`` (``None`` if it is
        not a delivered file manifest)."""
        m = self._by_id.get(message_id)
        return None if m is None else self._file_status(m)

    def items(self) -> list[ViewItem]:
        """What to show, in SDS order (see :class:`ViewItem`)."""
        shown = sorted(
            (m for m in self._by_id.values() if m.decoded.kind in _SHOWN), key=lambda m: m.key
        )
        out: list[ViewItem] = []
        for m in shown:
            d = m.decoded
            text, edited, deleted, reactions = self._state(m)
            reply = None
            if d.kind == "reply" and d.target_id is not None:
                reply = self._reply_ref(d.target_id)
            out.append(
                ViewItem(
                    position=len(out),
                    message_id=m.message_id,
                    sender_id=m.sender_id,
                    name=d.name,
                    lamport=m.lamport,
                    kind=d.kind,
                    text=text,
                    original=d.text,
                    edited=edited,
                    deleted=deleted,
                    reply=reply,
                    reactions=reactions,
                    file=None if deleted else self._file_status(m),
                )
            )
        return out

    def _reply_ref(self, target_id: str) -> ReplyRef:
        t = self._by_id.get(target_id)
        if t is None:
            return ReplyRef(target_id, "", False)
        text, _e, deleted, _r = self._state(t)
        quote = "message deleted" if deleted else make_quote(text)
        return ReplyRef(target_id, quote, True, t.sender_id, t.decoded.name)
