"""The detail dialogs' texts (app/tui/texts.py) from values alone, and the /mentions
search (app/tui/find.py) over a real SQLite store."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

from rich.text import Text

from app.chat.content import encode_reply
from app.chat.lines import encode_content
from app.tui.find import search_mentions
from app.tui.model import Row, mentions
from app.tui.readers import HaveIt
from app.tui.texts import (
    Holders,
    PeerLine,
    ago,
    info_text,
    mentions_text,
    names_text,
    short_id,
    stats_text,
    who_text,
)
from storage import LogEntry, Store, StoredMessage

NOW = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC
ME = "a" * 32
BOB = "b" * 32
CAROL = "c" * 32


def dim_lines(text: Text) -> list[str]:
    """The lines of ``text`` drawn dim (a style span covering them)."""
    plain = text.plain
    out = []
    for span in text.spans:
        if "dim" in str(span.style):
            out += [line for line in plain[span.start : span.end].split("\n") if line]
    return out


def peer(sid: str, name: str, *, online: bool, away: str | None = None, seen_s: int = 5,
         messages: int = 1, label: str | None = None) -> PeerLine:  # fmt: skip
    return PeerLine(sid, name, label or name, online, away, NOW - seen_s * 1000, messages)


def test_ago_and_short_id() -> None:
    assert [ago(s) for s in (-3, 0, 59, 60, 3599, 3600, 7300)] == [
        "0s ago", "0s ago", "59s ago", "1m ago", "59m ago", "1h ago", "2h ago"]  # fmt: skip
    assert short_id("ab" * 8) == "ab" * 8
    assert short_id("f" * 64) == "f" * 23 + "…" and len(short_id("f" * 64)) == 24
    assert short_id("\x1b[2J" + "x" * 40).startswith("\\x1b[2J")  # a peer's id, made visible


def test_who_lists_you_then_each_peer_with_its_state() -> None:
    peers = [
        peer(BOB, "bob", online=True, seen_s=12, messages=3, label="bob (bbbb)"),
        peer(CAROL, "carol", online=False, seen_s=7200, messages=1),
        peer("d" * 32, "dave", online=True, away="away: lunch", seen_s=90, messages=0),
    ]
    lines = who_text("alice", ME, peers, NOW).plain.splitlines()
    assert lines == [
        f"alice  {ME}  (you)",
        f"bob (bbbb)  {BOB}  online, heard from 12s ago, 3 messages",
        f"carol  {CAROL}  away, heard from 2h ago, 1 message",
        f"dave  {'d' * 32}  away: lunch, heard from 1m ago, 0 messages",
    ]
    alone = who_text("alice", ME, [], NOW)
    assert alone.plain.splitlines() == [f"alice  {ME}  (you)", "nobody else heard from yet"]
    assert dim_lines(alone) == ["nobody else heard from yet"]


def test_names_are_online_first_each_group_sorted() -> None:
    peers = [peer(CAROL, "carol", online=False), peer(BOB, "zed", online=True),
             peer("d" * 32, "bob", online=True), peer("e" * 32, "erin", online=False)]  # fmt: skip
    text = names_text("alice", peers)
    assert text.plain.splitlines() == [
        "3 online, 2 heard from earlier", "● alice (you)", "● bob", "● zed", "○ carol", "○ erin",
    ]  # fmt: skip
    assert dim_lines(text) == ["○ carol", "○ erin"]
    assert names_text("alice", []).plain.splitlines() == ["1 online", "● alice (you)"]


def entry(mid: str, sender: str, content: bytes, lamport: int) -> LogEntry:
    return LogEntry(channel="general", message_id=mid, sender_id=sender, lamport=lamport,
                    content=content, state=None, delivered_at=lamport, received_at=lamport)


def test_mentions_one_line_each_without_the_quote_and_escaped() -> None:
    found = [
        ("ops", entry("1" * 64, BOB, encode_content("ping @alice\nsecond line", "bob"),
                      NOW + 60_000)),
        ("general", entry("2" * 64, CAROL, encode_reply("9" * 64, "yes @alice", "carol"), NOW)),
        ("general", entry("3" * 64, "d" * 32, encode_content("\x1b[2J" + "x" * 300, "dave"),
                          NOW)),
    ]  # fmt: skip
    lines = mentions_text(found, "alice", UTC).plain.splitlines()
    assert lines[0] == "2026-01-01 00:01 #ops bob: ping @alice second line"
    assert lines[1] == "2026-01-01 00:00 #general carol: yes @alice"
    # a peer's text cannot steer the terminal; 200 characters of it, on one line
    assert lines[2] == "2026-01-01 00:00 #general dave: \\x1b[2J" + "x" * 196
    empty = mentions_text([], "alice", UTC)
    assert empty.plain == "nobody mentioned @alice yet" and dim_lines(empty) == [empty.plain]


async def test_search_mentions_finds_lines_for_you_newest_first(tmp_path: Path) -> None:
    async with await Store.open(tmp_path) as store:
        for ch in ("general", "ops"):
            await store.join_channel(ch, ch.encode() * 4, is_public=True)
        msgs = [
            ("general", "01", BOB, encode_content("hi @alice", "bob"), NOW),
            ("general", "02", ME, encode_content("me @alice", "alice"), NOW + 1),  # own
            ("general", "03", BOB, encode_content("about the relay", "bob"), NOW + 2),
            ("ops", "04", CAROL, encode_content("@alice look", "carol"), NOW + 3),
            ("ops", "05", CAROL, encode_reply("04" * 32, "@alice again", "carol"), NOW + 4),
            ("ops", "06", CAROL, encode_content("@alicetta no", "carol"), NOW + 5),
        ]
        await store.insert_messages(
            StoredMessage(channel=ch, message_id=mid * 32, sender_id=sid, lamport=lamport,
                          content=content, delivered_at=lamport)
            for ch, mid, sid, content, lamport in msgs
        )

        def for_me(text: str) -> bool:
            return mentions(text, "alice") or "relay" in text

        found = await search_mentions(store, ["general", "ops"], ["@alice", "relay"], me=ME,
                                      mentions=for_me)  # fmt: skip
        assert [(ch, e.message_id[:2]) for ch, e in found] == [
            ("ops", "05"), ("ops", "04"), ("general", "03"), ("general", "01")]  # fmt: skip
        # limit: of each search (the newest 2 with "@alice": one is yours, one @alicetta)
        few = await search_mentions(store, ["general", "ops"], ["@alice"], me=ME,
                                    mentions=for_me, limit=2)  # fmt: skip
        assert [e.message_id[:2] for _, e in few] == ["05", "01"]
        assert await search_mentions(store, ["nowhere"], ["@alice"], me=ME,
                                     mentions=for_me) == []  # fmt: skip


def row(**kw: object) -> Row:
    base: dict[str, object] = {"key": (NOW, "f" * 64), "sender_id": BOB, "name": "bob",
                               "kind": "msg", "text": "hello", "time_ms": NOW + 2000,
                               "message_id": "f" * 64}  # fmt: skip
    base.update(kw)
    return Row(**base)  # type: ignore[arg-type]


def fields(text: Text) -> dict[str, str]:
    out = {}
    for line in text.plain.splitlines():
        if not line.startswith(" "):
            out[line[:18].strip()] = line[18:]
    return out


def labels(sid: str) -> str:
    return {BOB: "bob", CAROL: "carol", "d" * 32: "dave"}.get(sid, sid[:8])


def test_info_of_a_received_message_with_its_stored_dependencies() -> None:
    deps = tuple(f"{i:02x}" * 32 for i in range(14))
    stored = StoredMessage(channel="general", message_id="f" * 64, sender_id=BOB,
                           lamport=NOW, content=b"x", causal_history=deps,
                           retrieval_hint=b"\x01\xff")  # fmt: skip
    r = row(reactions={"👍": [ME, CAROL]}, lost=2)
    text = info_text(r, tz=UTC, me=ME, label=labels, stored=stored, have={deps[-1]})
    f = fields(text)
    assert f["author"] == "bob" and f["sender id"] == BOB
    assert f["sent"] == "2026-01-01 00:00:00  (author's clock)"
    assert f["arrived"] == "2026-01-01 00:00:02  (this screen's clock)"
    assert f["message id"] == "f" * 64 and f["lamport"] == str(NOW)
    assert f["delivery"] == "delivered (in causal order)" and f["lost before it"] == "2"
    assert f["retrieval hint"] == "01ff" and f["depends on"] == "14 message(s)"
    lines = text.plain.splitlines()
    assert "  👍 2  you, carol" in lines
    assert f"  ✓ {short_id(deps[-1])}" in lines and f"  · {short_id(deps[2])}" in lines
    assert f"  · {short_id(deps[1])}" not in lines  # the 12 newest only, then a count
    assert "  … and 2 older" in lines
    assert "who has it" not in f  # no holders read: no section


def test_info_of_an_own_message_not_made_yet_and_of_one_waiting() -> None:
    own = row(sender_id=ME, message_id=None, local_id=7, own_state="queued",
              key=(2**63 - 1, ""), time_ms=NOW)  # fmt: skip
    f = fields(info_text(own, tz=UTC, me=ME, label=labels))
    assert f["typed"] == "2026-01-01 00:00:00  (this screen's clock)"
    assert f["message id"] == "(not made yet: outbox line 7)" and f["lamport"] == "—"
    assert f["delivery"].startswith("queued")
    dep_a, dep_b = "0a" * 32, "0b" * 32
    waiting = row(waiting_for={dep_b, dep_a}, arrived={dep_b}, name=None)
    text = info_text(waiting, tz=UTC, me=ME, label=labels)
    f = fields(text)
    assert f["author"] == "?" and f["delivery"] == "waiting for 2 earlier message(s)"
    lines = text.plain.splitlines()
    assert lines[-2:] == [f"  ⋯ {short_id(dep_a)}",
                          f"  ⋯ {short_id(dep_b)}  (arrived, waits in its turn)"]  # fmt: skip


def test_info_who_has_it_counts_the_others_shown_first() -> None:
    dave = "d" * 32
    found = HaveIt(by_history={CAROL: "1" * 64}, by_filter=[], scanned=40, complete=False)
    r = row()  # bob's message: bob and you are not counted
    text = info_text(r, tz=UTC, me=ME, label=labels,
                     holders=Holders([BOB, CAROL, dave], found))  # fmt: skip
    lines = text.plain.splitlines()
    i = next(n for n, x in enumerate(lines) if x.startswith("who has it"))
    assert lines[i] == "who has it        1 of 2 other members (besides the author and you)"
    assert lines[i + 1 :] == ["  ✓ carol  causal history",
                              "  · dave  no sign yet in the 40 messages after it"]  # fmt: skip
    # own message: a bloom filter and an acknowledgement beyond the scan count too
    mine = row(sender_id=ME, own_state="acknowledged", seen_by=[dave])
    found = HaveIt(by_history={}, by_filter=[CAROL], scanned=3, complete=True)
    lines = info_text(mine, tz=UTC, me=ME, label=labels,
                      holders=Holders([BOB, CAROL], found)).plain.splitlines()  # fmt: skip
    i = next(n for n, x in enumerate(lines) if x.startswith("who has it"))
    assert lines[i:] == ["who has it        2 of 3 other members (besides you)",
                         "  ✓ carol  bloom filter", "  ✓ dave  causal history",
                         "  · bob  no sign yet"]  # fmt: skip
    # nobody but the author heard from: nothing to say
    none = info_text(r, tz=UTC, me=ME, label=labels, holders=Holders([BOB], HaveIt()))
    assert "who has it" not in none.plain
    failed = info_text(r, tz=UTC, me=ME, label=labels,
                       holders=Holders([BOB], None, "database is locked"))  # fmt: skip
    assert failed.plain.splitlines()[-1] == "who has it        not known (database is locked)"


def test_stats_are_lines_counters_first_keys_sorted() -> None:
    stats = {
        "channels": {"ops": {"unacked": 0, "missing": 2}, "general": {}},
        "store": None,
        "counters": {"sent": 4, "received": 9},
        "connected": True,
        "peers": ["b", "a"],
        "lan": [],
    }
    assert stats_text(stats).splitlines() == [
        "connected: True",
        "counters:",
        "  received: 9",
        "  sent: 4",
        "store: -",
        "channels:",
        "  general: none",
        "  ops:",
        "    missing: 2",
        "    unacked: 0",
        "lan: none",
        "peers: b, a",
    ]
