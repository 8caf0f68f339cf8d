"""Message ids a receiver can verify from the message itself.

An SDS ``message_id`` is an opaque 64-character lowercase hex string on the wire
(PROTOCOL.md "Message ids"). If a receiver cannot check it, a member can copy a
genuine message's id, timestamp and history, sign the copy with her own key and
other text, and whoever receives the copy first keeps it and drops the genuine
message as a duplicate. So every id is checked against what the message says.

Two id forms are accepted:

``sdschat``
    ``hex(nonce) + hex(sha256(DOMAIN, channel_id, sender_id, lamport, nonce,
    content)[:24])``: an 8-byte random nonce (16 hex characters) followed by 24
    bytes (48 hex characters) of the digest; every field is length-prefixed
    (4 bytes, big-endian) and the content comes last. The nonce travels inside
    the id itself, so the id stays 64 lowercase hex characters, the SDS schema
    is unchanged (js-waku reads and, when it answers a repair request,
    re-encodes our messages without losing anything), and a receiver recomputes
    the digest from the message's own fields. The ``sender_id`` is bound to the
    signing key by the envelope (``net/envelope.py``: ``sender_mismatch``), so
    the id names one author, one Lamport timestamp and one content. Forging
    another message under the same id takes a second preimage of 192 bits.
    The nonce keeps two messages with equal content and timestamp apart (the
    same key on two data directories).
``waku``
    ``hex(sha256(content))``, js-waku's ids (``@waku/sds``). The content is bound
    but not the author: two members typing the same text get one id. A second
    message under an id we hold, from another author, is a *conflict*
    (:class:`~sds.events.MessageConflict`), reported, never resolved silently.

Only content messages are checked (sync messages carry random ids and are never
stored; ephemeral messages are never stored either). The core checks when
``Config.verify_message_ids`` is on (sdschat's node turns it on).
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "ID_NONCE_BYTES",
    "id_form",
    "message_id_for",
    "verify_message_id",
]

ID_NONCE_BYTES = 8
"""Random bytes at the front of an sdschat id (16 hex characters)."""

_DIGEST_BYTES = 24
_DOMAIN = b"sdschat-message-id-v1"
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _digest(channel_id: str, sender_id: str, lamport: int, nonce: bytes, content: bytes) -> bytes:
    h = hashlib.sha256()
    for part in (_DOMAIN, channel_id.encode(), sender_id.encode(), str(lamport).encode(), nonce):
        h.update(len(part).to_bytes(4, "big"))
        h.update(part)
    h.update(content)
    return h.digest()[:_DIGEST_BYTES]


def message_id_for(
    channel_id: str, sender_id: str, lamport: int, content: bytes, nonce: bytes
) -> str:
    """The sdschat id of a message: 64 lowercase hex characters (see the module docstring).

    Raises:
        ValueError: ``nonce`` is not :data:`ID_NONCE_BYTES` bytes.
    """
    if len(nonce) != ID_NONCE_BYTES:
        raise ValueError(f"an id nonce is {ID_NONCE_BYTES} bytes, got {len(nonce)}")
    return nonce.hex() + _digest(channel_id, sender_id, lamport, nonce, content).hex()


def id_form(
    message_id: str, channel_id: str, sender_id: str, lamport: int, content: bytes
) -> str | None:
    """``"sdschat"`` or ``"waku"`` if ``message_id`` is right for these fields, else ``None``.

    Never raises, whatever the strings.
    """
    if len(message_id) != 64 or _HEX64.fullmatch(message_id) is None:
        return None
    # sdschat's form first: one pass over the content for our own peers' messages
    nonce = bytes.fromhex(message_id[: 2 * ID_NONCE_BYTES])
    digest = _digest(channel_id, sender_id, lamport, nonce, content)
    if digest.hex() == message_id[2 * ID_NONCE_BYTES :]:
        return "sdschat"
    if hashlib.sha256(content).hexdigest() == message_id:
        return "waku"
    return None


def verify_message_id(
    message_id: str, channel_id: str, sender_id: str, lamport: int, content: bytes
) -> bool:
    """True if ``message_id`` is the sdschat or the js-waku id of these fields."""
    return id_form(message_id, channel_id, sender_id, lamport, content) is not None
