"""The TUI's rules without Textual: the channel model, commands, completion, typing."""

from __future__ import annotations

from app.commands.table import COMMANDS, complete, parse
from app.node.events import ChannelJoined, Delivered, Lost, Missing, OwnMessage
from app.tui.model import MAX_WINDOW, PENDING_LAMPORT, ChatModel, Row, mentions
from app.tui.typing import TypingThrottle, decode_typing, encode_typing, typing_text

ME = "a" * 32
BOB = "b" * 32


def model() -> ChatModel:
    m = ChatModel(ME, "alice")
    m.apply(ChannelJoined("general", True, "00", 0), 0)
    m.channels["general"].loaded = True
    return m


def delivered(
    mid: str,
    lamport: int,
    text: str = "",
    channel: str = "general",
    lost: int = 0,
    recovered: bool = False,
) -> Delivered:
    return Delivered(
        channel, mid, BOB, "bob", "msg", text or mid, lamport, 0, lost, recovered=recovered
    )


def texts(m: ChatModel, channel: str = "general") -> list[str]:
    return [r.text for r in m.channels[channel].rows]


def test_mentions_are_whole_words() -> None:
    assert mentions("hey @alice!", "alice")
    assert mentions("@ALICE look", "alice")
    assert not mentions("hey @alicex", "alice")
    assert not mentions("mail alice@example.org", "alice")
    # issue 27 item 4: the bare nick and "nick: " (Tab at the start of a line) too
    assert mentions("hey alice", "alice") and mentions("alice: look", "alice")
    assert mentions("Alice, look", "alice")
    assert not mentions("malice", "alice") and not mentions("alice-bob", "alice")
    assert not mentions("/home/alice/x", "alice")


def test_waiting_message_then_dependencies_in_causal_order() -> None:
    m = model()
    m.apply(delivered("m1", 1), 0)
    ch = m.apply(Missing("general", "m4", BOB, ("m2", "m3"), True, 4, "bob", "msg", "four"), 0)
    assert "general" in ch.channels and ch.status
    view = m.channels["general"]
    row = view.find_message("m4")
    assert row is not None and row.waiting_for == {"m2", "m3"}
    m.apply(delivered("m3", 3, recovered=True), 0)  # late: the node says so
    assert row.waiting_for == {"m2"}
    assert view.find_message("m3").recovered  # type: ignore[union-attr]
    assert not view.find_message("m1").recovered  # type: ignore[union-attr]
    m.apply(delivered("m2", 2, recovered=True), 0)
    m.apply(delivered("m4", 4, "four"), 0)
    assert not row.waiting and row.lost == 0
    assert texts(m) == ["m1", "m2", "m3", "four"]
    assert view.missing == {}


def test_a_missing_dependency_that_arrives_and_waits_is_no_longer_counted_missing() -> None:
    """m4 reported m3 missing; m3 then arrives but waits for m2: m4's marker counts m3
    as arrived (shown above), not missing, until it is delivered."""
    from rich.console import Console

    from app.tui.render import palette, row_lines

    m = model()
    m.apply(Missing("general", "m4", BOB, ("m3",), True, 4, "bob", "msg", "four"), 0)
    view = m.channels["general"]
    row = view.find_message("m4")
    assert row is not None and row.waiting_for == {"m3"} and row.arrived == set()
    version = row.version
    m.apply(Missing("general", "m3", BOB, ("m2",), True, 3, "bob", "msg", "three"), 0)
    assert row.waiting_for == {"m3"} and row.arrived == {"m3"} and row.version > version
    shown = "\n".join(t.plain for t in row_lines(row, 80, Console(), palette(True)))
    assert "waiting for 1 earlier message above" in shown and "missing" not in shown
    m.apply(delivered("m2", 2), 0)
    m.apply(delivered("m3", 3, "three"), 0)
    assert row.waiting_for == set() and row.arrived == set()


def test_lost_dependency_marks_the_waiting_message() -> None:
    m = model()
    m.apply(Missing("general", "m2", BOB, ("m1",), True, 2, "bob", "msg", "two"), 0)
    m.apply(Lost("general", "m1", ("m2",)), 0)
    row = m.channels["general"].find_message("m2")
    assert row is not None and row.lost == 1 and not row.waiting
    m.apply(delivered("m2", 2, "two", lost=1), 0)
    assert row.lost == 1 and texts(m) == ["two"]


