"""Sealing SDS messages into authenticated, encrypted envelopes and opening them.

Wire format: ``Envelope`` and ``SealedPayload`` in ``net/envelope.proto``.

Sealing ``sds`` (the serialised SDS message) for a channel::

    signature  = Ed25519.sign(b"sdschat-v2" + topic + SHA-256(sds))
    plaintext  = SealedPayload(sds, sender_public_key, signature, carried = [envelope, ...])
    aad        = b"sdschat-envelope" + uint32_be(version) + topic
    ciphertext = ChaCha20Poly1305(channel_key).encrypt(nonce = 12 random bytes, plaintext, aad)
    envelope   = Envelope(version = 2, topic, nonce, ciphertext)

The signature covers a 32-byte SHA-256 digest of the SDS bytes, not the
bytes themselves, so that signing and verifying cost the same whatever the
message size (Ed25519 hashes its whole input with SHA-512, twice when
signing: over a default 45 KB message that was most of the cost of opening
an envelope). This is as strong as signing the bytes because SHA-256 is
collision resistant: a signature that verifies for ``sds`` verifies for
``sds'`` only if ``SHA-256(sds) == SHA-256(sds')``, and finding such a pair
(even for the signer) is infeasible. The signed message is domain-separated
(``b"sdschat-v2"``, distinct from version 1's ``b"sdschat-v1"``) and binds the
topic, so a signature cannot be replayed into another channel or read under
the other scheme.

Version 1 (``b"sdschat-v1" + topic + sds``, the whole SDS bytes signed) is
no longer accepted: it is rejected as ``unsupported_version`` like any other
version. sdschat had no release with version 1, so there are no stored
envelopes or peers to migrate; the version is in the AEAD associated data,
so it cannot be changed without failing authentication.

Opening checks, in this order, and raises the matching :class:`EnvelopeError`
subclass (its ``reason`` is stable, for counting and logs):

=====================  ==========================================================
``oversized``          more than :data:`MAX_ENVELOPE_BYTES` bytes (checked first,
                       before any parsing)
``malformed``          not an Envelope, or not its canonical encoding (fields 1-4
                       in order, no unknown or repeated fields); nonce not 12
                       bytes; after decryption, not a SealedPayload, a public key
                       not 32 bytes, or SDS bytes that do not decode as
                       ``sds.SdsMessage`` (only decoded when the caller does not
                       pass the SDS ``sender_id``)
``unsupported_version`` ``version`` other than :data:`ENVELOPE_VERSION`
``wrong_topic``        ``topic`` differs from the expected topic
``wrong_key_or_tampered`` AEAD authentication failed (wrong channel key, or any
                       bit of topic/version/nonce/ciphertext changed)
``bad_signature``      the Ed25519 signature does not verify
``sender_mismatch``    the SDS ``sender_id`` is not ``sender_id_for(public key)``
=====================  ==========================================================

``replayed`` (:class:`ReplayedEnvelope`) is raised by :class:`ReplayGuard`, not by
:func:`open_envelope`: only the node knows what it has already delivered. (sdschat's
node counts such a copy as a duplicate, not a rejection: the same bytes again are
verified and harmless, and an honest sender republishes them after a restart.)

Carried envelopes (``SealedPayload.carried``, at most :data:`MAX_CARRIED`; more is
``malformed``) are other members' envelopes of the same channel riding on this one,
byte for byte as their authors sealed them. :func:`open_envelope` returns them
unopened in ``Opened.carried``; the receiver opens each as if it had arrived alone.
Why this is safe: a carried envelope passes every check above on its own (its own
AEAD under a channel key, its author's signature over its own SDS bytes, the replay
guard); the carrier adds nothing a member could not already do by republishing the
same bytes, and its own signature covers only its own SDS bytes. Only a key holder
can put bytes inside the ciphertext, so an outsider cannot add or strip any.

No other exception escapes :func:`open_envelope`, whatever the input bytes.
The envelope hash (``sha256`` of the envelope bytes as received) is the SDS
retrieval hint of the message inside.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from net import envelope_pb2
from net.channel_key import KEY_BYTES, ChannelKey, topic_for_key
from net.errors import NetError
from net.identity import PUBLIC_KEY_BYTES, Identity, sender_id_for, verify_signature
from sds import sds_pb2

__all__ = [
    "ENVELOPE_VERSION",
    "MAX_CARRIED",
    "MAX_ENVELOPE_BYTES",
    "NONCE_BYTES",
    "REJECTION_REASONS",
    "BadSignature",
    "EnvelopeError",
    "MalformedEnvelope",
    "Opened",
    "OversizedEnvelope",
    "ReplayGuard",
    "ReplayedEnvelope",
    "SenderMismatch",
    "UnsupportedVersion",
    "WrongKeyOrTampered",
    "WrongTopic",
    "envelope_hash",
    "open",
    "open_envelope",
    "open_for_topic",
    "peek_topic",
    "seal",
    "without_carried",
]

ENVELOPE_VERSION = 2
"""The envelope format version this module writes and accepts (the only one).

