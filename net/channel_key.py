"""Channel keys and relay topics, derived from a channel name and a passphrase.

Everyone who joins channel ``name`` with the same passphrase derives the same
32-byte key, and from it the same 16-byte routing topic::

    salt  = sha256(b"sdschat-channel-salt-v1\\x00" + utf8(NFC(name)))
    input = b"sdschat-channel-key-v1\\x00" + (b"\\x00"                      public)
                                          | (b"\\x01" + utf8(NFC(passphrase)))  private
    key   = Argon2id(input, salt, KdfParams)                   32 bytes
    topic = sha256(b"sdschat-topic-v1" + key)[:16]

* A channel with no passphrase (``None`` or empty) is **public**: anyone who
  knows its name can derive the key and read it. :attr:`ChannelKey.is_public`
  says so, and the UI must say so plainly.
* The relay sees only the topic. The topic is a hash of the key, so it
  reveals neither the passphrase nor the name: to link a public channel's
  topic to a name one must already have (or guess) the name and pay one
  memory-hard Argon2id derivation per guess.
* Names and passphrases are Unicode NFC-normalised first, so the same text
  typed on different systems gives the same key.

Parameters: :data:`DEFAULT_KDF` is Argon2id with 64 MiB of memory, 2 passes
and 4 lanes (in the spirit of RFC 9106's second recommended option, with one
pass fewer), which took 105–150 ms on the 2-core development machine. Tests
pass :data:`TEST_KDF` (cheap) explicitly; keys derived with different
parameters differ, so every participant of a channel must use the same ones.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

__all__ = [
    "DEFAULT_KDF",
    "KEY_BYTES",
    "MAX_CHANNEL_NAME_CHARS",
    "TEST_KDF",
    "TOPIC_BYTES",
    "ChannelKey",
    "KdfParams",
    "check_channel_name",
    "derive_channel_key",
    "topic_for_key",
]

KEY_BYTES = 32
"""Length of a channel key (ChaCha20-Poly1305 key size)."""

TOPIC_BYTES = 16
"""Length of a routing topic."""

_SALT_DOMAIN = b"sdschat-channel-salt-v1\x00"
_KEY_DOMAIN = b"sdschat-channel-key-v1\x00"
_TOPIC_DOMAIN = b"sdschat-topic-v1"


@dataclass(frozen=True)
class KdfParams:
    """Argon2id cost parameters.

    Attributes:
        memory_kib: memory per derivation in KiB (at least ``8 * lanes``).
        iterations: number of passes over the memory (at least 1).
        lanes: degree of parallelism (at least 1).
    """

    memory_kib: int
    iterations: int
    lanes: int

    def __post_init__(self) -> None:
        if self.lanes < 1 or self.iterations < 1 or self.memory_kib < 8 * self.lanes:
            raise ValueError(f"invalid Argon2id parameters: {self}")


DEFAULT_KDF = KdfParams(memory_kib=64 * 1024, iterations=2, lanes=4)
"""Production parameters: 64 MiB, t=2, p=4 (~105–150 ms on the dev machine)."""

TEST_KDF = KdfParams(memory_kib=64, iterations=1, lanes=1)
"""Cheap parameters for tests only (well under a millisecond). Never in production."""


def topic_for_key(key: bytes) -> bytes:
    """The 16-byte routing topic of a channel key: ``sha256(b"sdschat-topic-v1" + key)[:16]``."""
    if len(key) != KEY_BYTES:
        raise ValueError(f"a channel key is {KEY_BYTES} bytes, got {len(key)}")
    return hashlib.sha256(_TOPIC_DOMAIN + key).digest()[:TOPIC_BYTES]


@dataclass(frozen=True)
class ChannelKey:
    """A channel's derived secret material.

    Attributes:
        channel: the channel name as given (before normalisation).
        key: the 32-byte ChaCha20-Poly1305 key (secret; hidden from ``repr``).
        topic: the 16-byte routing topic, safe to show to a relay.
        is_public: True when derived without a passphrase: anyone who knows
            the channel name can read and write it.
    """

    channel: str
    key: bytes = field(repr=False)
    topic: bytes
    is_public: bool


def _nfc_utf8(text: str) -> bytes:
    return unicodedata.normalize("NFC", text).encode("utf-8")


MAX_CHANNEL_NAME_CHARS = 100
"""Longest channel name a person may give (``sdschat join``, ``/join``, the store)."""


def check_channel_name(channel: str) -> str:
    """Return ``channel`` if a person may use it as a channel name.

    Raises:
        ValueError: empty, longer than :data:`MAX_CHANNEL_NAME_CHARS`, or holding
            control or other unprintable characters (they would reach terminals,
            logs and file listings as they are).
    """
    if not channel:
        raise ValueError("a channel name must not be empty")
    if len(channel) > MAX_CHANNEL_NAME_CHARS:
        raise ValueError(
            f"a channel name is at most {MAX_CHANNEL_NAME_CHARS} characters, "
            f"got {len(channel)}"
        )
    if not channel.isprintable():
        raise ValueError(f"a channel name must not hold control characters: {channel!r}")
    return channel


def derive_channel_key(
    channel: str,
    passphrase: str | bytes | None = None,
    *,
    params: KdfParams = DEFAULT_KDF,
) -> ChannelKey:
    """Derive the key and topic of ``channel`` (see the module docstring).

    Args:
        channel: channel name; must not be empty.
        passphrase: ``None`` or empty for a public channel. ``str`` is NFC
            normalised and UTF-8 encoded; ``bytes`` (e.g. read from a
            passphrase file) is used as is.
        params: Argon2id costs; keep :data:`DEFAULT_KDF` outside tests.

    Raises:
        ValueError: empty channel name or invalid parameters.
    """
    if not channel:
        raise ValueError("a channel name must not be empty")
    salt = hashlib.sha256(_SALT_DOMAIN + _nfc_utf8(channel)).digest()
    if passphrase is None or len(passphrase) == 0:
        secret = _KEY_DOMAIN + b"\x00"
        is_public = True
    else:
        pw = _nfc_utf8(passphrase) if isinstance(passphrase, str) else bytes(passphrase)
        secret = _KEY_DOMAIN + b"\x01" + pw
        is_public = False
    kdf = Argon2id(
        salt=salt,
        length=KEY_BYTES,
        iterations=params.iterations,
        lanes=params.lanes,
        memory_cost=params.memory_kib,
    )
    key = kdf.derive(secret)
    return ChannelKey(channel=channel, key=key, topic=topic_for_key(key), is_public=is_public)