def test_one_lost_report_for_many_ids_marks_each_waiting_message() -> None:
    """The node reports every id given up in a round in one Lost (message_ids)."""
    m = model()
    m.apply(Missing("general", "m3", BOB, ("m1", "m2"), True, 3, "bob", "msg", "three"), 0)
    m.apply(Missing("general", "m4", BOB, ("m2",), True, 4, "bob", "msg", "four"), 0)
    m.apply(Lost("general", "m1", ("m3", "m4"), ("m1", "m2")), 0)
    view = m.channels["general"]
    three, four = view.find_message("m3"), view.find_message("m4")
    assert three is not None and four is not None
    assert (three.lost, four.lost) == (2, 1)
    assert not three.waiting and not four.waiting and view.missing == {}


def test_sync_reminders_without_text_add_no_rows() -> None:
    m = model()
    m.apply(Missing("general", "sync1", BOB, ("m1",), True), 0)
    assert texts(m) == []


def test_own_message_moves_forward_only() -> None:
    m = model()
    m.apply(OwnMessage("general", "queued", local_id=1, text="hi", kind="msg"), 0)
    view = m.channels["general"]
    assert view.rows[0].key[0] == PENDING_LAMPORT and view.rows[0].own_state == "queued"
    m.apply(OwnMessage("general", "logged", 1, "mine", 10, 0, "hi", "msg"), 0)
    assert view.rows[0].key == (10, "mine")
    for state in ("sent", "possibly_acknowledged", "sent", "acknowledged", "possibly_acknowledged"):
        m.apply(OwnMessage("general", state, 1, "mine"), 0)
    assert view.rows[0].own_state == "acknowledged"
    ch = m.apply(OwnMessage("general", "failed", None, "mine"), 0)
    assert view.rows[0].own_state == "acknowledged" and not ch.notices


def test_own_message_records_who_showed_they_have_it() -> None:
    """/info's "who has it": a causal-history acknowledgement into ``seen_by``, a bloom
    filter hit (possibly acknowledged, or acknowledged by filters) into ``filter_hits``,
    even when the state does not move forward."""
    m = model()
    m.apply(OwnMessage("general", "queued", local_id=1, text="hi", kind="msg"), 0)
    m.apply(OwnMessage("general", "logged", 1, "mine", 10, 0, "hi", "msg"), 0)
    row = m.channels["general"].rows[0]
    m.apply(OwnMessage("general", "possibly_acknowledged", 1, "mine",
                       detail={"hits": 1, "threshold": 2, "by": "carol"}), 0)  # fmt: skip
    m.apply(OwnMessage("general", "acknowledged", 1, "mine",
                       detail={"by": "dave", "causal": False}), 0)  # fmt: skip
    m.apply(OwnMessage("general", "acknowledged", 1, "mine",
                       detail={"by": "bob", "causal": True}), 0)  # fmt: skip
    assert row.seen_by == ["bob"] and row.filter_hits == ["carol", "dave"]


def test_failed_own_message_is_noticed() -> None:
    m = model()
    m.apply(OwnMessage("general", "queued", local_id=1, text="x", kind="msg"), 0)
    m.apply(OwnMessage("general", "logged", 1, "x1", 5, 0, "x", "msg"), 0)
    ch = m.apply(OwnMessage("general", "failed", 1, "x1"), 0)
    assert m.channels["general"].rows[0].own_state == "failed"
    assert ch.notices and "Ctrl+R" in ch.notices[0][1]
    # an acknowledgement after all (a peer names it later): it did arrive
    m.apply(OwnMessage("general", "acknowledged", 1, "x1"), 0)
    assert m.channels["general"].rows[0].own_state == "acknowledged"


def test_unread_mentions_bell_and_new_line() -> None:
    m = model()
    m.apply(ChannelJoined("random", False, "01", 0), 0)
    m.channels["random"].loaded = True
    m.apply(delivered("r1", 1, channel="random"), 0)
    m.switch("random")
    m.mark_read("random")
    m.switch("general")
    m.apply(delivered("r2", 2, channel="random"), 0)
    ch = m.apply(delivered("r3", 3, "ping @alice", channel="random"), 0)
    view = m.channels["random"]
    assert view.unread == 2 and view.mentioned and ch.bell
    m.switch("random")
    assert view.unread == 0 and not view.mentioned
    assert view.first_new_index() == 1  # above r2
    assert m.cycle(1) == "general" and m.cycle(-1) == "general"  # from random, 2 channels
    assert m.current == "random"  # cycle only names the target: the app switches once


def test_cycling_to_a_channel_keeps_its_new_line() -> None:
    """Ctrl+N used to switch twice (the model, then the app): the second switch found
    nothing unread and the "── new ──" line was gone; /switch kept it."""
    m = model()
    m.apply(ChannelJoined("random", False, "01", 0), 0)
    m.channels["random"].loaded = True
    m.apply(delivered("r1", 1, channel="random"), 0)
    m.switch("random")
    m.mark_read("random")
    m.switch("general")
    m.apply(delivered("r2", 2, channel="random"), 0)
    target = m.cycle(1)
    assert target == "random"
    m.switch(target)
    assert m.channels["random"].first_new_index() == 1


