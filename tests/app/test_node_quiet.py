"""A node alone in its channel stays cheap (issue 41 item 8), over a real SQLite store.

* a restart republishes only the own lines that never left (typed offline, recorded
  before a crash), not every line still unacknowledged: nobody is there to hear them,
  and the core's resends (backing off, ``sds.backoff``) bring them to the first peer;
* a script piping lines into an empty channel is not made to wait for
  acknowledgements nobody can send (beyond a first resend and sync period): the
  lines the full outgoing buffer pushes out wait for the next member heard
  (``waiting``, never ``failed``), who gets them all;
* the resends of a node alone back off (a few per doubling period), and the first
  peer heard gets every line at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app_helpers import FAST, run, start_node, wait_until
from procs import T

from app.headless.line_feed import LineFeed
from app.node.events import Info, NodeEvent, OwnMessage
from app.node.transport import MemoryHub


def test_a_restart_alone_republishes_only_what_never_left(tmp_path: Path) -> None:
    async def body() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        for i in range(30):
            await a.node.send("general", f"line {i}")
        await wait_until(lambda: len(a.own("sent")) == 30, 10, "30 lines sent")
        hub.set_online(False)
        for i in range(2):
            await a.node.send("general", f"offline {i}")
        await a.node.close()
        hub.set_online(True)
        a2 = await start_node(tmp_path / "a", hub, name="alice")
        try:
            await wait_until(lambda: len(a2.own("sent")) >= 2, 10, "the offline lines sent")
            # the 2 that never left, not all 32 unacknowledged (the core still has them)
            assert a2.node.counters["republished"] == 2
            assert len(a2.node.core("general").outgoing_ids()) == 32
            # the first member heard gets every one of them (resends, no republish)
            b = await start_node(tmp_path / "b", hub, name="bob")
            try:
                await wait_until(lambda: len(b.delivered()) == 32, 20, "bob has all 32")
                await wait_until(lambda: not a2.node.core("general").outgoing_ids(), 20,
                                 "all acknowledged")  # fmt: skip
                assert sorted(b.texts()) == sorted(
                    [f"line {i}" for i in range(30)] + ["offline 0", "offline 1"])
            finally:
                await b.node.close()
        finally:
            await a2.node.close()

    run(body(), 60)


def test_lines_into_an_empty_channel_are_admitted_and_wait_for_the_first_member(
    tmp_path: Path,
) -> None:
    cap = 40
    config = FAST.with_changes(outgoing_buffer_cap=cap)

    async def body() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", config=config)
        told: list[NodeEvent] = []
        try:
            feed = LineFeed(a.node, told.append, idle_s=1.0)
            a.node.subscribe(told.append)  # the node's events and the feed's, in order
            n = 3 * cap
            for i in range(n):  # never blocked on acknowledgements nobody can send
                await asyncio.wait_for(feed.admit("general"), T(5))
                feed.post(i + 1, "general", f"bot {i}", "msg")
            # stdin is held up ("waiting: the outgoing buffer is full ...") only in the
            # first resend and sync period, while a member online might not have been
            # heard yet; never once lines wait for listeners (before: once per buffer's
            # worth, each time the oldest were given up)
            marks = ["full" if isinstance(e, Info) and e.data.get("waiting") else
                     "pushed" if isinstance(e, OwnMessage) and e.state == "waiting" else ""
                     for e in told]  # fmt: skip
            assert "pushed" in marks
            assert "full" not in marks[marks.index("pushed"):]
            assert await feed.drain() == []
            assert feed.unacknowledged() == []
            assert a.own("failed") == []
            assert len(a.own("waiting")) >= n - cap  # pushed out of the full buffer
            b = await start_node(tmp_path / "b", hub, name="bob", config=config)
            try:
                await wait_until(lambda: len(b.delivered()) == n, 30, "bob has every line")
                assert sorted(b.texts()) == sorted(f"bot {i}" for i in range(n))
            finally:
                await b.node.close()
        finally:
            await a.node.close()

    run(body(), 90)


def test_alone_the_resends_back_off_and_the_first_peer_gets_everything(tmp_path: Path) -> None:
    async def body() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        try:
            for i in range(50):
                await a.node.send("general", f"line {i}")
            core = a.node.core("general")
            # several resend periods (200 ms each) alone: it backs off, a few a sweep
            await wait_until(lambda: core.resend_backoff >= 3, 20, "backing off")
            resent = a.node.counters["resent"]
            # every 200 ms x 50 lines would be 50 per sweep; backing off: at most 8 each
            assert resent <= 8 * core.resend_backoff
            assert a.own("failed") == [] and a.own("waiting") == []
            b = await start_node(tmp_path / "b", hub, name="bob")
            try:
                await wait_until(lambda: len(b.delivered()) == 50, 20, "bob has all 50")
                assert core.resend_backoff == 0
            finally:
                await b.node.close()
        finally:
            await a.node.close()

    run(body(), 60)
