"""The values storage accepts and returns: frozen dataclasses, one per kind of row.

Nothing here touches the database. The node converts the core's objects into
these (and back); storage never imports :mod:`sds`.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from dataclasses import dataclass
from enum import StrEnum

from .errors import ValueOutOfRangeError

#: SQLite integers are signed 64-bit. SDS Lamport timestamps are uint64 on the
#: wire but in practice wall-clock milliseconds (~2**41 today), so they are
#: stored as INTEGER and anything above this bound is refused with
#: :class:`~storage.errors.ValueOutOfRangeError` rather than silently wrapped.
MAX_LAMPORT = 2**63 - 1

#: A position in a channel's log: ``(lamport, message_id)``. The log's SDS order
#: is ascending by this pair (ties on Lamport broken by message id).
Cursor = tuple[int, str]

#: What a damaged row's content reads as (``LogEntry.damaged`` is True): never the
#: damaged bytes. Raw (not chat-content JSON), so a UI shows it as a plain line.
DAMAGED_CONTENT = (
    b"[damaged in storage: this message's stored bytes failed their check; "
    b"run sdschat doctor]"
)

_DIGEST_PERSON = b"sdschat-row-v1"
_LAMPORT = struct.Struct(">Q")

_TAG_RAW_IDS = 0x01
_TAG_JSON_IDS = 0x02


class OwnState(StrEnum):
    """Where one of our own messages stands. Others' messages have no state (``None``)."""

    QUEUED = "queued"
    """Produced by the core and recorded, not yet handed to the transport."""
    SENT = "sent"
    """Handed to the transport at least once."""
    POSSIBLY_ACKNOWLEDGED = "possibly_acknowledged"
    """Seen in someone's bloom filter, not yet enough for certainty."""
    ACKNOWLEDGED = "acknowledged"
    """Seen in someone's causal history (or enough bloom-filter hits)."""
    FAILED = "failed"
    """The core gave up resending it."""


#: First bytes of a typed ``Content`` (``app/chat/content.proto``: the 0xFF magic, then
#: field 1 = version 1); a file segment is its field 20 (``file_segment``), whose
#: field 1 is the file id. Storage indexes segment rows by that id (``messages.file_id``)
#: so that a file's segments are found without reading the log.
_CONTENT_MAGIC = b"\xff\x08"
_SEGMENT_FIELD = 20
_FILE_ID_MAX = 64


def segment_file_id(content: bytes) -> str | None:
    """The file id a stored file segment names (``None`` for any other content).

    Parsed with the protobuf library's own wire decoder (the fields of a message it
    does not know become unknown fields), so storage needs neither the app's schema
    nor a codec of its own; ``tests/app/test_file_index.py`` pins it to
    ``app.chat.files.split_file``. Malformed bytes give ``None``.
    """
    if content[:2] != _CONTENT_MAGIC or len(content) < 4:
        return None
    from google.protobuf import empty_pb2, unknown_fields
    from google.protobuf.message import DecodeError

    def field(data: bytes, number: int) -> object:
        fields = unknown_fields.UnknownFieldSet(empty_pb2.Empty.FromString(data))
        for i in range(len(fields)):
            if fields[i].field_number == number and fields[i].wire_type == 2:
                return fields[i].data
        return None

    try:
        segment = field(content[1:], _SEGMENT_FIELD)
        file_id = field(segment, 1) if isinstance(segment, bytes) else None
    except (DecodeError, ValueError, RuntimeError):
        return None
    if not isinstance(file_id, bytes) or not 0 < len(file_id) <= _FILE_ID_MAX:
        return None
    try:
        return file_id.decode("ascii")
    except UnicodeDecodeError:
        return None


def check_lamport(lamport: int) -> int:
    """Return ``lamport`` if SQLite can store it, else raise :class:`ValueOutOfRangeError`."""
    if not 0 <= lamport <= MAX_LAMPORT:
        raise ValueOutOfRangeError(
            f"Lamport timestamp {lamport} is outside 0..2**63-1 and cannot be stored"
        )
    return lamport


