"""Envelopes that do not open (app/tui/unopened.py): a tampered one in a public channel
is said at once, and once; in a members channel a refusal waits for its key share or our
own removal before it is worth a warning."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tui_helpers import SIZE, start_peer, started, texts, tui, wait_until

from app.node.events import Rejected
from app.node.transport import MemoryHub, TransportStatus
from app.tui.unopened import UnopenedWarnings

pytestmark = pytest.mark.timeout(120)


def notes(app: Any) -> list[str]:
    return [n.message for n in app._notifications]


async def test_a_tampered_envelope_is_said_once(tmp_path: Path) -> None:
    hub = MemoryHub()
    tap = hub.transport()
    captured: list[bytes] = []

    async def keep(envelope: bytes) -> None:
        captured.append(envelope)

    def status(_s: TransportStatus) -> None:
        return None

    tap.start(keep, status)
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    try:
        app = tui(tmp_path / "alice", hub.transport())
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await tap.subscribe([bob.node.channels["general"].key.topic])
            await bob.say("hello")
            await wait_until(lambda: "hello" in texts(app), what="alice has bob's line")
            await wait_until(lambda: bool(captured), what="the tap has an envelope")
            original = captured[-1]
            for i in (1, 2):  # the AEAD tag at the end: any changed bit fails it
                await tap.publish(original[:-1] + bytes([original[-1] ^ i]))
            node = app.node
            assert node is not None
            await wait_until(lambda: node.counters["rejected_wrong_key_or_tampered"] == 2,
                             what="both refused")  # fmt: skip
            await wait_until(lambda: any("could not be opened" in n for n in notes(app)),
                             what="the warning")  # fmt: skip
            await pilot.pause()
            assert sum("could not be opened" in n for n in notes(app)) == 1
            assert texts(app).count("hello") == 1
    finally:
        await tap.close()
        await bob.close()


class _Roster:
    def __init__(self) -> None:
        self.created = True
        self.members = {"me"}

    def is_member(self, sender_id: str) -> bool:
        return sender_id in self.members


def _members_node() -> Any:
    """What UnopenedWarnings reads of a node with one members channel, #team."""
    roster = _Roster()
    channels = {"team": SimpleNamespace(roster=roster)}
    return SimpleNamespace(sender_id="me", counters=Counter[str](), roster=roster,
                           members_channel=channels.get)  # fmt: skip


def _refused(node: Any) -> Rejected:
    node.counters["rejected_wrong_key_or_tampered"] += 1
    return Rejected("wrong_key_or_tampered", "team", "", node.counters[
        "rejected_wrong_key_or_tampered"])  # fmt: skip


def test_a_members_channel_refusal_waits_and_says_nothing_once_we_are_removed() -> None:
    node, w = _members_node(), UnopenedWarnings(grace_s=20)
    assert w.rejected(node, _refused(node), now=100.0) == []
    assert w.rejected(node, _refused(node), now=101.0) == []
    node.roster.members.discard("me")  # the envelope removing us is folded after them
    assert w.due(node, now=119.0) == []
    assert w.due(node, now=121.0) == []
    assert w.due(node, now=200.0) == []  # and nothing is left held


def test_a_members_channel_refusal_that_stops_is_a_key_share_that_came_late() -> None:
    node, w = _members_node(), UnopenedWarnings(grace_s=20)
    assert w.rejected(node, _refused(node), now=100.0) == []
    assert w.due(node, now=125.0) == []  # nothing refused since: the share came


def test_refusals_that_go_on_in_a_members_channel_are_worth_one_warning() -> None:
    node, w = _members_node(), UnopenedWarnings(grace_s=20)
    assert w.rejected(node, _refused(node), now=100.0) == []
    assert w.rejected(node, _refused(node), now=110.0) == []
    assert w.due(node, now=110.0) == []  # still within the grace
    said = w.due(node, now=121.0)
    assert len(said) == 1 and said[0][0] == "warning"
    assert "#team could not be opened" in said[0][1] and "missed a key change" in said[0][1]
    w.rejected(node, _refused(node), now=130.0)
    w.rejected(node, _refused(node), now=131.0)
    assert w.due(node, now=160.0) == []  # once


def test_forgeries_are_said_at_once_and_once() -> None:
    w = UnopenedWarnings()
    ev = Rejected("bad_signature", "general", "", 1)
    assert w.rejected(None, ev, now=1.0) == [
        ("warning", "a forged envelope was refused (bad_signature)")]
    assert w.rejected(None, ev, now=2.0) == []