Version 2 signs ``SHA-256(sds)``; version 1 signed the whole SDS bytes and is
rejected (never released; see the module docstring).
"""

MAX_ENVELOPE_BYTES = 256 * 1024
"""Largest envelope accepted or produced: 256 KiB.

A default SDS message (200 history entries, 18.75 KB bloom filter) is about
40 KB, and sealing adds about 130 bytes, so this leaves room for long content
while bounding what a peer can make us allocate, decrypt and verify.
"""

NONCE_BYTES = 12
"""ChaCha20-Poly1305 nonce length."""

MAX_CARRIED = 8
"""Most envelopes one envelope may carry (``SealedPayload.carried``); more is
refused as malformed. sdschat carries at most 4 (``sds.channel.CARRY_MAX_IDS``):
the rest is room for a later version's choice."""

SIGNATURE_DOMAIN = b"sdschat-v2"
"""Prefix of the signed message: ``SIGNATURE_DOMAIN + topic + SHA-256(sds)``."""

AAD_DOMAIN = b"sdschat-envelope"
"""Prefix of the AEAD associated data: ``AAD_DOMAIN + uint32_be(version) + topic``."""


class EnvelopeError(NetError):
    """An envelope was rejected. ``reason`` is a stable short string for counters."""

    reason: ClassVar[str] = "envelope_error"

    def __init__(self, detail: str = "") -> None:
        super().__init__(f"{self.reason}: {detail}" if detail else self.reason)
        self.detail = detail


class OversizedEnvelope(EnvelopeError):
    """More than :data:`MAX_ENVELOPE_BYTES` bytes."""

    reason = "oversized"


class MalformedEnvelope(EnvelopeError):
    """Bytes that do not form a valid envelope or payload."""

    reason = "malformed"


class UnsupportedVersion(EnvelopeError):
    """An envelope version this code does not speak."""

    reason = "unsupported_version"


class WrongTopic(EnvelopeError):
    """The envelope belongs to another topic than expected."""

    reason = "wrong_topic"


class WrongKeyOrTampered(EnvelopeError):
    """AEAD authentication failed: wrong channel key or modified bytes."""

    reason = "wrong_key_or_tampered"


class BadSignature(EnvelopeError):
    """The sender's Ed25519 signature does not verify."""

    reason = "bad_signature"


class SenderMismatch(EnvelopeError):
    """The SDS ``sender_id`` is not the fingerprint of the signing key."""

    reason = "sender_mismatch"


class ReplayedEnvelope(EnvelopeError):
    """The envelope was already seen (raised by :meth:`ReplayGuard.check`)."""

    reason = "replayed"