def message_digest(
    channel: str, message_id: str, sender_id: str, lamport: int, content: bytes
) -> bytes:
    """The 16-byte check stored with each message row (BLAKE2b over its immutable fields).

    Covers what a reader shows and orders by: channel, id, author, Lamport time
    and content. A byte flipped in any of them (or in the digest) makes the row
    read as damaged instead of as another text. Not a signature: it detects
    damage to the file, not a forger with write access to it.
    """
    h = hashlib.blake2b(digest_size=16, person=_DIGEST_PERSON)
    for text in (channel, message_id, sender_id):
        raw = text.encode("utf-8", "surrogatepass")
        h.update(_LAMPORT.pack(len(raw)))
        h.update(raw)
    h.update(_LAMPORT.pack(lamport & 0xFFFFFFFFFFFFFFFF))
    h.update(content)
    return h.digest()


def recent_checksum(causal_history: bytes | None, envelope: bytes | None) -> int:
    """The CRC-32 stored with a ``recent`` row (schema 5): its encoded causal history,
    then its envelope (an absent one counts as no bytes, told apart by a marker).

    A damage check, not a signature (as :func:`message_digest`): CRC-32 finds every
    flipped byte, at ~6 µs for a 40 KB envelope (BLAKE2b: ~28 µs), on every message
    a node stores.
    """
    crc = zlib.crc32(b"" if causal_history is None else bytes(causal_history))
    if envelope is None:
        return zlib.crc32(b"\x00", crc)
    return zlib.crc32(bytes(envelope), zlib.crc32(b"\x01", crc))


def encode_causal_history(ids: tuple[str, ...] | list[str]) -> bytes:
    """Pack a causal history (message ids) compactly.

    Ids that are all 64 lowercase hex characters (every sdschat and js-waku id)
    become ``0x01`` followed by their 32-byte binary forms, concatenated: half
    the size of the text. Any other ids (SDS treats ids as opaque strings) are
    kept exactly, as ``0x02`` followed by a JSON array. Empty is ``b""``.
    """
    if not ids:
        return b""
    # One C-speed pass instead of a regex per id: the ids are 64 characters each
    # and the joined text survives hex -> bytes -> hex unchanged (so lowercase
    # hex only; fromhex's tolerated spaces or upper case fail the round trip).
    if set(map(len, ids)) == {64}:  # (a generator over the ids is twice as slow)
        joined = "".join(ids)
        try:
            raw = bytes.fromhex(joined)
        except ValueError:
            raw = b""
        if raw.hex() == joined:
            return bytes([_TAG_RAW_IDS]) + raw
    return bytes([_TAG_JSON_IDS]) + json.dumps(list(ids), separators=(",", ":")).encode()


def decode_causal_history(blob: bytes | None) -> tuple[str, ...]:
    """Inverse of :func:`encode_causal_history`."""
    if not blob:
        return ()
    tag, body = blob[0], blob[1:]
    if tag == _TAG_RAW_IDS:
        if len(body) % 32:
            raise ValueError("raw causal history is not a whole number of 32-byte ids")
        return tuple(body[i : i + 32].hex() for i in range(0, len(body), 32))
    if tag == _TAG_JSON_IDS:
        ids = json.loads(body)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError("JSON causal history is not a list of strings")
        return tuple(ids)
    raise ValueError(f"unknown causal history encoding tag {tag:#x}")


@dataclass(frozen=True, slots=True)
class Identity:
    """Who this data directory is.

    The private key lives in a mode-0600 file managed by ``net/identity.py``;
    ``key_file`` records where (a path, relative to the data directory or
    absolute), never the key itself.
    """

    display_name: str
    sender_id: str
    public_key: bytes
    key_file: str | None = None