def test_window_is_bounded_while_following_and_kept_while_reading() -> None:
    m = model()
    view = m.channels["general"]
    for i in range(MAX_WINDOW + 50):
        m.apply(delivered(f"m{i:05d}", i + 1), 0)
    assert len(view.rows) == MAX_WINDOW and view.more_before and view.at_tail
    view.following = False  # scrolled up reading: new rows are not pushed in
    m.apply(delivered("late", 10**6), 0)
    assert not view.at_tail and view.new_below == 1 and view.rows[-1].text != "late"


def test_set_page_keeps_live_rows() -> None:
    m = model()
    view = m.channels["general"]
    m.apply(OwnMessage("general", "queued", local_id=7, text="typing fast", kind="msg"), 0)
    stored = [Row((i, f"s{i}"), BOB, "bob", "msg", f"s{i}", 0, message_id=f"s{i}") for i in (1, 2)]
    view.set_page(stored, at_tail=True, more_before=False)
    assert texts(m) == ["s1", "s2", "typing fast"]
    assert view.find_message("s2") is stored[1]


def test_commands_parse() -> None:
    assert parse("hello").name == "say"  # type: ignore[union-attr]
    assert parse("//slash").arg == "/slash"  # type: ignore[union-attr]
    assert parse("/ME waves").name == "me"  # type: ignore[union-attr]
    assert parse("/join").name == "error"  # type: ignore[union-attr]
    assert parse("/nope").name == "error"  # type: ignore[union-attr]
    assert parse("   ") is None
    names = {c.name for c in COMMANDS}
    assert {"join", "leave", "nick", "me", "who", "info", "search", "retry", "passphrase",
            "quit", "help"} <= names  # fmt: skip


def test_completion() -> None:
    assert complete("/he", 3) == ("/help ", 6, ["/help"])
    line, _, cands = complete("/s", 2)  # type: ignore[misc]
    assert line == "/s" and set(cands) == {"/switch", "/send", "/save", "/search", "/stats"}
    assert complete("@ca", 3, names=["carol", "bob"]) == ("@carol ", 7, ["@carol"])
    assert complete("ca", 2, names=["carol"]) == ("carol: ", 7, ["carol"])
    assert complete("/join ra", 8, known_channels=["random"])[0] == "/join random "  # type: ignore[index]
    assert complete("/leave #ge", 10, joined=["general"])[0] == "/leave general "  # type: ignore[index]
    assert complete("zzz", 3, names=["carol"]) is None
    assert complete("hi there", 2, names=["hillary"])[0] == "hillary: there"  # type: ignore[index]


def test_typing_notices() -> None:
    assert decode_typing(encode_typing("bob")) == "bob"
    assert decode_typing(b'{"v":1,"kind":"msg","text":"x"}') is None
    assert decode_typing(b"\xff") is None
    t = TypingThrottle(3.0)
    assert t.should_send("g", 0.0) and not t.should_send("g", 2.9) and t.should_send("g", 3.0)
    t.reset("g")
    assert t.should_send("g", 3.1)
    assert typing_text(["bob"]) == "bob is typing…"
    assert typing_text(["carol", "bob"]) == "bob and carol are typing…"
    assert typing_text(["a", "b", "c", "d"]) == "4 people are typing…"
    m = model()
    assert m.typing("general", BOB, "bob", 5.0)
    assert not m.typing("general", ME, "alice", 5.0)
    assert m.expire_typing(4.0) == set() and m.expire_typing(5.0) == {"general"}


def test_wide_nicknames_keep_the_author_column() -> None:
    """The nick column is measured in terminal cells: a CJK name used to push the
    separator right by its extra width."""
    from rich.cells import cell_len

    from app.tui.render import _nick

    for name in ("alice", "中文名", "中文名字很长的名字abc", "x" * 30, "👍🏽ok"):
        assert cell_len(_nick(name, 10)) == 10, name
    # a long name keeps its start and its end around "…" (alice-laptop, alice-phone)
    assert _nick("中文名字很长的名字abc", 10) == "中文名…abc"
    assert _nick("alice-laptop", 10) != _nick("alice-phone", 10)
    assert _nick("bob", 10) == "       bob"


