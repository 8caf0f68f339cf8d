"""Carried copies at the node (app/node/carrying.py): envelopes riding on a line.

The core's choice of what rides (``sds.Channel.to_carry``) is tested in
tests/sds/test_carry.py; here the node's part: the stored envelopes are attached
byte for byte, a receiver opens each on its own before the carrier's line, a copy
it holds is counted without opening, and a bad carried envelope costs only itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from app_helpers import Harness, key, run, start_node, wait_until

import sds
from app.chat.lines import encode_content
from app.node.runtime import wall_ms
from app.node.transport import MemoryHub
from net.channel_key import ChannelKey
from net.envelope import envelope_hash, open_envelope, seal
from net.identity import Identity
from sds import sds_pb2


def signed(
    who: Identity,
    text: str,
    channel: str = "general",
    k: ChannelKey | None = None,
    carried: list[bytes] | None = None,
) -> tuple[bytes, str]:
    """A content envelope of ``channel`` by ``who`` (a js-waku id: verifiable),
    carrying ``carried``."""
    content = encode_content(text, "alice")
    mid = hashlib.sha256(content).hexdigest()
    pb = sds_pb2.SdsMessage(
        sender_id=who.sender_id,
        message_id=mid,
        channel_id=channel,
        lamport_timestamp=wall_ms(),
        content=content,
    )
    return seal(pb.SerializeToString(), who, k or key(channel), carried or ()), mid


def carry_from(monkeypatch: pytest.MonkeyPatch, h: Harness, picks: Callable[[], list[str]]) -> None:
    """``h``'s core asks to carry ``picks()`` with each new line (the core decides
    that only at scale; the node's part is what is tested here)."""
    core = h.node._participant.channel("general")
    real = sds.Channel.to_carry

    def to_carry(self: sds.Channel, now_ms: int) -> list[tuple[str, bytes]]:
        if self is core:
            return [(mid, b"") for mid in picks()]
        return real(self, now_ms)

    monkeypatch.setattr(sds.Channel, "to_carry", to_carry)


def test_a_line_bob_missed_arrives_carried_by_carols_next_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob")
        c = await start_node(tmp_path / "c", hub, name="carol")
        try:
            alice = Identity.generate()
            first, first_id = signed(alice, "first")
            await c.node._on_envelope(first)  # bob never gets it directly
            await wait_until(lambda: c.texts() == ["first"])
            carry_from(monkeypatch, c, lambda: [first_id])
            sent_before = len(c.node.transport.sent)  # type: ignore[attr-defined]
            await c.node.send("general", "second")
            await wait_until(lambda: b.texts() == ["first", "second"], what="both, in order")
            carrier = c.node.transport.sent[sent_before]  # type: ignore[attr-defined]
            opened = open_envelope(carrier, key("general"))
            assert opened.carried == (first,)  # alice's envelope, byte for byte
            assert c.node.counters["carried_sent"] == 1
            assert b.node.counters["carried_received"] == 1
            assert b.node.counters["carried_duplicates"] == 0
            # taken before carol's line, which names it: never missing at bob
            assert b.delivered()[0].missing_before == 0
            assert not any(type(e).__name__ == "Lost" for e in b.events)
            stored = await b.node.store.get_envelopes("general", [first_id])
            assert stored[first_id] == first  # its hash is its retrieval hint
        finally:
            await b.node.close()
            await c.node.close()

    run(main())