REJECTION_REASONS: tuple[str, ...] = tuple(
    cls.reason
    for cls in (
        OversizedEnvelope,
        MalformedEnvelope,
        UnsupportedVersion,
        WrongTopic,
        WrongKeyOrTampered,
        BadSignature,
        SenderMismatch,
        ReplayedEnvelope,
    )
)
"""Every ``reason`` an :class:`EnvelopeError` can carry."""


@dataclass(frozen=True, slots=True)
class Opened:
    """A verified, decrypted envelope.

    Attributes:
        sds_bytes: the serialised SDS message, to hand to the core.
        sender_public_key: the 32-byte Ed25519 key that signed it.
        sender_id: ``sender_id_for(sender_public_key)``, equal to the SDS sender_id.
        envelope_hash: sha256 of the envelope bytes (the SDS retrieval hint).
        topic: the envelope's 16-byte topic.
        sds_message: the SDS message as decoded to read its ``sender_id``, so
            that the caller need not parse ``sds_bytes`` again; ``None`` when
            the caller passed ``sds_sender_id`` (nothing was decoded). The
            same object is not shared with anyone else: the caller may keep it.
    """

    sds_bytes: bytes
    sender_public_key: bytes
    sender_id: str
    envelope_hash: bytes
    topic: bytes
    sds_message: sds_pb2.SdsMessage | None = field(default=None, compare=False, repr=False)
    #: Envelopes of other messages this one carries (``SealedPayload.carried``),
    #: unopened: each is opened and checked on its own.
    carried: tuple[bytes, ...] = field(default=(), compare=False, repr=False)


def envelope_hash(envelope_bytes: bytes) -> bytes:
    """sha256 of the envelope bytes: the SDS retrieval hint (32 bytes)."""
    return hashlib.sha256(envelope_bytes).digest()


def _key_and_topic(channel_key: ChannelKey | bytes) -> tuple[bytes, bytes]:
    if isinstance(channel_key, ChannelKey):
        return channel_key.key, channel_key.topic
    if len(channel_key) != KEY_BYTES:
        raise ValueError(f"a channel key is {KEY_BYTES} bytes, got {len(channel_key)}")
    return bytes(channel_key), topic_for_key(channel_key)


@functools.lru_cache(maxsize=64)
def _aead(key: bytes) -> ChaCha20Poly1305:
    """The cipher object of a channel key, built once per key (a node has a few)."""
    return ChaCha20Poly1305(key)


def _aad(version: int, topic: bytes) -> bytes:
    return AAD_DOMAIN + version.to_bytes(4, "big") + topic


def _signed_message(topic: bytes, sds_bytes: bytes) -> bytes:
    """What the sender signs: ``SIGNATURE_DOMAIN + topic + SHA-256(sds_bytes)`` (58 bytes)."""
    return SIGNATURE_DOMAIN + topic + hashlib.sha256(sds_bytes).digest()


def seal(
    sds_bytes: bytes,
    identity: Identity,
    channel_key: ChannelKey | bytes,
    carried: Sequence[bytes] = (),
) -> bytes:
    """Sign, encrypt and wrap ``sds_bytes`` for the channel; returns envelope bytes.

    Args:
        sds_bytes: a serialised SDS message whose ``sender_id`` is
            ``identity.sender_id`` (receivers reject it otherwise).
        identity: the sender's key pair.
        channel_key: the channel's :class:`ChannelKey` (or its raw 32-byte key).
        carried: envelopes of other messages of the channel to carry along,
            as stored (at most :data:`MAX_CARRIED`).

    Raises:
        OversizedEnvelope: the result would exceed :data:`MAX_ENVELOPE_BYTES`.
        ValueError: a raw channel key of the wrong length, or too many carried.
    """
    if len(carried) > MAX_CARRIED:
        raise ValueError(f"{len(carried)} carried envelopes, at most {MAX_CARRIED}")
    key, topic = _key_and_topic(channel_key)
    signature = identity.sign(_signed_message(topic, sds_bytes))
    payload = envelope_pb2.SealedPayload(
        sds=sds_bytes,
        sender_public_key=identity.public_key,
        signature=signature,
        carried=carried,
    ).SerializeToString()
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = _aead(key).encrypt(nonce, payload, _aad(ENVELOPE_VERSION, topic))
    out = envelope_pb2.Envelope(
        version=ENVELOPE_VERSION, topic=topic, nonce=nonce, ciphertext=ciphertext
    ).SerializeToString()
    if len(out) > MAX_ENVELOPE_BYTES:
        raise OversizedEnvelope(f"{len(out)} bytes > {MAX_ENVELOPE_BYTES}")
    return out