def test_alt_digit_from_xterm_and_tmux_is_alt_digit() -> None:
    """ESC+1 (Alt+1 in xterm, tmux, GNOME Terminal) reaches the app as alt+1, which
    switches channels, instead of Textual's macOS character '¡' typed into the input;
    macOS keeps it (Option+1 types '¡' there); other sequences are untouched."""
    from textual import _ansi_sequences
    from textual._xterm_parser import XTermParser

    from app.tui.keys import use_alt_digits

    def keys(data: str) -> list[str]:
        parser = XTermParser()
        events = [*parser.feed(data), *parser.feed("")]  # "" ends the input
        return [e.key for e in events if hasattr(e, "key")]

    saved = dict(_ansi_sequences.ANSI_SEQUENCES_KEYS)
    try:
        assert keys("\x1b1") == ["inverted_exclamation_mark"]  # Textual's own reading
        assert not use_alt_digits("darwin") and keys("\x1b1") == ["inverted_exclamation_mark"]
        assert use_alt_digits("linux")
        assert keys("\x1b1") == ["alt+1"] and keys("\x1b9") == ["alt+9"]
        assert keys("a\x1b2b") == ["a", "alt+2", "b"]
        assert keys("\x1b[A\x1bOP\x1b") == ["up", "f1", "escape"]
        assert not use_alt_digits("linux")  # once is enough
    finally:
        _ansi_sequences.ANSI_SEQUENCES_KEYS.clear()  # type: ignore[attr-defined]
        _ansi_sequences.ANSI_SEQUENCES_KEYS.update(saved)  # type: ignore[attr-defined]


def test_alt_f_from_xterm_and_tmux_is_alt_f() -> None:
    """Issue 27 item 2: ESC+f (Alt+F in xterm and tmux) reaches the app as alt+f (search
    every channel), not Textual's Ctrl+Right (a word right); letters no action uses keep
    Textual's reading (ESC+b stays Ctrl+Left)."""
    from textual import _ansi_sequences
    from textual._xterm_parser import XTermParser

    from app.tui.keys import use_alt_letters

    def keys(data: str) -> list[str]:
        parser = XTermParser()
        events = [*parser.feed(data), *parser.feed("")]
        return [e.key for e in events if hasattr(e, "key")]

    saved = dict(_ansi_sequences.ANSI_SEQUENCES_KEYS)
    try:
        assert keys("\x1bf") == ["ctrl+right"]  # Textual's own reading
        assert use_alt_letters(["ctrl+f", "alt+f", "alt+a", "f1"]) == ["alt+f"]
        assert keys("\x1bf") == ["alt+f"] and keys("x\x1bfy") == ["x", "alt+f", "y"]
        assert keys("\x1bb") == ["ctrl+left"]
        assert keys("\x1ba") == ["alt+a"]
    finally:
        _ansi_sequences.ANSI_SEQUENCES_KEYS.clear()  # type: ignore[attr-defined]
        _ansi_sequences.ANSI_SEQUENCES_KEYS.update(saved)  # type: ignore[attr-defined]


def test_a_conflict_marks_the_message_shown_and_one_loaded_later() -> None:
    """Issue 14 section 2: two messages under one id are never resolved silently: the
    row we hold is marked disputed (with what differed), also when it enters the
    window after the report (paged in from storage)."""
    from rich.console import Console

    from app.node.events import Conflict
    from app.tui.render import palette, row_lines

    m = model()
    m.apply(delivered("m1", 1, "pay bob 10"), 0)
    ch = m.apply(Conflict("general", "m1", BOB, "c" * 32, "content", 1), 0)
    assert "general" in ch.channels
    row = m.channels["general"].find_message("m1")
    assert row is not None and row.disputed == "content"
    shown = "\n".join(t.plain for t in row_lines(row, 100, Console(), palette(True)))
    assert "pay bob 10" in shown
    assert "⚠ disputed: another member sent a different text under this id" in shown
    m.apply(Conflict("general", "m9", BOB, "c" * 32, "author", 2), 0)  # not in the window
    m.apply(delivered("m9", 9, "later"), 0)
    later = m.channels["general"].find_message("m9")
    assert later is not None and later.disputed == "author"
    assert m.channels["general"].find_message("m1").disputed == "content"  # type: ignore[union-attr]
    plain = m.channels["general"]
    assert all(r.disputed is None for r in plain.rows if r.message_id not in ("m1", "m9"))


def test_messages_from_before_you_joined_show_once_as_a_count_and_key_shares_not_at_all() -> None:
    m = model()
    view = m.channels["general"]

    def event(mid: str, lamport: int, kind: str, text: str) -> Delivered:
        return Delivered("general", mid, BOB, "bob", kind, text, lamport, 0, 0)

    m.apply(event("k1", 1, "keys", "shared keys"), 0)
    for i in range(3):
        m.apply(event(f"s{i}", 2 + i, "sealed", "message from before you joined"), 0)
    m.apply(delivered("m1", 10, "hello"), 0)
    m.apply(event("s3", 5, "sealed", "message from before you joined"), 0)  # a late one
    shown = [r.text for r in view.rows if not r.hidden]
    assert shown == ["4 messages from before you joined", "hello"]
