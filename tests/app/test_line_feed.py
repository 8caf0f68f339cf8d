"""Headless lines at EOF (issue 26 §9): the feed drains until every line read left, and
names the ones that could not (the headless mode then exits 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app_helpers import run, start_deaf_listener, start_node, wait_until

import sds
from app.headless.line_feed import LineFeed
from app.node.events import NodeEvent
from app.node.transport import MemoryHub, Transport


def test_drain_names_the_lines_that_did_not_leave_and_waits_for_those_that_do(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        hub = MemoryHub()
        h = await start_node(tmp_path / "a", hub, name="alice")
        told: list[NodeEvent] = []
        try:
            feed = LineFeed(h.node, told.append, idle_s=0.5)
            hub.set_online(False)
            for n in (1, 2):
                await feed.admit("general")
                feed.post(n, "general", f"offline {n}", "msg")
            unsent = await feed.drain()  # nothing can leave: named after 0.5 s idle
            assert [(u.number, u.state) for u in unsent] == [(1, "logged"), (2, "logged")]
            assert all(u.local_id is not None for u in unsent)  # durable, in the outbox
            hub.set_online(True)  # reconnection republishes them: they leave
            feed.idle_s = 30.0
            assert await feed.drain() == []
        finally:
            await h.node.close()

    run(body())


class _Gate:
    """A transport that refuses to publish (returns False, as LAN gossip does while the
    peer's subscription has not arrived) until opened; connected all along."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.open = False
        self.refused = 0

    @property
    def connected(self) -> bool:
        return self.inner.connected

    def start(self, on_envelope: Any, on_status: Any) -> None:
        self.inner.start(on_envelope, on_status)

    async def publish(self, envelope: bytes) -> bool:
        if not self.open:
            self.refused += 1
            return False
        return await self.inner.publish(envelope)

    async def subscribe(self, topics: Any) -> None:
        await self.inner.subscribe(topics)

    async def unsubscribe(self, topics: Any) -> None:
        await self.inner.unsubscribe(topics)

    async def close(self) -> None:
        await self.inner.close()


class _Mute(_Gate):
    """Hears everything, is never heard (its publishes vanish)."""

    async def publish(self, envelope: bytes) -> bool:
        return self.inner.connected


def test_a_line_the_transport_refused_goes_with_the_next_resend_before_the_drain_gives_up(
    tmp_path: Path,
) -> None:
    """Issue 41 item 14: connected, but the LAN peer's subscription had not arrived, so
    the first publish went nowhere; the resend came a resend period later, the moment
    the drain (bounded by that same period) gave up: exit 6 named lines the peer was
    receiving. The drain now waits a resend period and a grace beyond it."""
    # no SDS-R: bob, who learns of the lines from alice's syncs, would have them repaired
    # (one at a time: each answer restarted the drain's idle bound); only the resend
    # is left to carry them, as for a LAN peer with nothing to name yet
    config = sds.Config.fast(100).with_changes(resend_unacknowledged_ms=1500,
                                               repair_enabled=False)  # fmt: skip

    async def body() -> None:
        hub = MemoryHub()
        gate = _Gate(hub.transport())
        a = await start_node(tmp_path / "a", transport=gate, name="alice", config=config)
        b = await start_node(tmp_path / "b", hub, name="bob", config=config)
        try:
            feed = LineFeed(a.node, [].append, idle_s=0.5)
            for n in (1, 2, 3):
                await feed.admit("general")
                feed.post(n, "general", f"line {n}", "msg")
            await wait_until(lambda: gate.refused >= 3, what="the first publishes refused")
            gate.open = True  # the subscription arrives; nothing republishes at once
            assert await feed.drain() == []
            await wait_until(lambda: len(b.texts()) == 3, what="bob has them")
            assert sorted(b.texts()) == ["line 1", "line 2", "line 3"]
        finally:
            await a.node.close()
            await b.node.close()

    run(body())


def test_lines_sent_then_given_up_are_not_reported_unsent(tmp_path: Path) -> None:
    """Issue 41 item 14: bob received alice's lines but his acknowledgements never reach
    her; carol is heard but hears nothing. Alice's node gives up on them (``failed``):
    they were sent, so the drain does not name them (exit 0, not 6), and lists them as
    unacknowledged instead: typing them again would make copies at bob."""
    config = sds.Config.fast(100).with_changes(max_resend_attempts=1)

    async def body() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", config=config)
        b = await start_node(tmp_path / "b", transport=_Mute(hub.transport()), name="bob",
                             config=config)  # fmt: skip
        c = await start_deaf_listener(tmp_path / "c", hub, config=config)
        try:
            await wait_until(lambda: "I am here but hear nothing" in a.texts(), what="carol")
            feed = LineFeed(a.node, [].append, idle_s=0.5)
            for n in (1, 2, 3):
                await feed.admit("general")
                feed.post(n, "general", f"line {n}", "msg")
            await wait_until(lambda: len(a.own("failed")) == 3, 30, what="given up")
            assert sorted(t for t in b.texts() if t.startswith("line")) == [
                "line 1", "line 2", "line 3"]  # fmt: skip
            assert await feed.drain() == []
            assert [(u.number, u.state) for u in feed.unacknowledged()] == [
                (1, "failed"), (2, "failed"), (3, "failed")]  # fmt: skip
        finally:
            for h in (a, b, c):
                await h.node.close()

    run(body())
