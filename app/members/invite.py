"""Invite codes of a members channel, and the handshake that redeems one.

An admin makes a one-line **invite code** (:func:`make_invite`, :func:`encode_invite`)
holding what a newcomer needs: the relay URLs (none: the LAN), the channel name, the
channel's 32-byte id, a single-use 32-byte random secret and an expiry (24 h by
default). The code is ``sdschat-invite:`` followed by lowercase RFC 4648 base32 (no
padding) of a protobuf :class:`Invite` (``app/members/invite.proto``, version field
first) with a 4-byte checksum appended, so a typo is found by :func:`decode_invite`
before anything is joined. Pasted codes may hold spaces and line breaks, in any case.

Redemption (pure message construction and checking; the node carries the bytes):

* From the secret, HKDF-SHA256 derives with distinct labels a 16-byte routing
  **topic** (:func:`invite_topic`; the admin's node listens there while the invite is
  open), a 32-byte ChaCha20-Poly1305 **key** (:func:`invite_key`) and the invite's
  16-byte **id** (:func:`invite_id`, what the roster records to enforce single use).
  The secret itself never travels.
* The newcomer sends :func:`make_join_request`: its identity key, its X25519 key,
  its display name, the invite id and the time, signed by its identity under a
  domain label, then encrypted with the invite key. The admin's node opens it with
  :func:`open_join_request`, which checks all of it.
* The admin answers with :func:`make_join_accepted` (channel name, channel key,
  channel id, relays, admin key) or :func:`make_join_refused` (``used``,
  ``expired``, ``refused``): signed by the admin's identity, sealed to the
  newcomer's X25519 key (libsodium sealed box), bound to the request's digest,
  then encrypted with the invite key. The newcomer opens it with
  :func:`open_join_answer`.

Everything here is pure: no clock (``now_ms`` is an argument), no I/O; random bytes
come from ``rng`` (default :func:`os.urandom`) except inside libsodium's sealed box.
Bad input raises :class:`InviteError` (codes) or :class:`JoinError` (handshake),
each with a stable ``reason`` and a message for people. The security argument is in
docs/members.md ("Invite codes").

Typical use::

    invite = make_invite("ops", channel_id, ["wss://relay.example:8765"], now_ms=now)
    code = encode_invite(invite)                     # give it to the newcomer
    # newcomer
    invite = decode_invite(code); check_not_expired(invite, now)
    box = make_join_request(invite, identity, x_priv.public_key.encode(), "bob", now)
    # admin's node, on invite_topic(invite.secret)
    request = open_join_request(invite, box, now)    # JoinError.reason on refusal
    answer = make_join_accepted(invite, request, admin_identity, channel_key, now)
    # newcomer
    outcome = open_join_answer(invite, answer, x_priv, identity.public_key,
                               request_digest(box))
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

import nacl.bindings
import nacl.exceptions
import nacl.public
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from google.protobuf.message import DecodeError

from app import AppError
from app.members import invite_pb2 as pb
from app.names import check_nick
from net.channel_key import check_channel_name
from net.identity import Identity, sender_id_for, verify_signature
from net.urls import check_ws_url

__all__ = [
    "CHANNEL_ID_BYTES",
    "CHANNEL_KEY_BYTES",
    "CODE_PREFIX",
    "DEFAULT_TTL_MS",
    "HISTORY_PAGE_BYTES",
    "INVITE_ID_BYTES",
    "INVITE_KEY_BYTES",
    "INVITE_TOPIC_BYTES",
    "MAX_RELAYS",
    "SECRET_BYTES",
    "VERSION",
    "Invite",
    "InviteError",
    "InviteErrorReason",
    "JoinAccepted",
    "JoinError",
    "JoinErrorReason",
    "JoinRefused",
    "JoinRequest",
    "RefusalReason",
    "check_not_expired",
    "decode_invite",
    "encode_invite",
    "history_page",
    "invite_id",
    "invite_key",
    "invite_topic",
    "make_invite",
    "make_join_accepted",
    "make_join_refused",
    "make_join_request",
    "open_join_answer",
    "open_join_request",
    "request_digest",
]

VERSION = 1
"""Version of the invite code and of the handshake messages."""

CODE_PREFIX = "sdschat-invite:"
"""What every invite code starts with."""

SECRET_BYTES = 32
CHANNEL_ID_BYTES = 32
CHANNEL_KEY_BYTES = 32
INVITE_ID_BYTES = 16
INVITE_TOPIC_BYTES = 16
INVITE_KEY_BYTES = 32
DEFAULT_TTL_MS = 24 * 3600 * 1000
"""An invite expires 24 h after it is made unless the admin says otherwise."""

MAX_RELAYS = 8
"""At most this many relay URLs in a code (each at most :data:`MAX_URL_CHARS`)."""
MAX_URL_CHARS = 512
MAX_CODE_CHARS = 8192
"""Longer pasted text is not an invite (a maximal code is about 7,000 characters)."""
HISTORY_PAGE_BYTES = 150 * 1024
"""Membership events' envelopes per join answer (:func:`history_page`): with the
keys and the signature, an answer stays under :data:`MAX_BOX_BYTES`."""

MAX_BOX_BYTES = 200 * 1024
"""Longer handshake messages are refused before any decryption (an answer carries a
members channel's control history; the envelope limit is 256 KiB)."""

_CHECKSUM_BYTES = 4
_CHECKSUM_LABEL = b"sdschat-invite-checksum-v1"
_HKDF_SALT = b"sdschat-invite-v1"
_NONCE_BYTES = 12
_REQUEST_SIGN_LABEL = b"sdschat-join-request-v1\x00"
_ANSWER_SIGN_LABEL = b"sdschat-join-answer-v1\x00"
_BOX_AAD_LABEL = b"sdschat-invite-box-v1\x00"
_BASE32_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyz234567")
_LOOKALIKES = {"0": " (the letter o?)", "1": " (the letter l or i?)", "8": " (the letter b?)"}

InviteErrorReason = Literal[
    "not_an_invite", "bad_checksum", "incomplete", "unsupported_version", "malformed",
    "expired",
]
JoinErrorReason = Literal[
    "forged", "bad_signature", "wrong_invite", "expired", "malformed",
    "unsupported_version", "wrong_kind", "bad_name", "not_for_me",
]  # fmt: skip
RefusalReason = Literal["used", "expired", "refused", "name_taken"]

_REFUSAL_MESSAGES: dict[str, str] = {
    "used": "this invite code has already been used",
    "expired": "this invite code has expired",
    "refused": "refused by an admin",
    "name_taken": ("the name you asked for is a member's, or looks like one (docs/members.md, "
                   "\"Names\"): join again with another --name; the code still works"),
}


class InviteError(AppError, ValueError):
    """An invite code that cannot be used.

    Attributes:
        reason: stable, for programs: ``not_an_invite`` (no ``sdschat-invite:``
            prefix, or too long), ``bad_checksum`` (a character is wrong, missing
            or extra), ``incomplete`` (shorter than any whole code that begins like
            it: its end was not copied), ``unsupported_version`` (made by a newer sdschat),
            ``malformed`` (the checksum holds but the content is unusable),
            ``expired`` (:func:`check_not_expired`).
        message: for people; also ``str(error)``.
    """

    def __init__(self, reason: InviteErrorReason, message: str) -> None:
        super().__init__(message)
        self.reason: InviteErrorReason = reason
        self.message = message


class JoinError(AppError, ValueError):
    """A handshake message that is refused.

    Attributes:
        reason: stable, for programs: ``forged`` (not encrypted with this invite's
            key: made without the secret, or altered), ``bad_signature`` (the
            signature does not match the key it names), ``wrong_invite`` (made for
            another invite or channel), ``expired`` (the invite expired),
            ``malformed``, ``unsupported_version``, ``wrong_kind`` (an answer where a
            request was expected, or the reverse), ``bad_name`` (the requested
            display name breaks the name rules), ``not_for_me`` (an answer to another
            newcomer or another request).
        message: for people; also ``str(error)``.
        request: for ``expired`` only, the authentic request, so that the admin's
            node can still send :func:`make_join_refused` with ``"expired"``.
    """

    def __init__(
        self, reason: JoinErrorReason, message: str, request: JoinRequest | None = None
    ) -> None:
        super().__init__(message)
        self.reason: JoinErrorReason = reason
        self.message = message
        self.request = request


@dataclass(frozen=True)
class Invite:
    """What an invite code holds. Build one with :func:`make_invite` or
    :func:`decode_invite`."""

    channel: str
    channel_id: bytes
    secret: bytes = field(repr=False)
    expires_ms: int
    relays: tuple[str, ...] = ()

    @property
    def invite_id(self) -> bytes:
        """:func:`invite_id` of the secret."""
        return invite_id(self.secret)

    @property
    def topic(self) -> bytes:
        """:func:`invite_topic` of the secret."""
        return invite_topic(self.secret)


@dataclass(frozen=True)
class JoinRequest:
    """An authentic join request, as :func:`open_join_request` returns it.

    ``sender_id`` is derived from ``identity_key`` (:func:`net.identity.sender_id_for`);
    ``digest`` is :func:`request_digest` of the request's bytes, which the answer
    repeats."""

    identity_key: bytes
    sender_id: str
    x25519_key: bytes
    name: str
    invite_id: bytes
    sent_ms: int
    digest: bytes
    history_from: int = 0


@dataclass(frozen=True)
class JoinAccepted:
    """The admin let the newcomer in: what it needs to take part."""

    channel: str
    channel_key: bytes = field(repr=False)
    channel_id: bytes
    relays: tuple[str, ...]
    admin_key: bytes
    admin_sender_id: str
    sent_ms: int
    epoch_keys: tuple[bytes, ...] = field(default=(), repr=False)
    controls: tuple[bytes, ...] = field(default=(), repr=False)
    history_from: int = 0
    history_total: int = 0

    @property
    def history_next(self) -> int | None:
        """The index to ask for next (``None``: this answer ends the history)."""
        end = self.history_from + len(self.controls)
        return end if self.controls and end < self.history_total else None


@dataclass(frozen=True)
class JoinRefused:
    """The admin refused: ``reason`` is ``used``, ``expired``, ``refused`` (or a newer
    sdschat's word), ``message`` says it for people."""

    reason: str
    message: str
    admin_key: bytes
    admin_sender_id: str
    sent_ms: int


# -- derivations -----------------------------------------------------------------------


def _hkdf(secret: bytes, label: bytes, length: int) -> bytes:
    if len(secret) != SECRET_BYTES:
        raise ValueError(f"an invite secret is {SECRET_BYTES} bytes, got {len(secret)}")
    return HKDF(
        algorithm=hashes.SHA256(), length=length, salt=_HKDF_SALT,
        info=b"sdschat-invite-" + label,
    ).derive(secret)  # fmt: skip


def invite_id(secret: bytes) -> bytes:
    """The 16-byte id of the invite whose secret is ``secret`` (HKDF label ``id``).

    It names the invite in join requests and in the roster's record of redeemed
    invites (the single-use rule), and reveals nothing of the secret."""
    return _hkdf(secret, b"id", INVITE_ID_BYTES)


def invite_topic(secret: bytes) -> bytes:
    """The 16-byte routing topic of the handshake (HKDF label ``topic``)."""
    return _hkdf(secret, b"topic", INVITE_TOPIC_BYTES)


def invite_key(secret: bytes) -> bytes:
    """The 32-byte ChaCha20-Poly1305 key of the handshake (HKDF label ``key``)."""
    return _hkdf(secret, b"key", INVITE_KEY_BYTES)


def request_digest(box: bytes) -> bytes:
    """sha256 of a join request's bytes: the answer names the request by it."""
    return hashlib.sha256(box).digest()


# -- invite codes ----------------------------------------------------------------------


def _check_relays(relays: Sequence[str], what: str) -> tuple[str, ...]:
    if isinstance(relays, str):
        raise ValueError(f"{what}: give a list of URLs, not one string")
    if len(relays) > MAX_RELAYS:
        raise ValueError(f"{what}: at most {MAX_RELAYS} relay URLs, got {len(relays)}")
    for url in relays:
        if len(url) > MAX_URL_CHARS:
            raise ValueError(f"{what}: a relay URL is at most {MAX_URL_CHARS} characters")
        check_ws_url(url, what)
    return tuple(relays)


def make_invite(
    channel: str,
    channel_id: bytes,
    relays: Sequence[str] = (),
    *,
    now_ms: int,
    ttl_ms: int = DEFAULT_TTL_MS,
    secret: bytes | None = None,
) -> Invite:
    """A new invite to ``channel``, valid until ``now_ms + ttl_ms``.

    Args:
        channel: the channel's name (checked by :func:`net.channel_key.check_channel_name`).
        channel_id: the members channel's 32-byte id.
        relays: ws:// or wss:// URLs (checked by :func:`net.urls.check_ws_url`); none
            means the newcomer finds the channel on the LAN.
        now_ms: the current unix time in ms.
        ttl_ms: how long the code may be redeemed (more than 0).
        secret: 32 bytes; by default fresh from :func:`os.urandom` (tests pass one).

    Raises:
        ValueError: saying which argument is wrong.
    """
    check_channel_name(channel)
    if len(channel_id) != CHANNEL_ID_BYTES:
        raise ValueError(f"a channel id is {CHANNEL_ID_BYTES} bytes, got {len(channel_id)}")
    checked = _check_relays(relays, "relay URL")
    if ttl_ms <= 0:
        raise ValueError(f"an invite must be valid for some time, got ttl_ms={ttl_ms}")
    if now_ms < 0:
        raise ValueError(f"now_ms must not be negative, got {now_ms}")
    if secret is None:
        secret = os.urandom(SECRET_BYTES)
    if len(secret) != SECRET_BYTES:
        raise ValueError(f"an invite secret is {SECRET_BYTES} bytes, got {len(secret)}")
    return Invite(
        channel=channel, channel_id=bytes(channel_id), secret=bytes(secret),
        expires_ms=now_ms + ttl_ms, relays=checked,
    )  # fmt: skip


def _checksum(payload: bytes) -> bytes:
    return hashlib.sha256(_CHECKSUM_LABEL + payload).digest()[:_CHECKSUM_BYTES]


def _b32(data: bytes) -> str:
    return base64.b32encode(data).decode("ascii").rstrip("=").lower()


def encode_invite(invite: Invite) -> str:
    """The one-line code of ``invite``: ``sdschat-invite:`` + base32 (lowercase, no
    padding) of the protobuf ``Invite`` followed by its 4-byte checksum."""
    message = pb.Invite(
        version=VERSION, relays=list(invite.relays), channel=invite.channel,
        channel_id=invite.channel_id, secret=invite.secret, expires_ms=invite.expires_ms,
    )  # fmt: skip
    payload = message.SerializeToString(deterministic=True)
    return CODE_PREFIX + _b32(payload + _checksum(payload))


def decode_invite(code: str) -> Invite:
    """The invite in ``code`` (whitespace anywhere and letter case do not matter).

    The expiry is not checked here: see :func:`check_not_expired`.

    Raises:
        InviteError: with ``reason`` ``not_an_invite``, ``bad_checksum``,
            ``unsupported_version`` or ``malformed``.
    """
    if not isinstance(code, str):
        raise InviteError("not_an_invite", "an invite code is text")
    if len(code) > MAX_CODE_CHARS:
        raise InviteError(
            "not_an_invite", f"this is not an invite code: longer than {MAX_CODE_CHARS} characters"
        )
    text = "".join(code.split()).lower()
    if not text.startswith(CODE_PREFIX):
        raise InviteError(
            "not_an_invite", f"this is not an invite code: it should start with {CODE_PREFIX}"
        )
    body = text[len(CODE_PREFIX) :]
    for position, ch in enumerate(body, start=len(CODE_PREFIX) + 1):
        if ch not in _BASE32_ALPHABET:
            hint = _LOOKALIKES.get(ch, "")
            raise InviteError(
                "bad_checksum",
                f"a character is wrong: {ch!r} (character {position} of the code) is never "
                f"part of an invite code{hint}; check the code",
            )
    if len(body) % 8 in (1, 3, 6) or len(body) < (_CHECKSUM_BYTES * 8 + 4) // 5:
        _refuse_if_incomplete(body)
        raise InviteError(
            "bad_checksum", "a character is missing or extra: check the code"
        )
    raw = base64.b32decode(body.upper() + "=" * (-len(body) % 8))
    if _b32(raw) != body:  # unused low bits of the last character were not zero
        _refuse_if_incomplete(body)
        raise InviteError("bad_checksum", "a character is wrong: check the code")
    payload, checksum = raw[:-_CHECKSUM_BYTES], raw[-_CHECKSUM_BYTES:]
    if _checksum(payload) != checksum:
        _refuse_if_incomplete(body)
        raise InviteError("bad_checksum", "a character is wrong: check the code")
    try:
        header = pb.InviteHeader.FromString(payload)
    except DecodeError:
        raise InviteError("malformed", "the invite code's content is damaged") from None
    if header.version == 0:
        raise InviteError("malformed", "the invite code's content carries no version")
    if header.version != VERSION:
        raise InviteError(
            "unsupported_version",
            f"this invite code has version {header.version}; this sdschat reads version "
            f"{VERSION}: update sdschat",
        )
    try:
        message = pb.Invite.FromString(payload)
        return _invite_from_message(message)
    except DecodeError:
        raise InviteError("malformed", "the invite code's content is damaged") from None
    except ValueError as exc:
        raise InviteError("malformed", f"the invite code is unusable: {exc}") from None


def _refuse_if_incomplete(body: str) -> None:
    """A code that does not check out and is shorter than any whole code beginning like
    it (:func:`_shortest_code_like`): its end was not copied. One character short is a
    typo (a letter left out); more is a cut."""
    shortest = _shortest_code_like(body)
    if len(body) < shortest - 1:
        raise InviteError(
            "incomplete",
            f"this invite code is incomplete: its end is missing ({len(body)} characters "
            f"after {CODE_PREFIX}, a whole code that begins like it has at least "
            f"{shortest}). Copy the whole line again (the /invite dialog's c copies it)",
        )


def _shortest_code_like(body: str) -> int:
    """The length (base32 characters) of the shortest whole code whose payload starts with
    what ``body`` holds: its relays as far as they are whole in it (checked, else left
    out), a channel name of one character, a 32-byte channel id and secret, the least
    expiry and the checksum. A code cut short (the second line of a wrapped code not
    copied) is shorter; one with a character changed, left out or added is not (whole
    codes carry a real expiry, five bytes more than the least, and a real name)."""
    usable = body[: len(body) - {1: 1, 3: 1, 6: 1}.get(len(body) % 8, 0)]
    try:
        raw = base64.b32decode(usable.upper() + "=" * (-len(usable) % 8))
    except ValueError:
        raw = b""
    relays: list[str] = []
    for cut in range(len(raw), 0, -1):  # the longest prefix that parses: its whole fields
        try:
            head = pb.Invite.FromString(raw[:cut])
        except DecodeError:
            continue
        if head.version not in (0, VERSION):
            return 0  # another version's shape: unknown (the version check speaks)
        try:
            relays = list(_check_relays(list(head.relays), "relay"))
        except ValueError:  # a length a typo changed: the relays are not known
            relays = []
        break
    least = pb.Invite(version=VERSION, relays=relays, channel="x",
                      channel_id=bytes(CHANNEL_ID_BYTES), secret=bytes(SECRET_BYTES),
                      expires_ms=1).SerializeToString(deterministic=True)  # fmt: skip
    return len(_b32(least + bytes(_CHECKSUM_BYTES)))


def _invite_from_message(message: pb.Invite) -> Invite:
    """Raises ValueError naming what is wrong."""
    check_channel_name(message.channel)
    if len(message.channel_id) != CHANNEL_ID_BYTES:
        raise ValueError(f"its channel id is {len(message.channel_id)} bytes, not 32")
    if len(message.secret) != SECRET_BYTES:
        raise ValueError(f"its secret is {len(message.secret)} bytes, not 32")
    if message.expires_ms == 0:
        raise ValueError("it has no expiry")
    relays = _check_relays(list(message.relays), "relay URL in the invite")
    return Invite(
        channel=message.channel, channel_id=message.channel_id, secret=message.secret,
        expires_ms=message.expires_ms, relays=relays,
    )  # fmt: skip


def check_not_expired(invite: Invite, now_ms: int) -> Invite:
    """Return ``invite`` if it may still be redeemed at ``now_ms``.

    Raises:
        InviteError: reason ``expired``.
    """
    if now_ms > invite.expires_ms:
        raise InviteError(
            "expired", "this invite code has expired: ask an admin of the channel for a new one"
        )
    return invite


# -- the handshake's outer frame -------------------------------------------------------

_KIND_NAMES = {pb.Box.JOIN_REQUEST: "a join request", pb.Box.JOIN_ANSWER: "a join answer"}


def _aad(kind: pb.Box.Kind) -> bytes:
    return _BOX_AAD_LABEL + bytes([VERSION, kind])


def _seal_box(
    invite: Invite, kind: pb.Box.Kind, plaintext: bytes, rng: Callable[[int], bytes]
) -> bytes:
    nonce = rng(_NONCE_BYTES)
    if len(nonce) != _NONCE_BYTES:
        raise ValueError(f"rng gave {len(nonce)} bytes, not {_NONCE_BYTES}")
    ciphertext = ChaCha20Poly1305(invite_key(invite.secret)).encrypt(nonce, plaintext, _aad(kind))
    box = pb.Box(version=VERSION, kind=kind, nonce=nonce, ciphertext=ciphertext)
    return box.SerializeToString(deterministic=True)


def _check_join_version(version: int, what: str) -> None:
    """Raise ``unsupported_version`` for a ``what`` (a box, a join request or answer)
    of another format version than this sdschat's."""
    if version != VERSION:
        raise JoinError(
            "unsupported_version", f"{what} of version {version}; this sdschat reads {VERSION}"
        )


def _open_box(invite: Invite, data: bytes, kind: pb.Box.Kind) -> bytes:
    if not isinstance(data, bytes | bytearray) or len(data) > MAX_BOX_BYTES:
        raise JoinError("malformed", f"not {_KIND_NAMES[kind]}: empty, too long or not bytes")
    try:
        box = pb.Box.FromString(bytes(data))
    except DecodeError:
        raise JoinError("malformed", f"not {_KIND_NAMES[kind]}: undecodable") from None
    if box.version == 0:
        raise JoinError("malformed", f"not {_KIND_NAMES[kind]}: no version")
    _check_join_version(box.version, _KIND_NAMES[kind])
    if box.kind != kind:
        raise JoinError(
            "wrong_kind",
            f"expected {_KIND_NAMES[kind]}, got {_KIND_NAMES.get(box.kind, 'something else')}",
        )
    if len(box.nonce) != _NONCE_BYTES:
        raise JoinError("malformed", f"{_KIND_NAMES[kind]} with a {len(box.nonce)}-byte nonce")
    try:
        return ChaCha20Poly1305(invite_key(invite.secret)).decrypt(
            box.nonce, box.ciphertext, _aad(kind)
        )
    except InvalidTag:
        raise JoinError(
            "forged",
            f"{_KIND_NAMES[kind]} not made with this invite's secret (forged or altered)",
        ) from None


def _open_signed(data: bytes, what: str) -> tuple[bytes, bytes]:
    try:
        signed = pb.Signed.FromString(data)
    except DecodeError:
        raise JoinError("malformed", f"{what}: undecodable signed part") from None
    return signed.body, signed.signature


def _check_key(key: bytes, what: str) -> None:
    if len(key) != 32:
        raise JoinError("malformed", f"{what} is {len(key)} bytes, not 32")


_PROBE_SCALAR = hashlib.sha256(b"sdschat-x25519-probe").digest()


def _check_x25519(key: bytes) -> None:
    """Refuse an X25519 key nothing can be sealed to: libsodium refuses keys of small
    order (the shared secret would be all zeros, whatever the scalar)."""
    try:
        nacl.bindings.crypto_scalarmult(_PROBE_SCALAR, key)
    except (nacl.exceptions.CryptoError, nacl.exceptions.RuntimeError, ValueError):
        raise JoinError("malformed", "join request: an X25519 key of small order") from None


# -- join requests ---------------------------------------------------------------------


def make_join_request(
    invite: Invite,
    identity: Identity,
    x25519_public: bytes,
    name: str,
    now_ms: int,
    *,
    history_from: int = 0,
    rng: Callable[[int], bytes] = os.urandom,
) -> bytes:
    """The newcomer's request to join, to publish on :func:`invite_topic`
    (``history_from``: the rest of a long control history, from that index).

    Keep :func:`request_digest` of the result: :func:`open_join_answer` needs it.

    Args:
        invite: the decoded invite.
        identity: the newcomer's identity; it signs the request.
        x25519_public: the newcomer's 32-byte X25519 public key (PyNaCl
            ``PrivateKey.public_key.encode()``); the answer is sealed to it.
        name: the display name asked for (:func:`app.names.check_nick` rules).
        now_ms: the current unix time in ms.
        rng: random bytes for the nonce.

    Raises:
        ValueError: a bad name or key.
    """
    name = check_nick(name)
    if len(x25519_public) != 32:
        raise ValueError(f"an X25519 public key is 32 bytes, got {len(x25519_public)}")
    try:
        _check_x25519(bytes(x25519_public))
    except JoinError:
        raise ValueError(
            "this X25519 public key is of small order: nothing can be sealed to it"
        ) from None
    body = pb.JoinRequest(
        version=VERSION, invite_id=invite.invite_id, identity_key=identity.public_key,
        x25519_key=bytes(x25519_public), name=name, sent_ms=now_ms, history_from=history_from,
    ).SerializeToString(deterministic=True)  # fmt: skip
    signed = pb.Signed(body=body, signature=identity.sign(_REQUEST_SIGN_LABEL + body))
    return _seal_box(invite, pb.Box.JOIN_REQUEST, signed.SerializeToString(), rng)


def open_join_request(invite: Invite, box: bytes, now_ms: int) -> JoinRequest:
    """Check a join request received on the invite's topic; the admin's side.

    Checked in this order: the frame, the AEAD under the invite key, the newcomer's
    signature, the invite id, the name, the expiry. The single-use rule is the
    roster's (it records :func:`invite_id` when it adds the member).

    Raises:
        JoinError: ``malformed``, ``unsupported_version``, ``wrong_kind``, ``forged``,
            ``bad_signature``, ``wrong_invite``, ``bad_name`` or ``expired`` (this one
            carries the authentic request in ``.request``).
    """
    plaintext = _open_box(invite, box, pb.Box.JOIN_REQUEST)
    body, signature = _open_signed(plaintext, "join request")
    try:
        request = pb.JoinRequest.FromString(body)
    except DecodeError:
        raise JoinError("malformed", "join request: undecodable") from None
    _check_join_version(request.version, "join request")
    _check_key(request.identity_key, "join request: the identity key")
    _check_key(request.x25519_key, "join request: the X25519 key")
    _check_x25519(request.x25519_key)
    if not verify_signature(request.identity_key, signature, _REQUEST_SIGN_LABEL + body):
        raise JoinError("bad_signature", "join request: the signature does not match its key")
    if request.invite_id != invite.invite_id:
        raise JoinError("wrong_invite", "join request made for another invite")
    try:
        name = check_nick(request.name)
    except ValueError as exc:
        raise JoinError("bad_name", f"join request: {exc}") from None
    opened = JoinRequest(
        identity_key=request.identity_key, sender_id=sender_id_for(request.identity_key),
        x25519_key=request.x25519_key, name=name, invite_id=request.invite_id,
        sent_ms=request.sent_ms, digest=request_digest(bytes(box)),
        history_from=request.history_from,
    )  # fmt: skip
    if now_ms > invite.expires_ms:
        raise JoinError("expired", "join request for an expired invite", request=opened)
    return opened


# -- join answers ----------------------------------------------------------------------


def _make_answer(
    invite: Invite,
    request: JoinRequest,
    admin: Identity,
    now_ms: int,
    rng: Callable[[int], bytes],
    **outcome: pb.Accepted | pb.Refused,
) -> bytes:
    body = pb.JoinAnswer(
        version=VERSION, invite_id=invite.invite_id, newcomer_key=request.identity_key,
        request_digest=request.digest, admin_key=admin.public_key, sent_ms=now_ms,
        **outcome,  # type: ignore[arg-type]
    ).SerializeToString(deterministic=True)  # fmt: skip
    signed = pb.Signed(body=body, signature=admin.sign(_ANSWER_SIGN_LABEL + body))
    sealed = nacl.public.SealedBox(nacl.public.PublicKey(request.x25519_key)).encrypt(
        signed.SerializeToString()
    )
    return _seal_box(invite, pb.Box.JOIN_ANSWER, bytes(sealed), rng)


def make_join_accepted(
    invite: Invite,
    request: JoinRequest,
    admin: Identity,
    channel_key: bytes,
    now_ms: int,
    *,
    relays: Sequence[str] | None = None,
    epoch_keys: Sequence[bytes] = (),
    controls: Sequence[bytes] = (),
    history_from: int = 0,
    history_total: int | None = None,
    rng: Callable[[int], bytes] = os.urandom,
) -> bytes:
    """The admin's answer letting ``request``'s newcomer in, to publish on the invite
    topic. Carries the invite's channel name and id, ``channel_key`` and the relays
    (the invite's unless ``relays`` is given), and for a members channel its earlier
    outer keys and its membership events' envelopes (``controls``: those from index
    ``history_from`` of ``history_total``, :func:`history_page`).

    Raises:
        ValueError: a channel key that is not 32 bytes, or a bad relay URL.
    """
    if len(channel_key) != CHANNEL_KEY_BYTES:
        raise ValueError(f"a channel key is {CHANNEL_KEY_BYTES} bytes, got {len(channel_key)}")
    urls = invite.relays if relays is None else _check_relays(relays, "relay URL")
    accepted = pb.Accepted(
        channel=invite.channel, channel_key=bytes(channel_key), channel_id=invite.channel_id,
        relays=list(urls), epoch_keys=[bytes(k) for k in epoch_keys],
        controls=[bytes(c) for c in controls], history_from=history_from,
        history_total=history_from + len(controls) if history_total is None else history_total,
    )  # fmt: skip
    if any(len(k) != CHANNEL_KEY_BYTES for k in epoch_keys):
        raise ValueError("an outer key is 32 bytes")
    return _make_answer(invite, request, admin, now_ms, rng, accepted=accepted)


def history_page(controls: Sequence[bytes], start: int,
                 budget: int = HISTORY_PAGE_BYTES) -> list[bytes]:  # fmt: skip
    """The envelopes of ``controls`` from index ``start`` that fit in ``budget`` bytes
    (at least one: a control message is at most 64 KiB)."""
    page: list[bytes] = []
    size = 0
    for env in controls[start:]:
        if page and size + len(env) > budget:
            break
        page.append(env)
        size += len(env)
    return page


def make_join_refused(
    invite: Invite,
    request: JoinRequest,
    admin: Identity,
    reason: RefusalReason,
    now_ms: int,
    *,
    rng: Callable[[int], bytes] = os.urandom,
) -> bytes:
    """The admin's answer refusing ``request``: ``reason`` is ``used``, ``expired``,
    ``name_taken`` or
    ``refused`` (by an admin).

    Raises:
        ValueError: another reason.
    """
    if reason not in get_args(RefusalReason):
        raise ValueError(f"a refusal reason is one of {get_args(RefusalReason)}, got {reason!r}")
    refused = pb.Refused(reason=reason)
    return _make_answer(invite, request, admin, now_ms, rng, refused=refused)


def open_join_answer(
    invite: Invite,
    box: bytes,
    x25519_private: nacl.public.PrivateKey,
    identity_key: bytes,
    digest: bytes,
) -> JoinAccepted | JoinRefused:
    """Check an answer received on the invite's topic; the newcomer's side.

    Args:
        invite: the decoded invite.
        box: the answer's bytes.
        x25519_private: the private key whose public half was in the request.
        identity_key: the newcomer's identity public key.
        digest: :func:`request_digest` of the request that was sent.

    The answer must be encrypted with the invite key, sealed to ``x25519_private``,
    signed by the admin key it names, and name this invite, this newcomer and this
    request. Whether that key belongs to an admin of the channel is for the roster
    to confirm once the newcomer has the channel's history.

    Raises:
        JoinError: ``malformed``, ``unsupported_version``, ``wrong_kind``, ``forged``,
            ``not_for_me``, ``bad_signature`` or ``wrong_invite``.
    """
    sealed = _open_box(invite, box, pb.Box.JOIN_ANSWER)
    try:
        plaintext = nacl.public.SealedBox(x25519_private).decrypt(sealed)
    except (nacl.exceptions.CryptoError, ValueError, TypeError):
        raise JoinError("not_for_me", "join answer sealed to another newcomer") from None
    body, signature = _open_signed(plaintext, "join answer")
    try:
        answer = pb.JoinAnswer.FromString(body)
    except DecodeError:
        raise JoinError("malformed", "join answer: undecodable") from None
    _check_join_version(answer.version, "join answer")
    _check_key(answer.admin_key, "join answer: the admin key")
    if not verify_signature(answer.admin_key, signature, _ANSWER_SIGN_LABEL + body):
        raise JoinError("bad_signature", "join answer: the signature does not match its key")
    if answer.invite_id != invite.invite_id:
        raise JoinError("wrong_invite", "join answer made for another invite")
    if answer.newcomer_key != identity_key or answer.request_digest != digest:
        raise JoinError("not_for_me", "join answer to another newcomer or another request")
    admin_id = sender_id_for(answer.admin_key)
    which = answer.WhichOneof("outcome")
    if which == "accepted":
        acc = answer.accepted
        if acc.channel_id != invite.channel_id or acc.channel != invite.channel:
            raise JoinError("wrong_invite", "join answer names another channel than the invite")
        if len(acc.channel_key) != CHANNEL_KEY_BYTES:
            raise JoinError("malformed", f"join answer: a {len(acc.channel_key)}-byte channel key")
        try:
            relays = _check_relays(list(acc.relays), "relay URL in the join answer")
        except ValueError as exc:
            raise JoinError("malformed", f"join answer: {exc}") from None
        if any(len(k) != CHANNEL_KEY_BYTES for k in acc.epoch_keys):
            raise JoinError("malformed", "join answer: an outer key that is not 32 bytes")
        if acc.history_from + len(acc.controls) > acc.history_total:
            raise JoinError("malformed", "join answer: more history than it says there is")
        return JoinAccepted(
            channel=acc.channel, channel_key=acc.channel_key, channel_id=acc.channel_id,
            relays=relays, admin_key=answer.admin_key, admin_sender_id=admin_id,
            sent_ms=answer.sent_ms, epoch_keys=tuple(bytes(k) for k in acc.epoch_keys),
            controls=tuple(bytes(c) for c in acc.controls), history_from=acc.history_from,
            history_total=acc.history_total,
        )  # fmt: skip
    if which == "refused":
        reason = answer.refused.reason
        if not reason or len(reason) > 64 or not reason.isprintable():
            raise JoinError("malformed", "join answer: a refusal without a readable reason")
        return JoinRefused(
            reason=reason, message=_REFUSAL_MESSAGES.get(reason, f"refused ({reason})"),
            admin_key=answer.admin_key, admin_sender_id=admin_id, sent_ms=answer.sent_ms,
        )  # fmt: skip
    raise JoinError("malformed", "join answer with neither an acceptance nor a refusal")