@dataclass(frozen=True, slots=True)
class Channel:
    """A channel this node has joined (``left_at`` is set once it left)."""

    name: str
    topic: bytes
    is_public: bool
    joined_at: int
    left_at: int | None = None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message of a channel's log, with everything needed to repair or re-serve it.

    ``state`` is set for our own messages only. ``received_at`` defaults to the
    commit's wall-clock time when ``None``. ``envelope`` is the exact bytes
    sent or received (for repair and store-peer service). ``was_lost``: it arrived
    after the protocol had declared it lost (``MessageDelivered.was_lost``).
    ``recovered``: it arrived late (named missing before it came, declared lost, or
    older than a message of its author that came first; ``app/node/late_arrivals.py``).
    ``missing_before``: dependencies declared lost before it was delivered
    (``MessageDelivered.missing_before``, 0 or more).
    """

    channel: str
    message_id: str
    sender_id: str
    lamport: int
    content: bytes
    causal_history: tuple[str, ...] = ()
    retrieval_hint: bytes | None = None
    envelope: bytes | None = None
    state: OwnState | None = None
    delivered_at: int | None = None
    received_at: int | None = None
    was_lost: bool = False
    recovered: bool = False
    missing_before: int = 0

    def __post_init__(self) -> None:
        check_lamport(self.lamport)
        if not isinstance(self.missing_before, int) or self.missing_before < 0:
            raise ValueError(f"missing_before must be an int >= 0, not {self.missing_before!r}")
        if self.state is not None and not isinstance(self.state, OwnState):
            object.__setattr__(self, "state", OwnState(self.state))

    @property
    def cursor(self) -> Cursor:
        """This message's position in SDS order."""
        return (self.lamport, self.message_id)


@dataclass(frozen=True, slots=True)
class LogEntry:
    """A message as the log views show it (no envelope, no history: those are large).

    ``damaged`` is True when the stored row fails its digest (file damage): its
    ``content`` is then :data:`DAMAGED_CONTENT`, never the damaged bytes.
    ``was_lost`` is True when it arrived after the protocol had declared it lost
    (a UI marks it recovered, as it did when it came); ``recovered`` when it arrived
    late (``↺ recovered``; also true when ``was_lost``); ``missing_before`` counts
    the dependencies declared lost before it (a UI says "N messages lost" above it).
    """

    channel: str
    message_id: str
    sender_id: str
    lamport: int
    content: bytes
    state: OwnState | None
    delivered_at: int | None
    received_at: int
    damaged: bool = False
    was_lost: bool = False
    recovered: bool = False
    missing_before: int = 0

    @property
    def cursor(self) -> Cursor:
        """This message's position in SDS order; pass it as ``before``/``after`` to page."""
        return (self.lamport, self.message_id)


@dataclass(frozen=True, slots=True)
class PendingMessage:
    """A message a person typed that the core has not yet turned into an SDS message."""

    local_id: int
    channel: str
    content: bytes
    created_ms: int


@dataclass(frozen=True, slots=True)
class EventRow:
    """One core event, flattened for the append-only event log (see ``storage.events.event_row``).

    ``detail`` is a JSON object (text) with the event's remaining fields.
    """

    wall_ms: int
    kind: str
    channel: str | None = None
    message_id: str | None = None
    sender_id: str | None = None
    lamport: int | None = None
    size_bytes: int | None = None
    detail: str = "{}"


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An :class:`EventRow` as read back, with its position ``id`` in the log (1, 2, ...)."""

    id: int
    wall_ms: int
    kind: str
    channel: str | None
    message_id: str | None
    sender_id: str | None
    lamport: int | None
    size_bytes: int | None
    detail: str


@dataclass(frozen=True, slots=True)
class ArchivedEnvelope:
    """An envelope kept by a store peer, keyed by its hash (the SDS retrieval hint).

    ``writer`` is whom the store attributes it to, for fair eviction
    (``net/store_peer.py``): ``b"k"`` + the verified signer's public key, ``b"h"`` +
    the host that sent it in a ``Put``, or ``b""`` (unattributed). Not read back by
    queries (``range``, ``get_by_hashes`` return ``b""``).
    """

    hash: bytes
    topic: bytes
    arrival_ms: int
    envelope: bytes
    writer: bytes = b""

    @property
    def cursor(self) -> tuple[int, bytes]:
        """Position in a topic's archive: ``(arrival_ms, hash)``."""
        return (self.arrival_ms, self.hash)
