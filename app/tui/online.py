"""Who is online now, away or gone, as this screen shows it; and our own presence.

A peer is online when it was heard from within the online window (three SDS sync
intervals, at least :data:`ONLINE_MIN_MS`) and did not say it quit since. What peers
say of themselves arrives as presence notices (:mod:`app.tui.presence`): ``away``
(with a text) until ``back``; ``offline`` when they quit (shown offline at once, not
after the window); ``here``, a heartbeat. :class:`Online` keeps what each said, sends
our heartbeat to each small channel every third of the window, and our ``/away`` and
quit to every channel.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from app.chat.lines import visible
from app.node.events import Ephemeral
from app.node.runtime import Node
from app.tui.presence import HEARTBEAT_MAX_PEERS, decode_presence, encode_presence

__all__ = ["ONLINE_MIN_MS", "Online"]

ONLINE_MIN_MS = 20_000
"""A peer heard from within max(this, 3 sync intervals) counts as online now."""


class Online:
    """The presence of peers, and ours (the app creates it; it asks for the node)."""

    def __init__(
        self,
        clock: Callable[[], float],
        node: Callable[[], Node | None],
        ready: asyncio.Event,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
    ) -> None:
        self._clock = clock
        self._node = node
        self._ready = ready
        self._spawn = spawn
        self.said: dict[str, tuple[str, str, int]] = {}
        """sender id -> (away | offline, text, when on this clock, ms)."""
        self._here_sent: dict[str, float] = {}
        """channel -> when our last heartbeat went (this clock, s)."""
        self.away: str | None = None
        """Our ``/away`` text while away."""

    def window_ms(self) -> int:
        """A peer heard from within this long is online now. Every running node sends an
        SDS sync message at least every two sync intervals (30 s by default: a random
        delay below it) even when nobody writes, so three intervals (at least 20 s)
        tell one that is here from one that left or lost its connection."""
        node = self._node()
        interval = node.options.config.sync_interval_ms if node is not None else 30_000
        return max(ONLINE_MIN_MS, 3 * interval)

    def is_online(self, last_seen_ms: int, sender_id: str = "") -> bool:
        said = self.said.get(sender_id) if sender_id else None
        if said is not None and said[0] == "offline" and said[2] >= last_seen_ms:
            return False  # it quit (and was not heard since)
        return self._clock() * 1000 - last_seen_ms <= self.window_ms()

    def away_text(self, sender_id: str) -> str | None:
        """``away`` or ``away: TEXT`` while ``sender_id`` said it is away, else None."""
        said = self.said.get(sender_id)
        if said is None or said[0] != "away":
            return None
        return f"away: {visible(said[1])}" if said[1] else "away"

    def heard(self, ev: Ephemeral) -> bool:
        """Take a presence notice (/away, /away again, or quit); False: ``ev`` is none."""
        presence = decode_presence(ev.content)
        if presence is None:
            return False
        state, text = presence
        if state == "here":  # a heartbeat: heard (the node noted it); an away stays
            said = self.said.get(ev.sender_id)
            if said is not None and said[0] == "offline":
                self.said.pop(ev.sender_id, None)
        elif state == "back":
            self.said.pop(ev.sender_id, None)
        else:
            self.said[ev.sender_id] = (state, text, int(self._clock() * 1000))
        return True

    def heartbeat(self) -> None:
        """Every third of the online window, a ``here`` presence notice to each small
        channel: a member that does not write stays online on the others' screens
        although SDS sync suppression keeps its syncs unsent."""
        node = self._node()
        if node is None:
            return
        now = self._clock()
        every = self.window_ms() / 3000.0
        for channel in list(node.channels):
            if now - self._here_sent.get(channel, float("-inf")) < every:
                continue
            self._here_sent[channel] = now
            if len(node.peers(channel)) > HEARTBEAT_MAX_PEERS:
                continue
            content = encode_presence("here", node.name)
            self._spawn(self._send_here(node, channel, content))

    async def _send_here(self, node: Node, channel: str, content: bytes) -> None:
        with contextlib.suppress(Exception):  # a heartbeat lost is the next one's job
            await node.send_ephemeral(channel, content)

    async def say(self, state: str, text: str = "") -> None:
        """Tell every joined channel (ephemeral; bounded: a quit never waits long)."""
        node = self._node()
        if node is None or not self._ready.is_set():
            return
        content = encode_presence(state, node.name, text)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                for channel in list(node.channels):
                    await node.send_ephemeral(channel, content)