def without_carried(envelope_bytes: bytes, keys: Sequence[ChannelKey]) -> bytes:
    """The same message's envelope without the envelopes it carries.

    ``envelope_bytes`` itself when it carries none; otherwise its payload (the SDS
    bytes, the author's key and signature, untouched) re-encrypted without
    ``carried`` under the key among ``keys`` that opens it, with a fresh nonce: a new
    envelope (a new hash) that opens and verifies as the author's. What a carrier
    attaches, so that carried envelopes never nest (a line carrying a line that
    carried others would carry those too, and so on). Only a key holder can do this,
    as only a key holder can seal; it changes nothing the author signed.

    Raises:
        EnvelopeError: the bytes are not an envelope, or no key opens them.
    """
    with _only_envelope_errors():
        env = _decode(envelope_bytes)
        aad = _aad(env.version, env.topic)
        for channel_key in keys:
            if channel_key.topic != env.topic:
                continue
            try:
                plaintext = _aead(channel_key.key).decrypt(env.nonce, env.ciphertext, aad)
            except InvalidTag:
                continue
            try:
                payload = envelope_pb2.SealedPayload.FromString(plaintext)
            except Exception as exc:
                raise MalformedEnvelope("not a SealedPayload") from exc
            if not payload.carried:
                return envelope_bytes
            del payload.carried[:]
            nonce = os.urandom(NONCE_BYTES)
            ciphertext = _aead(channel_key.key).encrypt(nonce, payload.SerializeToString(), aad)
            return envelope_pb2.Envelope(
                version=env.version, topic=env.topic, nonce=nonce, ciphertext=ciphertext
            ).SerializeToString()
        raise WrongKeyOrTampered("none of the keys opens it")


def peek_topic(envelope_bytes: bytes) -> bytes:
    """Read an envelope's topic without decrypting (what a relay or store does).

    Raises:
        OversizedEnvelope, MalformedEnvelope: as :func:`open_envelope`.
    """
    return _decode(envelope_bytes).topic


def open_envelope(
    envelope_bytes: bytes,
    channel_key: ChannelKey | bytes,
    expected_topic: bytes | None = None,
    *,
    sds_sender_id: str | None = None,
) -> Opened:
    """Verify and decrypt an envelope (see the module docstring for the checks).

    Args:
        envelope_bytes: the envelope exactly as received.
        channel_key: the channel's :class:`ChannelKey` (or raw 32-byte key).
        expected_topic: the topic the envelope must carry; defaults to the
            key's own topic.
        sds_sender_id: the SDS ``sender_id`` if the caller already decoded the
            SDS message; when ``None`` it is read by decoding the SDS bytes,
            and the decoded message is returned as ``Opened.sds_message``.

    Returns:
        The :class:`Opened` message; pass ``sds_bytes`` to the core and
        ``envelope_hash`` as its retrieval hint. A caller that needs the
        parsed SDS message uses ``sds_message`` (when not ``None``) rather
        than parsing ``sds_bytes`` a second time.

    Raises:
        EnvelopeError: one of its subclasses, for any problem with the bytes.
        ValueError: only for a caller error, a raw channel key that is not
            32 bytes (checked before the envelope is looked at).
    """
    key, own_topic = _key_and_topic(channel_key)
    want_topic = own_topic if expected_topic is None else expected_topic
    with _only_envelope_errors():
        return _open(envelope_bytes, key, want_topic, sds_sender_id)


