"""Write proofs: a store archives a topic's envelopes only from those who hold its key.

A store peer holds no channel key and cannot open an envelope, so it cannot
tell an envelope sealed by a member from garbage published on the same topic
by anyone who knows the topic (the audit emptied a store this way). For a
topic given a write key (``sdschat store --write-key TOPIC:KEY``), the store
archives only envelopes sent with a *write proof*:

    write_key = HKDF-SHA256(ikm = channel key, salt = b"sdschat-store-write-v1",
                            info = topic, length = 32)
    proof     = HMAC-SHA256(write_key, b"sdschat-store-put-v1" + topic
                            + SHA-256(envelope))[:16]

A node sends its own envelopes of such a topic to the store with ``Put``
(``net/store.proto``), each with its proof; the store recomputes the proof
with the write key and refuses a mismatch (``bad_proof``); it refuses that
topic's envelopes arriving from relays or the LAN (``unproven``), which carry
no proof.

Security argument (HKDF and HMAC from ``cryptography``, nothing hand-rolled):

* Only channel-key holders can make a proof. HKDF-SHA256 is a PRF keyed by
  the channel key, so the write key is indistinguishable from random to
  anyone without the channel key, and HMAC-SHA256 under a random key is a PRF
  too: without the write key, a valid 128-bit tag for a new envelope hash
  can be guessed with probability 2^-128 per try.
* A proof is bound to one envelope of one topic: it covers the topic and
  the SHA-256 of the envelope bytes (collision resistant), so it cannot be
  moved to other bytes or another topic; sending the same envelope again is
  a duplicate the store ignores. The domain strings keep the write key and
  the proofs apart from every other use of the channel key (the topic and the
  AEAD key are derived differently, ``net/channel_key.py``).
* The store learns nothing that opens envelopes: the write key is a one-way
  function of the channel key (HKDF), so holding it neither decrypts nor
  signs anything, nor reveals the channel key. Whoever holds it can write
  into that store's archive only, which is the store operator's anyway.
* What it does not give: members share the channel key, so a proof says
  "a member", not which one; a member can still fill the archive (per-sender
  fairness needs per-sender keys). For a public channel (no passphrase) the
  key, hence the write key, is derivable by anyone from the name: a write
  key there proves nothing, and ``sdschat store`` refuses one for a public
  channel it archives by name.

**Members channels** have a key per epoch (every removal starts one, and a
newcomer gets the keys of all earlier epochs). Their write key is that of one
epoch key: ``write_key(epoch key, topic)``; ``sdschat store --print-write-key
CHANNEL --member-dir DIR`` prints the one of the current epoch from a member's
data directory. A store may hold several write keys of a topic (one per
``--write-key``) and lists their ids in ``Info.proven_key_ids``
(:func:`key_id`: ``SHA-256("sdschat-store-write-key-id-v1" || write key)[:8]``,
which reveals nothing of the key); a node proves each own envelope with the
write key of whichever of its epoch keys has a listed id. So the operator cuts
a removed member out of the archive by giving the store the write key of an
epoch after the removal (the removed member never held that epoch key, so it
can neither compute the write key nor guess a proof) and dropping the older
one; the nodes follow by themselves. Until the operator does, the removed
member, which kept the older epoch keys, can still put envelopes that are
attributed to its host like anyone else's (docs/security.md).
"""

from __future__ import annotations

import hashlib
import hmac as std_hmac

from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = [
    "KEY_ID_BYTES",
    "PROOF_BYTES",
    "WRITE_KEY_BYTES",
    "key_id",
    "make_proof",
    "parse_write_key",
    "proof_checks",
    "write_key",
]

WRITE_KEY_BYTES = 32
"""Length of a topic's write key."""

PROOF_BYTES = 16
"""Length of a write proof (a truncated HMAC-SHA256)."""

KEY_ID_BYTES = 8
"""Length of a write key's id (``Info.proven_key_ids``)."""

_SALT = b"sdschat-store-write-v1"
_DOMAIN = b"sdschat-store-put-v1"
_KEY_ID = b"sdschat-store-write-key-id-v1"


def write_key(channel_key: bytes, topic: bytes) -> bytes:
    """The write key of ``topic``: HKDF-SHA256 of the channel key (see the module docstring)."""
    if len(channel_key) != 32:
        raise ValueError("a channel key is 32 bytes")
    return HKDF(
        algorithm=hashes.SHA256(), length=WRITE_KEY_BYTES, salt=_SALT, info=topic
    ).derive(channel_key)


def key_id(key: bytes) -> bytes:
    """The public id of a write key (a truncated SHA-256 under its own domain): what a
    store lists so that a node knows which of its keys to prove with."""
    return hashlib.sha256(_KEY_ID + key).digest()[:KEY_ID_BYTES]


def make_proof(key: bytes, topic: bytes, envelope: bytes) -> bytes:
    """The write proof of ``envelope`` (of ``topic``) under the topic's write ``key``."""
    mac = hmac.HMAC(key, hashes.SHA256())
    mac.update(_DOMAIN + topic + hashlib.sha256(envelope).digest())
    return mac.finalize()[:PROOF_BYTES]


def proof_checks(key: bytes, topic: bytes, envelope: bytes, proof: bytes) -> bool:
    """Whether ``proof`` is the write proof of ``envelope`` (constant-time comparison)."""
    return len(proof) == PROOF_BYTES and std_hmac.compare_digest(
        make_proof(key, topic, envelope), proof
    )


def parse_write_key(text: str) -> tuple[bytes, bytes]:
    """``TOPIC_HEX:KEY_HEX`` (what ``sdschat store --print-write-key`` prints) ->
    ``(topic, write key)``.

    Raises:
        ValueError: not two hex fields, a topic not 1 to 64 bytes, a key not 32 bytes.
    """
    topic_hex, sep, key_hex = text.strip().partition(":")
    try:
        topic, key = bytes.fromhex(topic_hex), bytes.fromhex(key_hex)
    except ValueError:
        topic, key = b"", b""
    if not sep or not 1 <= len(topic) <= 64 or len(key) != WRITE_KEY_BYTES:
        raise ValueError(
            "--write-key must be TOPIC_HEX:KEY_HEX (a topic, then a 32-byte key in hex; "
            "sdschat store --print-write-key CHANNEL prints it)"
        )
    return topic, key
