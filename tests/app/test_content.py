"""Typed content (app/chat/content.py): framing, decoding, and the folded conversation view."""

from __future__ import annotations

import hashlib
import itertools
import json
import random

import pytest

from app.chat import chat_content_pb2 as cpb
from app.chat import content_pb2 as pb
from app.chat.content import (
    MAGIC,
    ConversationView,
    decode,
    decode_content,
    encode_delete,
    encode_edit,
    encode_membership,
    encode_nick,
    encode_reaction,
    encode_reply,
    encode_topic,
    is_typed,
)
from app.chat.files import safe_filename, save_file, split_file
from app.chat.lines import encode_content

A, B = "a" * 64, "b" * 64  # sender ids


def mid(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


# ------------------------------------------------------------------ framing


@pytest.mark.parametrize(
    "text", ["hello", "", "ÿ not magic", "\u00ff", "日本語", '{"v":1}', "\x7f", "ﬀ"]
)
def test_plain_utf8_never_reads_as_typed(text: str) -> None:
    raw = text.encode("utf-8")
    assert not is_typed(raw)
    d = decode(raw)
    assert d.kind == "raw" and d.text == text


def test_sdschat_json_lines_still_read_as_text() -> None:
    d = decode(encode_content("hi there", "alice", "me"))
    assert (d.kind, d.text, d.name) == ("me", "hi there", "alice")


def test_typed_content_is_never_valid_utf8() -> None:
    for raw in (
        encode_reaction(mid(1), "👍", "a"),
        encode_delete(mid(1), "a"),
        *split_file("f.bin", b"data", "a"),
    ):
        assert raw[:1] == MAGIC
        with pytest.raises(UnicodeDecodeError):
            raw.decode("utf-8")


def test_typed_content_reads_as_foreign_text_in_older_readers() -> None:
    """An sdschat before typed content (JSON or raw text) and a js-waku peer (UTF-8 with
    replacement) see undecodable text, never an exception or a forged line."""
    import json

    raw = encode_reply(mid(1), "hello", "bob")
    with pytest.raises(ValueError):
        json.loads(raw)
    assert raw.decode("utf-8", errors="replace").startswith("\ufffd")


def test_round_trips() -> None:
    t = mid(1)
    r = decode(encode_reply(t, "yes", "bob"))
    assert (r.kind, r.target_id, r.text, r.name) == ("reply", t, "yes", "bob")
    e = decode(encode_reaction(t, "👍", "bob", remove=True))
    assert (e.kind, e.emoji, e.remove) == ("reaction", "👍", True)
    assert decode(encode_edit(t, "fixed", "bob")).text == "fixed"
    assert decode(encode_delete(t, "bob")).target_id == t
    assert decode(encode_topic("plans", "bob")).text == "plans"
    n = decode(encode_nick("bob", "robert"))
    assert (n.kind, n.text, n.name) == ("nick", "bob is now known as robert", "robert")
    j = decode(encode_membership("bob", "ops", joined=True))
    assert (j.kind, j.text) == ("join", "bob joined #ops")
    assert decode(encode_membership("bob", "ops", joined=False)).kind == "leave"


def test_the_tui_format_is_the_one_written() -> None:
    """Replies, reactions, edits and deletions are the TUI's ``FF 'S' 'C' 02`` +
    ``TypedContent`` (app/chat/chat_content.proto); topic/nick/join/leave its JSON kinds."""
    t = mid(1)
    raw = encode_reaction(t, "👍", "bob")
    assert raw.startswith(b"\xffSC\x02")
    msg = cpb.TypedContent()
    msg.ParseFromString(raw[4:])
    assert (msg.version, msg.reaction.target, msg.reaction.emoji) == (2, t, "👍")
    by_hand = (
        b"\xffSC\x02"
        + cpb.TypedContent(
            version=2, name="eve", edit=cpb.Edit(target=t, text="new")
        ).SerializeToString()
    )
    assert (decode(by_hand).kind, decode(by_hand).text) == ("edit", "new")
    line = json.loads(encode_topic("q3", "bob"))
    assert line == {"v": 1, "name": "bob", "kind": "topic", "text": "q3"}


def test_reply_quote_is_short() -> None:
    view = ConversationView(
        [(mid(1), A, 1, text("x" * 1000)), (mid(2), B, 2, encode_reply(mid(1), "yes", "bob"))]
    )
    r = view.items()[1].reply
    assert r is not None and len(r.quote) == 120 and r.quote.endswith("…")


@pytest.mark.parametrize(
    "call",
    [
        lambda: encode_reply("nothex", "t", "a"),
        lambda: encode_reply(mid(1), "  ", "a"),
        lambda: encode_reaction(mid(1), "", "a"),
        lambda: encode_reaction(mid(1), "a b", "a"),
        lambda: encode_reaction(mid(1), "x" * 17, "a"),
        lambda: encode_edit(mid(1).upper(), "t", "a"),
        lambda: encode_delete(mid(1)[:10], "a"),
        lambda: encode_topic("x" * 501, "a"),
    ],
)
def test_bad_input_is_refused(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


def test_unknown_type_and_version_are_shown_not_dropped() -> None:
    future_type = (
        MAGIC
        + pb.Content(version=1, type=42, name="z").SerializeToString()
        + bytes([0xFA, 0x03, 0x02, 0x08, 0x01])  # field 63 (a body this version does not know)
    )
    d = decode(future_type)
    assert (d.kind, d.text) == ("unsupported", "unsupported message (type 42, version 1)")
    newer = MAGIC + pb.Content(version=2, type=10, name="z").SerializeToString()
    assert decode(newer).text == "unsupported message (type 10, version 2)"
    # a TypedContent body of a later version: named by its field number
    later = (
        b"\xffSC\x02"
        + cpb.TypedContent(version=3, name="z").SerializeToString()
        + bytes([0xA2, 0x06, 0x02, 0x08, 0x01])  # field 100
    )
    assert decode(later).text == "unsupported message (type 100, version 3)"
    # a known body under the wrong type, bad ids, garbage: unsupported, never an exception
    segment = split_file("f", b"x", "a")[1]
    wrong = pb.Content()
    wrong.ParseFromString(segment[1:])
    wrong.type = 10
    assert decode(MAGIC + wrong.SerializeToString()).kind == "unsupported"
    bad_id = (
        b"\xffSC\x02"
        + cpb.TypedContent(version=2, delete=cpb.Delete(target="zz")).SerializeToString()
    )
    assert decode(bad_id).text == "unsupported message (type 13, version 2)"
    rng = random.Random(7)
    for _ in range(2000):
        blob = MAGIC + rng.randbytes(rng.randrange(0, 40))
        assert decode(blob).kind in {
            "unsupported",
            "msg",
            "me",
            "reply",
            "reaction",
            "edit",
            "delete",
            "topic",
            "nick",
            "join",
            "leave",
            "file",
            "segment",
        }
    view = ConversationView([(mid(1), A, 1, future_type)])
    [item] = view.items()
    assert item.kind == "unsupported" and "type 42" in item.text


def test_chat_content_decoder_summarises_typed_content() -> None:
    c = decode_content(encode_reaction(mid(1), "🎉", "bob"))
    assert c.kind in ("reaction", "react") and c.name == "bob" and "🎉" in c.text
    f = decode_content(split_file("notes.txt", b"hello", "bob")[0])
    assert (f.kind, f.name, f.text) == ("file", "bob", "file notes.txt (5 bytes)")


# ------------------------------------------------------------------ the view


def text(t: str, name: str = "alice") -> bytes:
    return encode_content(t, name)


def test_view_folds_reply_reactions_edit_delete_topic() -> None:
    log = [
        (mid(1), A, 1, text("hello all")),
        (mid(2), B, 2, encode_reply(mid(1), "hi alice", "bob")),
        (mid(3), B, 3, encode_reaction(mid(1), "👍", "bob")),
        (mid(4), A, 4, encode_reaction(mid(1), "👍", "alice")),
        (mid(5), A, 5, encode_edit(mid(1), "hello everyone", "alice")),
        (mid(6), A, 6, text("oops", "alice")),
        (mid(7), A, 7, encode_delete(mid(6), "alice")),
        (mid(8), B, 8, encode_topic("release plans", "bob")),
        (mid(9), B, 9, encode_reaction(mid(2), "❤", "bob")),
        (mid(10), B, 10, encode_reaction(mid(2), "❤", "bob", remove=True)),  # taken back
    ]
    view = ConversationView(log)
    items = {i.message_id: i for i in view.items()}
    assert set(items) == {mid(1), mid(2), mid(6), mid(8)}
    first = items[mid(1)]
    assert (first.text, first.original, first.edited) == ("hello everyone", "hello all", True)
    assert first.reactions == {"👍": (B, A)}
    reply = items[mid(2)]
    assert reply.reply is not None and reply.reply.present
    assert reply.reply.quote == "hello everyone" and reply.reply.target_sender == A
    assert reply.reactions == {}
    assert items[mid(6)].deleted and items[mid(6)].text == ""
    assert view.topic == "release plans"
    assert [i.kind for i in view.items()] == ["msg", "reply", "msg", "topic"]


def test_deleting_the_latest_topic_restores_the_previous_one() -> None:
    view = ConversationView(
        [
            (mid(1), A, 1, encode_topic("first", "alice")),
            (mid(2), B, 2, encode_topic("second", "bob")),
        ]
    )
    assert view.topic == "second"
    view.add(mid(3), A, 3, encode_delete(mid(2), "alice"))  # not hers: ignored
    assert view.topic == "second"
    view.add(mid(4), B, 4, encode_delete(mid(2), "bob"))
    assert view.topic == "first"
    view.add(mid(5), A, 5, encode_topic("", "alice"))
    assert view.topic == ""


def test_only_the_author_edits_or_deletes() -> None:
    view = ConversationView(
        [
            (mid(1), A, 1, text("mine")),
            (mid(2), B, 2, encode_edit(mid(1), "hijacked", "mallory")),
            (mid(3), B, 3, encode_delete(mid(1), "mallory")),
        ]
    )
    [item] = view.items()
    assert (item.text, item.edited, item.deleted) == ("mine", False, False)


def test_latest_edit_wins_and_remove_flag() -> None:
    view = ConversationView(
        [
            (mid(1), A, 1, text("v1")),
            (mid(3), A, 30, encode_edit(mid(1), "v3", "alice")),
            (mid(2), A, 20, encode_edit(mid(1), "v2", "alice")),
            (mid(4), B, 4, encode_reaction(mid(1), "👍", "bob")),
            (mid(5), B, 5, encode_reaction(mid(1), "👍", "bob", remove=True)),
            (mid(6), B, 6, encode_reaction(mid(1), "👍", "bob", remove=True)),  # stays off
            (mid(7), A, 7, encode_reaction(mid(1), "👀", "alice")),
            (mid(8), A, 8, encode_reaction(mid(1), "👀", "alice")),  # twice: still once
        ]
    )
    [item] = view.items()
    assert item.text == "v3" and item.reactions == {"👀": (A,)}


def test_reply_to_deleted_and_missing_targets() -> None:
    view = ConversationView([(mid(2), B, 2, encode_reply(mid(1), "yes", "bob"))])
    [r] = view.items()
    assert r.reply is not None and not r.reply.present and r.reply.quote == ""
    view.add(mid(1), A, 1, text("the target"))
    r = view.items()[1]
    assert r.reply is not None and r.reply.present and r.reply.quote == "the target"
    view.add(mid(3), A, 3, encode_delete(mid(1), "alice"))
    r = view.items()[1]
    assert r.reply is not None and r.reply.quote == "message deleted"


def test_order_of_arrival_does_not_change_the_view() -> None:
    log = [
        (mid(1), A, 1, text("hello")),
        (mid(2), B, 2, encode_reply(mid(1), "hi", "bob")),
        (mid(3), B, 3, encode_reaction(mid(1), "👍", "bob")),
        (mid(4), A, 4, encode_edit(mid(1), "hello!", "alice")),
        (mid(5), B, 5, encode_reaction(mid(1), "👍", "bob", remove=True)),
        (mid(6), B, 6, encode_reaction(mid(1), "🎉", "bob")),
        (mid(7), A, 7, encode_topic("a", "alice")),
        (mid(8), B, 8, encode_topic("b", "bob")),
        (mid(9), A, 9, text("bye")),
        (mid(10), A, 10, encode_delete(mid(9), "alice")),
    ]
    expected = ConversationView(log).items()
    rng = random.Random(3)
    for _ in range(50):
        shuffled = log[:]
        rng.shuffle(shuffled)
        view = ConversationView()
        for m in itertools.chain(shuffled, shuffled[:3]):  # duplicates ignored
            view.add(*m)
        assert view.items() == expected
        assert view.topic == "b"
    assert expected[0].reactions == {"🎉": (B,)} and expected[0].text == "hello!"


# ------------------------------------------------------------------ files


def test_file_split_reassemble_and_save(tmp_path: object) -> None:
    from pathlib import Path

    base = Path(str(tmp_path))
    data = random.Random(1).randbytes(300_000)
    parts = split_file("../../etc/passwd", data, "alice")
    assert len(parts) == 1 + 7 and all(len(p) < 64 * 1024 for p in parts)
    view = ConversationView()
    view.add(mid(0), A, 0, parts[0])
    st = view.file_status(mid(0))
    assert st is not None and (st.present, st.total, st.complete, st.intact) == (0, 7, False, None)
    with pytest.raises(ValueError, match="0/7"):
        save_file(view, mid(0), base)
    # segments by someone else do not count
    view.add(mid(100), B, 1, parts[1])
    assert view.file_status(mid(0)).present == 0  # type: ignore[union-attr]
    for i, p in enumerate(reversed(parts[1:])):
        view.add(mid(i + 1), A, i + 1, p)
    st = view.file_status(mid(0))
    assert st is not None and st.complete and st.intact and st.progress == 1.0
    [item] = view.items()
    assert item.kind == "file" and item.file == st
    saved = save_file(view, mid(0), base)
    assert saved == base / "files" / "passwd" and saved.read_bytes() == data
    again = save_file(view, mid(0), base)
    assert again.name == "passwd (1)"


def test_view_without_file_data_counts_segments_only(tmp_path: object) -> None:
    parts = split_file("f.bin", b"z" * 200_000, "alice")
    view = ConversationView([(mid(i), A, i, p) for i, p in enumerate(parts)], keep_file_data=False)
    st = view.file_status(mid(0))
    assert st is not None and (st.present, st.total, st.complete, st.intact) == (5, 5, True, None)
    assert view.file_bytes_unchecked(mid(0)) == b""
    with pytest.raises(ValueError, match="keeps no file data"):
        save_file(view, mid(0), str(tmp_path))


def test_a_segment_sent_twice_resolves_the_same_in_any_order() -> None:
    parts = split_file("f.bin", b"q" * 60_000, "alice")
    fake = pb.Content()
    fake.ParseFromString(parts[1][1:])
    fake.file_segment.data = b"X" * len(fake.file_segment.data)
    log = [(mid(i), A, i, p) for i, p in enumerate(parts)]
    log.append((mid(9), A, 9, MAGIC + fake.SerializeToString()))  # later in SDS order
    for order in (log, log[::-1]):
        view = ConversationView(order)
        st = view.file_status(mid(0))
        assert st is not None and st.intact is True


def test_corrupt_file_is_not_saved(tmp_path: object) -> None:
    data = b"x" * 100_000
    parts = split_file("f.bin", data, "alice")
    evil = split_file("f.bin", b"y" * 100_000, "alice")
    m = pb.Content()
    m.ParseFromString(parts[0][1:])
    fid = m.file_manifest.file_id
    view = ConversationView([(mid(0), A, 0, parts[0])])
    for i, p in enumerate(evil[1:]):  # segments of another file re-labelled with this file id
        s = pb.Content()
        s.ParseFromString(p[1:])
        s.file_segment.file_id = fid
        view.add(mid(i + 1), A, i + 1, MAGIC + s.SerializeToString())
    st = view.file_status(mid(0))
    assert st is not None and st.complete and st.intact is False
    with pytest.raises(ValueError, match="sha256"):
        save_file(view, mid(0), str(tmp_path))


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("../../.ssh/authorized_keys", "authorized_keys"),
        ("..\\..\\win.ini", "win.ini"),
        ("/etc/passwd", "passwd"),
        ("..", "file"),
        ("", "file"),
        (".bashrc", "bashrc"),
        ("a\x1b[31mb\x00c.txt", "a[31mbc.txt"),
        ("é" * 300 + ".txt", None),
    ],
)
def test_safe_filename(name: str, safe: str | None) -> None:
    out = safe_filename(name)
    if safe is not None:
        assert out == safe
    assert "/" not in out and "\\" not in out and not out.startswith(".")
    assert len(out.encode()) <= 200