@contextlib.contextmanager
def _only_envelope_errors() -> Iterator[None]:
    """Defensive: nothing but :class:`EnvelopeError` may escape opening an envelope."""
    try:
        yield
    except EnvelopeError:
        raise
    except Exception as exc:
        raise MalformedEnvelope(f"unexpected {type(exc).__name__}") from exc


open = open_envelope  # the name the design uses (shadows the builtin in this module only)


def _decode(envelope_bytes: bytes) -> envelope_pb2.Envelope:
    """Size and decoding of an envelope: what :func:`peek_topic` checks."""
    if len(envelope_bytes) > MAX_ENVELOPE_BYTES:
        raise OversizedEnvelope(f"{len(envelope_bytes)} bytes > {MAX_ENVELOPE_BYTES}")
    try:
        return envelope_pb2.Envelope.FromString(envelope_bytes)
    except Exception as exc:  # any decoder failure is "malformed"
        raise MalformedEnvelope("not an Envelope") from exc


def _check_canonical(env: envelope_pb2.Envelope, envelope_bytes: bytes) -> None:
    # Canonical form: the parsed fields, re-encoded (in field order, each once,
    # defaults omitted), must give the input back. Dropping unknown fields and
    # re-encoding ``env`` itself is the same encoding as a fresh Envelope of its
    # four fields, without copying the ciphertext into a second message.
    env.DiscardUnknownFields()
    if env.SerializeToString() != envelope_bytes:
        # Unknown or repeated fields, odd field order, padded varints: the same
        # content must have exactly one encoding, so that the envelope hash
        # (retrieval hint, replay guard key) cannot be changed by re-encoding.
        raise MalformedEnvelope("non-canonical encoding")


def _parse(envelope_bytes: bytes) -> envelope_pb2.Envelope:
    """Size, decoding and canonical form of an envelope (nothing decrypted yet)."""
    env = _decode(envelope_bytes)
    _check_canonical(env, envelope_bytes)
    return env


def _check_version(env: envelope_pb2.Envelope) -> None:
    if env.version != ENVELOPE_VERSION:
        raise UnsupportedVersion(f"version {env.version}")


def _open(
    envelope_bytes: bytes, key: bytes, want_topic: bytes, sds_sender_id: str | None
) -> Opened:
    env = _parse(envelope_bytes)
    _check_version(env)
    if env.topic != want_topic:
        raise WrongTopic(f"topic {env.topic[:16].hex()}")
    return _open_parsed(env, envelope_bytes, key, sds_sender_id)


def _open_parsed(
    env: envelope_pb2.Envelope, envelope_bytes: bytes, key: bytes, sds_sender_id: str | None
) -> Opened:
    version = env.version
    topic = env.topic
    nonce = env.nonce
    if len(nonce) != NONCE_BYTES:
        raise MalformedEnvelope(f"nonce of {len(nonce)} bytes")
    try:
        plaintext = _aead(key).decrypt(nonce, env.ciphertext, _aad(version, topic))
    except InvalidTag as exc:
        raise WrongKeyOrTampered("authentication failed") from exc
    try:
        payload = envelope_pb2.SealedPayload.FromString(plaintext)
    except Exception as exc:
        raise MalformedEnvelope("not a SealedPayload") from exc
    public_key = payload.sender_public_key
    if len(public_key) != PUBLIC_KEY_BYTES:
        raise MalformedEnvelope(f"public key of {len(public_key)} bytes")
    sds = payload.sds
    if not verify_signature(public_key, payload.signature, _signed_message(topic, sds)):
        raise BadSignature("signature does not verify")
    carried = tuple(payload.carried)
    if len(carried) > MAX_CARRIED:
        raise MalformedEnvelope(f"carries {len(carried)} envelopes, at most {MAX_CARRIED}")
    sender_id = sender_id_for(public_key)
    message: sds_pb2.SdsMessage | None = None
    if sds_sender_id is None:
        try:
            message = sds_pb2.SdsMessage.FromString(sds)
        except Exception as exc:
            raise MalformedEnvelope("SDS bytes do not decode") from exc
        sds_sender_id = message.sender_id
    if sds_sender_id != sender_id:
        raise SenderMismatch(f"SDS sender_id {sds_sender_id[:40]!r} signed by {sender_id}")
    return Opened(
        sds_bytes=sds,
        sender_public_key=public_key,
        sender_id=sender_id,
        envelope_hash=envelope_hash(envelope_bytes),
        topic=topic,
        sds_message=message,
        carried=carried,
    )


