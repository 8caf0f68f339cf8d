"""The channel log: idempotent inserts, SDS-order paging, lookups, search, own states."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_testkit import mid, msg, open_with_channel, run

from storage import (
    MAX_LAMPORT,
    Identity,
    OwnState,
    StoredMessage,
    UnknownChannelError,
    ValueOutOfRangeError,
)


def test_insert_is_idempotent_and_reports_new(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d", "general", "other") as store:
            first = [msg(1, 10), msg(2, 11), msg(1, 10)]  # duplicate inside the call
            assert await store.insert_messages(first) == [True, True, False]
            assert await store.insert_messages([msg(2, 11), msg(3, 12)]) == [False, True]
            assert await store.insert_message(msg(3, 12)) is False
            # Same id in another channel is a different message.
            assert await store.insert_message(msg(3, 12, channel="other")) is True
            assert await store.count_messages("general") == 3
            assert await store.count_messages("other") == 1
            assert await store.insert_messages([]) == []

    run(body)


def test_replay_after_reopen_is_detected(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"

    async def first() -> None:
        async with await open_with_channel(data_dir) as store:
            assert await store.insert_message(msg(1, 10)) is True

    async def second() -> None:
        async with await open_with_channel(data_dir) as store:
            assert await store.insert_message(msg(1, 10)) is False

    run(first)
    run(second)


def test_unknown_channel_is_refused(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            with pytest.raises(UnknownChannelError, match="nowhere"):
                await store.insert_messages([msg(1, 1), msg(2, 2, channel="nowhere")])
            assert await store.count_messages("general") == 0
            with pytest.raises(UnknownChannelError):
                await store.enqueue_outgoing("nowhere", b"hi")
            with pytest.raises(UnknownChannelError):
                await store.save_core_state("nowhere", b"state")

    run(body)


def test_lamport_range(tmp_path: Path) -> None:
    with pytest.raises(ValueOutOfRangeError):
        msg(1, MAX_LAMPORT + 1)
    with pytest.raises(ValueError):  # it is a ValueError too
        msg(1, -1)

    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            top = replace(msg(1, 0), lamport=MAX_LAMPORT)
            await store.insert_messages([top, msg(2, 0)])
            with pytest.raises(ValueOutOfRangeError):
                await store.insert_message(replace(msg(3, 0), received_at=MAX_LAMPORT + 1))
            assert await store.count_messages("general") == 2
            page = await store.page("general")
            assert [e.lamport for e in page] == [0, MAX_LAMPORT]
            with pytest.raises(ValueOutOfRangeError):
                await store.page("general", before=(MAX_LAMPORT + 1, ""))

    run(body)


def test_page_is_in_sds_order_with_ties_broken_by_id(tmp_path: Path) -> None:
    rows = [msg(i, 100 + i // 3) for i in range(30)]  # three messages per Lamport value
    expected = sorted((m.lamport, m.message_id) for m in rows)

    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            await store.insert_messages(reversed(rows))
            newest = await store.page("general", limit=7)
            assert [e.cursor for e in newest] == expected[-7:]
            older = await store.page("general", before=newest[0].cursor, limit=7)
            assert [e.cursor for e in older] == expected[-14:-7]
            later = await store.page("general", after=expected[2], limit=4)
            assert [e.cursor for e in later] == expected[3:7]
            between = await store.page("general", after=expected[5], before=expected[9], limit=50)
            assert [e.cursor for e in between] == expected[6:9]
            assert await store.page("general", limit=0) == []
            assert await store.page("empty-channel") == []
            everything = [e.cursor async for e in store.iter_log("general", page_size=4)]
            assert everything == expected
            entry = newest[-1]
            source = next(m for m in rows if m.message_id == entry.message_id)
            assert entry.content == source.content
            assert entry.sender_id == "alice" and entry.state is None
            assert entry.received_at == entry.lamport + 1

    run(body)


rows_strategy = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 10_000)),  # (lamport, id seed): many ties
    max_size=60,
    unique_by=lambda r: r[1],
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=rows_strategy, sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_paging_matches_sorted(rows: list[tuple[int, int]], sizes: list[int]) -> None:
    messages = [msg(seed, lamport) for lamport, seed in rows]
    expected = sorted((m.lamport, m.message_id) for m in messages)

    async def body(data_dir: Path) -> None:
        async with await open_with_channel(data_dir) as store:
            await store.insert_messages(messages)
            # Backwards from the newest, page sizes cycling through `sizes`.
            backwards: list[tuple[int, str]] = []
            page = await store.page("general", limit=sizes[0])
            for step in range(len(expected) + 1):
                backwards = [e.cursor for e in page] + backwards
                if len(page) < sizes[step % len(sizes)] or not page:
                    break
                size = sizes[(step + 1) % len(sizes)]
                page = await store.page("general", before=page[0].cursor, limit=size)
            assert backwards == expected
            # Forwards from the start.
            forwards: list[tuple[int, str]] = []
            cursor = (-1, "")
            for step in range(len(expected) + 1):
                size = sizes[step % len(sizes)]
                page = await store.page("general", after=cursor, limit=size)
                forwards += [e.cursor for e in page]
                if len(page) < size:
                    break
                cursor = page[-1].cursor
            assert forwards == expected

    with tempfile.TemporaryDirectory() as tmp:
        run(lambda: body(Path(tmp)))


def test_has_ids_get_envelopes_and_get_messages(tmp_path: Path) -> None:
    odd_history = ("not-hex", "ünïcode", mid(3))
    rows = [
        msg(1, 1, envelope=b"env-1", history=(mid(0), mid(7))),
        msg(2, 2, envelope=None, history=odd_history),
        msg(3, 3, envelope=b"env-3"),
    ]

    async def body() -> None:
        async with await open_with_channel(tmp_path / "d", "general", "other") as store:
            await store.insert_messages(rows)
            await store.insert_message(msg(9, 9, channel="other"))
            probe = [mid(i) for i in range(5000)]
            assert await store.has_ids("general", probe) == {mid(1), mid(2), mid(3)}
            assert await store.has_ids("general", []) == set()
            assert await store.has_ids("other", [mid(1), mid(9)]) == {mid(9)}
            envelopes = await store.get_envelopes("general", [mid(1), mid(2), mid(3), mid(4)])
            assert envelopes == {mid(1): b"env-1", mid(3): b"env-3"}
            full = await store.get_messages("general", [mid(1), mid(2), mid(42)])
            assert set(full) == {mid(1), mid(2)}
            assert full[mid(1)] == rows[0]
            assert full[mid(2)] == rows[1]
            assert full[mid(2)].causal_history == odd_history

    run(body)


def test_search_is_paged_newest_first_and_literal(tmp_path: Path) -> None:
    contents = [b"Hello world", b"say HELLO", b"100% sure", b"a_b", b"nothing", b"hello again"]

    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            await store.insert_messages(msg(i, 10 + i, content=c) for i, c in enumerate(contents))
            hits = await store.search("general", "hello", limit=2)
            assert [h.content for h in hits] == [b"hello again", b"say HELLO"]
            more = await store.search("general", "hello", before=hits[-1].cursor, limit=2)
            assert [h.content for h in more] == [b"Hello world"]
            assert [h.content for h in await store.search("general", "%")] == [b"100% sure"]
            assert [h.content for h in await store.search("general", "_")] == [b"a_b"]
            assert await store.search("general", "absent") == []

    run(body)


def test_update_own_state_touches_only_own_messages(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            await store.insert_messages(
                [
                    msg(1, 1, sender="me", state=OwnState.QUEUED),
                    msg(2, 2, sender="me", state=OwnState.SENT),
                    msg(3, 3, sender="bob"),
                ]
            )
            changed = await store.update_own_state(
                "general", [mid(1), mid(2), mid(3), mid(99)], "acknowledged"
            )
            assert changed == 2
            assert await store.update_own_state("general", [mid(1)], OwnState.ACKNOWLEDGED) == 0
            states = {e.message_id: e.state for e in await store.page("general")}
            assert states == {
                mid(1): OwnState.ACKNOWLEDGED,
                mid(2): OwnState.ACKNOWLEDGED,
                mid(3): None,
            }
            with pytest.raises(ValueError):
                await store.update_own_state("general", [mid(1)], "delivered-ish")

    run(body)


def test_identity_round_trip(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d") as store:
            assert await store.load_identity() is None
            me = Identity("Ada", "ada-fp", b"\x01" * 32, "identity.key")
            await store.save_identity(me)
            assert await store.load_identity() == me
            renamed = Identity("Ada L.", "ada-fp", b"\x01" * 32, "identity.key")
            await store.save_identity(renamed)
            assert await store.load_identity() == renamed

    run(body)


def test_channels_join_leave_rejoin(tmp_path: Path) -> None:
    async def body() -> None:
        async with await open_with_channel(tmp_path / "d", "general") as store:
            chan = await store.join_channel("secret", b"t2", is_public=False, now_ms=50)
            assert (chan.name, chan.topic, chan.is_public, chan.joined_at, chan.left_at) == (
                "secret",
                b"t2",
                False,
                50,
                None,
            )
            again = await store.join_channel("secret", b"t2", is_public=False, now_ms=60)
            assert again.joined_at == 50  # already joined: unchanged
            assert [c.name for c in await store.list_channels()] == ["general", "secret"]
            assert await store.leave_channel("secret", now_ms=70) is True
            assert await store.leave_channel("secret", now_ms=71) is False
            assert [c.name for c in await store.list_channels()] == ["general"]
            left = await store.list_channels(include_left=True)
            assert [(c.name, c.left_at) for c in left] == [("general", None), ("secret", 70)]
            rejoined = await store.join_channel("secret", b"t3", is_public=False, now_ms=80)
            assert (rejoined.joined_at, rejoined.left_at, rejoined.topic) == (80, None, b"t3")
            assert await store.get_channel("never") is None

    run(body)


def test_stored_message_accepts_state_strings() -> None:
    m = StoredMessage("c", mid(1), "s", 1, b"x", state="sent")  # type: ignore[arg-type]
    assert m.state is OwnState.SENT
    with pytest.raises(ValueError):
        StoredMessage("c", mid(1), "s", 1, b"x", state="bogus")  # type: ignore[arg-type]
