"""Safety numbers and emoji: the same on both sides, different for different keys, stable."""

from __future__ import annotations

import hashlib
import re

import pytest

from app.members.safety import EMOJI, ITERATIONS, fingerprint, safety_emoji, safety_number
from net.identity import Identity

ALICE = Identity.from_private_bytes(bytes(32))
BOB = Identity.from_private_bytes(bytes([1]) * 32)

# Committed: a change here makes every member's verified contacts look changed.
ALICE_BOB_NUMBER = (
    "20343 05081 49408 22439 33706 08148 83615 21603 88097 80064 38618 16527"
)
ALICE_BOB_EMOJI = [
    "bell", "pig", "flag", "umbrella", "cake", "hammer", "butterfly", "train",
    "santa", "spanner", "gift", "dog", "heart", "cloud", "anchor", "santa",
]  # fmt: skip


def number(a: Identity, b: Identity) -> str:
    return safety_number(a.public_key, a.sender_id, b.public_key, b.sender_id)


def emoji(a: Identity, b: Identity) -> list[tuple[str, str]]:
    return safety_emoji(a.public_key, a.sender_id, b.public_key, b.sender_id)


def reference_digits(ident: Identity) -> str:
    """A side's 30 digits, computed from the description in docs/members.md."""
    key = ident.public_key
    h = b"sdschat-safety" + (1).to_bytes(2, "big") + key + ident.sender_id.encode()
    for _ in range(5200):
        h = hashlib.sha512(h + key).digest()
    return "".join(f"{int.from_bytes(h[i : i + 5], 'big') % 100000:05d}" for i in range(0, 30, 5))


def test_the_committed_vector_is_stable() -> None:
    assert number(ALICE, BOB) == ALICE_BOB_NUMBER
    assert [name for _, name in emoji(ALICE, BOB)] == ALICE_BOB_EMOJI


def test_the_number_follows_the_documented_derivation() -> None:
    assert ITERATIONS == 5200
    halves = sorted([reference_digits(ALICE), reference_digits(BOB)])
    assert number(ALICE, BOB).replace(" ", "") == "".join(halves)


def test_both_sides_see_the_same_number_and_emoji() -> None:
    for _ in range(5):
        a, b = Identity.generate(), Identity.generate()
        assert number(a, b) == number(b, a)
        assert emoji(a, b) == emoji(b, a)


def test_the_format_is_12_groups_of_5_digits_and_16_emoji_from_the_table() -> None:
    a, b = Identity.generate(), Identity.generate()
    assert re.fullmatch(r"\d{5}( \d{5}){11}", number(a, b))
    words = emoji(a, b)
    assert len(words) == 16 and all(pair in EMOJI for pair in words)


def test_the_table_has_64_distinct_emoji_with_distinct_names() -> None:
    assert len(EMOJI) >= 64
    assert len({e for e, _ in EMOJI}) == len(EMOJI) == len({n for _, n in EMOJI})


def test_a_changed_key_on_either_side_changes_the_number() -> None:
    a, b, mallory = Identity.generate(), Identity.generate(), Identity.generate()
    before = number(a, b)
    assert number(mallory, b) != before
    assert number(a, mallory) != before
    assert emoji(mallory, b) != emoji(a, b)
    assert emoji(a, mallory) != emoji(a, b)
    # the unchanged side's half stays: people can tell whose key changed
    assert reference_digits(b) in number(mallory, b).replace(" ", "")


def test_many_random_pairs_give_distinct_numbers_and_emoji() -> None:
    pairs = [(Identity.generate(), Identity.generate()) for _ in range(100)]
    assert len({number(a, b) for a, b in pairs}) == 100
    assert len({tuple(emoji(a, b)) for a, b in pairs}) == 100


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        safety_number(ALICE.public_key[:31], ALICE.sender_id, BOB.public_key, BOB.sender_id)
    with pytest.raises(ValueError, match="not the id of this identity key"):
        safety_number(ALICE.public_key, BOB.sender_id, BOB.public_key, ALICE.sender_id)
    with pytest.raises(ValueError, match="not the id"):
        fingerprint(ALICE.public_key, "")