def open_for_topic(
    envelope_bytes: bytes,
    key_for_topic: Callable[[bytes], ChannelKey | Sequence[ChannelKey] | None],
) -> Opened:
    """Peek the topic, pick its key, open: for a participant in several channels.

    The envelope is decoded once; its topic picks the key (``key_for_topic``
    returns ``None`` for a topic the caller has not joined: :class:`WrongTopic`).
    Same checks and errors as :func:`peek_topic` followed by :func:`open_envelope`
    with the topic's key (so an unjoined topic is :class:`WrongTopic` whatever
    its version), and ``Opened.sds_message`` is always set. Peeking first and
    then opening would decode (and copy) the ciphertext twice.

    A members channel has one key per epoch under one topic: ``key_for_topic``
    may return several keys, tried in the order given (the current one first);
    the envelope opens with the first key whose AEAD tag verifies, and fails
    with :class:`WrongKeyOrTampered` when none does.
    """
    with _only_envelope_errors():
        env = _decode(envelope_bytes)
        found = key_for_topic(env.topic)
        keys = [found] if isinstance(found, ChannelKey) else list(found or ())
        if not keys or any(k.topic != env.topic for k in keys):
            raise WrongTopic(f"topic {env.topic[:16].hex()} is not a joined channel")
        _check_canonical(env, envelope_bytes)  # after the topic, as peek then open
        _check_version(env)
        for channel_key in keys[:-1]:
            try:
                return _open_parsed(env, envelope_bytes, channel_key.key, None)
            except WrongKeyOrTampered:
                continue
        return _open_parsed(env, envelope_bytes, keys[-1].key, None)


class ReplayGuard:
    """A bounded set of recently seen envelope hashes (least recently seen evicted).

    The node calls :meth:`check` (or :meth:`check_and_remember`) with an
    opened envelope's hash before handing it to the core, and counts
    ``ReplayedEnvelope.reason`` on a hit. The bound,
    :data:`DEFAULT_CAPACITY` = 16,384 hashes, costs about 2.5 MB at most and
    covers well over the SDS causal-history window (200) of every channel the
    node is in; older replays are still caught by the core's own dedup by
    message id, so this guard is a cheap first line, not the only one.
    """

    DEFAULT_CAPACITY: ClassVar[int] = 16_384

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, digest: object) -> bool:
        return digest in self._seen

    def remember(self, digest: bytes) -> None:
        """Record ``digest`` as seen (refreshing it if already known)."""
        seen = self._seen
        if digest in seen:
            seen.move_to_end(digest)
            return
        seen[digest] = None
        if len(seen) > self.capacity:
            seen.popitem(last=False)

    def check_and_remember(self, digest: bytes) -> bool:
        """Return True if ``digest`` is new (and remember it), False if it is a replay."""
        if digest in self._seen:
            self._seen.move_to_end(digest)
            return False
        self.remember(digest)
        return True

    def check(self, digest: bytes) -> None:
        """Remember ``digest``; raise :class:`ReplayedEnvelope` if it was already seen."""
        if not self.check_and_remember(digest):
            raise ReplayedEnvelope(f"envelope {digest[:8].hex()} already seen")

    def forget(self, digest: bytes) -> None:
        """Take ``digest`` back: its envelope was refused for now (the core will
        accept it later, e.g. once our clock has caught up), so its resend is not
        a replay."""
        self._seen.pop(digest, None)
