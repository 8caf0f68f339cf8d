"""Safety numbers: what two members compare out of band to know they see each other's keys.

:func:`safety_number` gives both members the same 60 digits, in 12 groups of 5, as
Signal does; :func:`safety_emoji` gives 16 emoji with names to read out loud
instead. Both are derived from the two identities only, so they are the same on
both sides whatever the order of the arguments, and they change when either key
changes.

How (version 1; the committed vector in tests/members/test_safety.py pins it):

* Each side's **fingerprint** is an iterated SHA-512 over its identity::

      h = b"sdschat-safety" || version (2 bytes, big endian) || public_key || utf8(sender_id)
      repeat ITERATIONS (5,200) times:  h = SHA-512(h || public_key)

  where ``public_key`` is the raw 32-byte Ed25519 key and ``sender_id`` the id the
  key gives (:func:`net.identity.sender_id_for`).
* A side's **30 digits**: the first 30 bytes of ``h`` in six 5-byte chunks, each read
  as a big-endian integer modulo 100,000 and written with 5 digits.
* The **safety number** is both sides' digits, the smaller string first, in groups
  of 5 separated by spaces. The **emoji** are, in the same order, 8 per side: bytes
  30 to 35 of ``h`` read as eight 6-bit indexes into :data:`EMOJI` (64 entries).

The iterations make each attempt to match a given fingerprint cost 5,200 hashes;
what an attacker must do to make two numbers match is in docs/members.md ("Safety
numbers"). Everything here is pure: bytes in, text out.
"""

from __future__ import annotations

import functools
import hashlib

from net.identity import PUBLIC_KEY_BYTES, sender_id_for

__all__ = [
    "DIGITS_PER_SIDE",
    "EMOJI",
    "EMOJI_PER_SIDE",
    "ITERATIONS",
    "VERSION",
    "fingerprint",
    "safety_emoji",
    "safety_number",
]

VERSION = 1
"""Version of the derivation; part of every fingerprint's input."""

ITERATIONS = 5200
"""SHA-512 rounds per fingerprint (Signal's count)."""

DIGITS_PER_SIDE = 30
EMOJI_PER_SIDE = 8

_LABEL = b"sdschat-safety"
_DIGIT_CHUNKS = 6
_CHUNK_BYTES = 5
_EMOJI_OFFSET = _DIGIT_CHUNKS * _CHUNK_BYTES  # the emoji use the bytes after the digits'

EMOJI: tuple[tuple[str, str], ...] = (
    ("\U0001f436", "dog"), ("\U0001f431", "cat"), ("\U0001f981", "lion"),
    ("\U0001f40e", "horse"), ("\U0001f984", "unicorn"), ("\U0001f437", "pig"),
    ("\U0001f418", "elephant"), ("\U0001f430", "rabbit"), ("\U0001f43c", "panda"),
    ("\U0001f413", "rooster"), ("\U0001f427", "penguin"), ("\U0001f422", "turtle"),
    ("\U0001f41f", "fish"), ("\U0001f419", "octopus"), ("\U0001f98b", "butterfly"),
    ("\U0001f337", "flower"), ("\U0001f333", "tree"), ("\U0001f335", "cactus"),
    ("\U0001f344", "mushroom"), ("\U0001f30f", "globe"), ("\U0001f319", "moon"),
    ("\u2601\ufe0f", "cloud"), ("\U0001f525", "fire"), ("\U0001f34c", "banana"),
    ("\U0001f34e", "apple"), ("\U0001f353", "strawberry"), ("\U0001f33d", "corn"),
    ("\U0001f355", "pizza"), ("\U0001f382", "cake"), ("\u2764\ufe0f", "heart"),
    ("\U0001f600", "smiley"), ("\U0001f916", "robot"), ("\U0001f3a9", "hat"),
    ("\U0001f453", "glasses"), ("\U0001f527", "spanner"), ("\U0001f385", "santa"),
    ("\U0001f44d", "thumbs up"), ("\u2602\ufe0f", "umbrella"), ("\u231b", "hourglass"),
    ("\u23f0", "clock"), ("\U0001f381", "gift"), ("\U0001f4a1", "light bulb"),
    ("\U0001f4d5", "book"), ("\u270f\ufe0f", "pencil"), ("\U0001f4ce", "paperclip"),
    ("\u2702\ufe0f", "scissors"), ("\U0001f512", "lock"), ("\U0001f511", "key"),
    ("\U0001f528", "hammer"), ("\u260e\ufe0f", "telephone"), ("\U0001f3c1", "flag"),
    ("\U0001f682", "train"), ("\U0001f6b2", "bicycle"), ("\u2708\ufe0f", "aeroplane"),
    ("\U0001f680", "rocket"), ("\U0001f3c6", "trophy"), ("\u26bd", "ball"),
    ("\U0001f3b8", "guitar"), ("\U0001f3ba", "trumpet"), ("\U0001f514", "bell"),
    ("\u2693", "anchor"), ("\U0001f3a7", "headphones"), ("\U0001f4c1", "folder"),
    ("\U0001f4cc", "pin"),
)  # fmt: skip
"""The 64 ``(emoji, name)`` pairs, indexed by 6 bits (the emoji and names of Matrix's
SAS table, so people may know them)."""