def test_what_rides_is_the_line_without_what_it_carried_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Carried envelopes never nest: a line that carried others rides without them
    (the author's message and signature, a new envelope)."""

    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob")
        c = await start_node(tmp_path / "c", hub, name="carol")
        try:
            alice, dave = Identity.generate(), Identity.generate()
            zero, zero_id = signed(dave, "zero")
            first, first_id = signed(alice, "first", carried=[zero])
            await c.node._on_envelope(first)
            await wait_until(lambda: sorted(c.texts()) == ["first", "zero"])
            carry_from(monkeypatch, c, lambda: [first_id, zero_id])
            sent_before = len(c.node.transport.sent)  # type: ignore[attr-defined]
            await c.node.send("general", "second")
            await wait_until(lambda: sorted(b.texts()) == ["first", "second", "zero"])
            carrier = c.node.transport.sent[sent_before]  # type: ignore[attr-defined]
            rode, also = open_envelope(carrier, key("general")).carried
            opened = open_envelope(rode, key("general"))
            assert opened.carried == ()  # not zero inside it again
            author = open_envelope(first, key("general"))
            assert (opened.sds_bytes, opened.sender_id) == (author.sds_bytes, alice.sender_id)
            assert also == zero  # carried nothing itself: its own bytes
            assert b.node.counters["carried_received"] == 2
        finally:
            await b.node.close()
            await c.node.close()

    run(main())


def test_a_carried_copy_held_already_is_counted_without_opening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob")
        c = await start_node(tmp_path / "c", hub, name="carol")
        try:
            alice = Identity.generate()
            first, first_id = signed(alice, "first")
            await b.node._on_envelope(first)
            await c.node._on_envelope(first)
            await wait_until(lambda: b.texts() == c.texts() == ["first"])
            told: list[tuple[str, str]] = []
            real_note = sds.Channel.note_carried
            bob_core = b.node._participant.channel("general")

            def note_carried(self: sds.Channel, mid: str, now_ms: int) -> Any:
                if self is bob_core:
                    told.append(("general", mid))
                return real_note(self, mid, now_ms)

            monkeypatch.setattr(sds.Channel, "note_carried", note_carried)
            carry_from(monkeypatch, c, lambda: [first_id])
            await c.node.send("general", "second")
            await wait_until(lambda: b.texts() == ["first", "second"])
            assert b.node.counters["carried_duplicates"] == 1
            assert told == [("general", first_id)]  # a copy on the wire, for the core
            assert b.node.counters.get("rejected_carried_replayed", 0) == 0
        finally:
            await b.node.close()
            await c.node.close()

    run(main())


def test_a_carried_copy_under_another_hash_of_a_held_line_is_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line that carried others rides re-encrypted without them (a hash of its own):
    a member holding the line counts a copy and keeps nothing aside for it."""

    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob")
        c = await start_node(tmp_path / "c", hub, name="carol")
        try:
            alice, dave = Identity.generate(), Identity.generate()
            zero, _ = signed(dave, "zero")
            first, first_id = signed(alice, "first", carried=[zero])
            for h in (b, c):
                await h.node._on_envelope(first)
            await wait_until(lambda: sorted(b.texts()) == sorted(c.texts()) == ["first", "zero"])
            carry_from(monkeypatch, c, lambda: [first_id])
            await c.node.send("general", "second")
            await wait_until(lambda: "second" in b.texts())
            core = b.node._participant.channel("general")
            assert b.node.counters["carried_duplicates"] == 1
            assert core.stats()["carried_received_duplicate"] == 1
            assert not b.node._waiting_envelopes  # nothing kept aside as waiting
            assert b.texts().count("first") == 1
        finally:
            await b.node.close()
            await c.node.close()

    run(main())


def test_a_bad_carried_envelope_costs_only_itself(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob")
        await b.node.join("pub", None, key=key("pub", None))
        try:
            alice, mallory = Identity.generate(), Identity.generate()
            good, _ = signed(alice, "carried fine")
            # a joined channel's envelopes, carried into this one (one bob holds)
            elsewhere, _ = signed(alice, "for another channel", "pub", key("pub", None))
            held, _ = signed(alice, "held in pub", "pub", key("pub", None))
            await b.node._on_envelope(held)
            await wait_until(lambda: b.texts("pub") == ["held in pub"])
            carrier, _ = signed(
                mallory, "the carrier", carried=[b"\x00garbage", elsewhere, held, good]
            )
            await b.node._on_envelope(carrier)
            await wait_until(
                lambda: sorted(b.texts()) == ["carried fine", "the carrier"], what="both"
            )
            assert b.texts("pub") == ["held in pub"]  # nothing let into another channel
            assert b.node.counters["rejected_carried_malformed"] == 1
            assert b.node.counters["rejected_carried_wrong_topic"] == 2  # held or not
            assert b.node.counters["carried_duplicates"] == 0
            assert b.node.counters["carried_received"] == 4
            assert envelope_hash(carrier) != envelope_hash(good)
        finally:
            await b.node.close()

    run(main())
