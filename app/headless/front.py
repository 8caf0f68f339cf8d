"""Headless mode as a front end of the command table (:class:`~app.commands.front.FrontEnd`):
every answer is a node event written as a JSON line (``info``, ``peers``, ``members``,
``invite``, or ``error`` for a refused command), and a command about a message names
its id.

:class:`HeadlessFront` keeps the current channel (where a line typed goes: the first
channel joined, then the one ``/join``, ``/switch``, ``/create`` or ``/query`` made
current; ``/leave`` of it leaves it current, so the lines typed next are refused, not
sent to another channel). With a :class:`~app.headless.line_feed.LineFeed`, a line
typed waits for room in the outgoing buffer and is counted for the exit status.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from app.commands.content import run_content_command
from app.commands.front import HEADLESS, Front
from app.commands.handlers import consume
from app.commands.line import HELP
from app.commands.table import Command, run_command
from app.headless.line_feed import LineFeed
from app.node.events import Info, NodeError, NodeEvent, Peers
from app.node.runtime import Node, NodeClosedError, peer_lines, wall_ms

__all__ = ["HeadlessFront"]


class HeadlessFront:
    """One headless run's side of the commands: ``report`` writes the events."""

    def __init__(
        self,
        node: Node,
        report: Callable[[NodeEvent], None],
        *,
        current: str | None,
        passphrase: bytes | None,
        data_dir: Path | None = None,
        relays: Sequence[str] = (),
        feed: LineFeed | None = None,
        interrupted: Callable[[], bool] = lambda: False,
    ) -> None:
        self._node = node
        self._report = report
        self._current = current
        self.passphrase = passphrase
        self.data_dir = data_dir
        """Where ``channels.json`` is kept (channels rejoined at the next start), if any."""
        self._relays = tuple(relays)
        self.feed = feed
        self.interrupted = interrupted
        """True once a signal asked to stop without draining (lines wait in the outbox)."""
        self.line = 0
        """The number of the stdin line being carried out (for the feed's report)."""
        self.stopping = False
        """Set by ``/quit``, or when the node closed under a line: read no more lines."""

    async def run(self, cmd: Command) -> None:
        """Carry out one parsed line; a refusal is an ``error`` event, never raised."""
        try:
            await run_command(self, cmd)
        except (ValueError, KeyError) as exc:
            self._report(NodeError(str(exc)))
        except NodeClosedError:
            pass

    # ---------------------------------------------------------- FrontEnd

    @property
    def front(self) -> Front:
        return HEADLESS

    @property
    def node(self) -> Node:
        return self._node

    @property
    def current(self) -> str | None:
        return self._current

    @property
    def shortcodes(self) -> bool:
        return False  # a script's ":thumbsup:" is sent as typed

    @property
    def no_channel(self) -> str:
        return "no current channel: /join one first"

    @property
    def relays(self) -> Sequence[str]:
        return self._relays

    def joined(self) -> Collection[str]:
        return self._node.channels

    def channel_ref(self, channel: str | None) -> str:
        return f"channel {channel!r}"

    def refuse(self, reason: str) -> None:
        self._report(NodeError(reason))

    def report(self, event: NodeEvent) -> None:
        self._report(event)

    async def say(self, channel: str, text: str, kind: str) -> None:
        feed = self.feed
        if feed is None:
            self._node.post(channel, text, kind).add_done_callback(consume)
            return
        await feed.admit(channel)  # backpressure: room in the outgoing buffer
        if self.interrupted():
            self.stopping = True
            return
        try:
            feed.post(self.line, channel, text, kind)
        except NodeClosedError:
            self.stopping = True

    async def join(self, channel: str) -> None:
        await self._node.join(channel, self.passphrase)  # kept by the JoinedKeeper (run.py)
        self._current = channel

    async def leaving(self, channel: str) -> None:
        pass  # headless mode says nothing in the channel

    async def left(self, channel: str) -> None:
        pass  # not rejoined at the next start: the JoinedKeeper (run.py) forgot it

    async def switch(self, channel: str) -> None:
        self._report(Info(f"current channel: {channel}", {"channel": channel}))
        self._current = channel

    async def entered(self, channel: str) -> None:
        self._current = channel

    def named(self, old: str, new: str) -> None:
        name = self._node.name
        self._report(Info(f"your name is now {name}", {"name": name}))

    def forgot(self, channel: str) -> None:
        pass  # the node said so (an info event)

    def show_peers(self, channel: str | None) -> None:
        peers = tuple(self._node.peers(channel))
        self._report(Peers(channel, peers))
        self._report(Info("\n".join(peer_lines(peers, wall_ms())) or "nobody heard from yet"))

    def show_stats(self, stats: dict[str, Any]) -> None:
        self._report(Info("stats", stats))

    def retried(self, n: int) -> None:
        self._report(Info(f"sending {n} failed message(s) again", {"retried": n}))

    def show_help(self) -> None:
        self._report(Info(HELP))

    async def quit(self) -> None:
        self.stopping = True

    async def about_message(self, name: str, channel: str, arg: str) -> None:
        await run_content_command(self._node, name, arg, channel, self._report)

    async def topic(self, channel: str, arg: str) -> None:
        await run_content_command(self._node, "topic", arg, channel, self._report)

    def file_to_save(self, arg: str) -> str | None:
        return arg  # ID [PATH]