def _check(identity_key: bytes, sender_id: str) -> None:
    if len(identity_key) != PUBLIC_KEY_BYTES:
        raise ValueError(
            f"an identity key is {PUBLIC_KEY_BYTES} bytes, got {len(identity_key)}"
        )
    if sender_id != sender_id_for(bytes(identity_key)):
        raise ValueError(
            f"sender id {sender_id!r} is not the id of this identity key "
            f"({sender_id_for(bytes(identity_key))})"
        )


@functools.lru_cache(maxsize=256)
def fingerprint(identity_key: bytes, sender_id: str) -> bytes:
    """The 64-byte iterated SHA-512 fingerprint of one identity (see the module docstring).

    Raises:
        ValueError: ``identity_key`` is not 32 bytes, or ``sender_id`` is not its id.
    """
    _check(identity_key, sender_id)
    key = bytes(identity_key)
    h = _LABEL + VERSION.to_bytes(2, "big") + key + sender_id.encode("utf-8")
    for _ in range(ITERATIONS):
        h = hashlib.sha512(h + key).digest()
    return h


def _digits(fp: bytes) -> str:
    return "".join(
        f"{int.from_bytes(fp[i : i + _CHUNK_BYTES], 'big') % 100_000:05d}"
        for i in range(0, _DIGIT_CHUNKS * _CHUNK_BYTES, _CHUNK_BYTES)
    )


def _sides(
    identity_key_a: bytes, id_a: str, identity_key_b: bytes, id_b: str
) -> list[tuple[str, bytes]]:
    """Both sides' (digits, fingerprint), the smaller digit string first."""
    sides = []
    for key, sender_id in ((identity_key_a, id_a), (identity_key_b, id_b)):
        fp = fingerprint(bytes(key), sender_id)
        sides.append((_digits(fp), fp))
    return sorted(sides)


def safety_number(identity_key_a: bytes, id_a: str, identity_key_b: bytes, id_b: str) -> str:
    """The 60-digit safety number of two identities, as 12 groups of 5 digits separated
    by single spaces; the same whichever identity is ``a``.

    Args:
        identity_key_a, identity_key_b: raw 32-byte Ed25519 public keys.
        id_a, id_b: their sender ids (:func:`net.identity.sender_id_for`).

    Raises:
        ValueError: a key that is not 32 bytes, or an id that is not its key's.
    """
    digits = "".join(d for d, _ in _sides(identity_key_a, id_a, identity_key_b, id_b))
    return " ".join(digits[i : i + 5] for i in range(0, len(digits), 5))


def safety_emoji(
    identity_key_a: bytes, id_a: str, identity_key_b: bytes, id_b: str
) -> list[tuple[str, str]]:
    """16 ``(emoji, name)`` pairs from :data:`EMOJI` to read out loud, 8 per identity,
    in the safety number's order; the same whichever identity is ``a``.

    Raises:
        ValueError: as :func:`safety_number`.
    """
    out: list[tuple[str, str]] = []
    for _, fp in _sides(identity_key_a, id_a, identity_key_b, id_b):
        bits = int.from_bytes(fp[_EMOJI_OFFSET : _EMOJI_OFFSET + EMOJI_PER_SIDE * 6 // 8], "big")
        for i in reversed(range(EMOJI_PER_SIDE)):
            out.append(EMOJI[(bits >> (6 * i)) & 0x3F])
    return out
