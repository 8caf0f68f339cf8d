"""Names: when two look alike (UTS #39 skeletons through ICU), how they are told apart, and
what of a peer's text reaches the terminal (app/names.py)."""

from __future__ import annotations

import json
from pathlib import Path

import icu  # type: ignore[import-untyped]
import pytest

from app.chat.lines import json_visible
from app.names import (
    FINGERPRINT_HEX,
    NameBook,
    check_nick,
    clean_name,
    confusable,
    label,
    visible,
)

LOOK_ALIKE = [
    ("alice", "\u0430lice"),  # Cyrillic а
    ("alice", "alic\u0435"),  # Cyrillic е
    ("alice", "Alice"),  # case
    ("alice", "\uff41lice"),  # fullwidth a
    ("alice", "\U0001d41alice"),  # mathematical bold a
    ("rn", "m"),
    ("paypal", "paypa1"),
    ("bob", "b\u200bob"),  # a zero-width space shows nothing
    ("l", "I"),  # folding alone would lose this one: l and I look alike
    ("0", "O"),
]
APART = [("alice", "alicia"), ("bob", "b\u00f3b"), ("alice", "bob"), ("anna", "hanna")]


@pytest.mark.parametrize(("a", "b"), LOOK_ALIKE)
def test_names_that_look_alike_are_confusable(a: str, b: str) -> None:
    assert confusable(a, b) and confusable(b, a)


@pytest.mark.parametrize(("a", "b"), APART)
def test_names_that_differ_visibly_are_not(a: str, b: str) -> None:
    assert not confusable(a, b)


@pytest.mark.parametrize(("a", "b"), [*LOOK_ALIKE, *APART])
def test_icu_are_confusable_never_says_more_than_we_do(a: str, b: str) -> None:
    """ICU's own pairwise test (``SpoofChecker.areConfusable``) is the reference: every
    pair it calls confusable we call confusable too (we add case folding and drop
    invisible characters first, so we may say more, never less)."""
    if icu.SpoofChecker().areConfusable(a, b):
        assert confusable(a, b)


def test_the_name_book_tells_look_alikes_apart_by_a_whole_fingerprint() -> None:
    book = NameBook()
    assert not book.note("a1" * 16, "alice")
    assert not book.shared("alice") and book.label("alice", "a1" * 16) == "alice"
    assert book.note("b2" * 16, "\u0430lice")  # the second author: now shared
    assert book.shared("alice") and book.shared("\u0430lice") and book.shared("ALICE")
    assert book.label("alice", "a1" * 16) == f"alice ({'a1' * 4})"
    assert book.label("\u0430lice", "b2" * 16) == f"\u0430lice ({'b2' * 4})"
    assert FINGERPRINT_HEX == 8
    assert book.others("alice", "a1" * 16) == {"b2" * 16}
    assert not book.note("b2" * 16, "\u0430lice")  # the same again changes nothing
    assert label(None, "c3" * 16, True) == "c3c3c3c3"


def test_bidi_controls_zero_width_and_terminal_escapes_become_visible() -> None:
    text = "a\u202eb\u202c c\u200bd e\u2066f\u2069 \x1b[31mred\x1b[0m \x9b \u00ad \ufeff \u3164"
    shown = visible(text)
    for raw, esc in (("\u202e", "\\u202e"), ("\u200b", "\\u200b"), ("\u2066", "\\u2066"),
                     ("\x1b", "\\x1b"), ("\x9b", "\\x9b"), ("\u00ad", "\\xad"),
                     ("\ufeff", "\\ufeff"), ("\u3164", "\\u3164")):  # fmt: skip
        assert raw not in shown and esc in shown, esc
    assert visible("two\nlines", newlines=True) == "two\nlines"
    assert visible("two\nlines") == "two\\x0alines"
    assert visible("plain text, déjà vu, 日本語") == "plain text, déjà vu, 日本語"


def test_emoji_sequences_keep_their_joiners_and_tags() -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    england = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
    assert visible(f"{family} and {england}") == f"{family} and {england}"
    assert visible("a\u200db") == "a\\u200db"  # a joiner between letters shows
    assert visible("x\U000e0041") == "x\\U000e0041"  # a lone tag character shows


def test_json_output_escapes_the_same_characters_and_stays_the_same_document() -> None:
    doc = json.dumps({"t": "a\u202eb \u200b \U000e0041 \u0085"}, ensure_ascii=False)
    shown = json_visible(doc)
    assert shown.isascii() or all(ch not in shown for ch in "\u202e\u200b\U000e0041\u0085")
    assert json.loads(shown) == json.loads(doc)


def test_names_hold_no_invisible_characters() -> None:
    for bad in ("al\u200bice", "\u3164", "a\u202eb", "bob\u00ad"):
        with pytest.raises(ValueError, match="control or invisible"):
            check_nick(bad)
    assert check_nick(" alice ") == "alice"
    # a peer's claimed name keeps them, visibly: never the bare name it imitates
    assert clean_name("al\u200bice") == "al\\u200bice"
    assert clean_name("\x1b[31mbob") == "\\x1b[31mbob"


def test_a_public_channels_look_alike_claimed_names_are_labelled_with_fingerprints(
    tmp_path: Path,
) -> None:
    """No roster: a line's name is what it claims, and once a second author claims a name
    that looks like another's, the node labels both (headless ``label``, log files)."""
    from app_helpers import MemoryHub, run, start_node, wait_until

    from app.node.events import Delivered

    async def main() -> None:
        hub = MemoryHub()
        carol = await start_node(tmp_path / "carol", hub, name="carol")
        bob = await start_node(tmp_path / "bob", hub, name="bob")
        fake = await start_node(tmp_path / "fake", hub, name="B\u03bfb")  # Greek omicron
        try:
            def got(text: str) -> Delivered | None:
                return next((e for e in carol.events if isinstance(e, Delivered)
                             and e.text == text), None)  # fmt: skip

            await bob.node.send("general", "one")
            await wait_until(lambda: got("one") is not None)
            first = got("one")
            assert first is not None and (first.name, first.label) == ("bob", "bob")
            await fake.node.send("general", "two")
            await bob.node.send("general", "three")
            await wait_until(lambda: got("two") is not None and got("three") is not None)
            two, three = got("two"), got("three")
            assert two is not None and three is not None
            assert two.name == "B\u03bfb" and two.label == f"B\u03bfb ({fake.node.sender_id[:8]})"
            assert three.label == f"bob ({bob.node.sender_id[:8]})"
        finally:
            for h in (carol, bob, fake):
                await h.node.close()

    run(main())
