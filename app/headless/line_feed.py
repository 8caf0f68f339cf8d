"""Typed lines from a script (headless stdin): admitted when the node can hold them,
followed until they have left.

What a script piping lines into ``sdschat join --headless`` can count on (issue 26 §9):

* **Backpressure, not loss.** A line is handed to the node only when the channel's
  outgoing buffer (own messages not yet acknowledged, ``sds.Config.outgoing_buffer_cap``)
  has room for it beside every line still being made durable; until then the node
  stops reading stdin (the pipe fills and the writer blocks). Before, a burst of
  20,000 lines overflowed that buffer and the oldest unacknowledged lines ended
  ``failed`` (``buffer_full``) with exit status 0.
* **Nobody listening is no reason to wait.** Once nobody has been heard in the
  channel for a resend and a sync period (a bot in an empty channel; the first such
  period after the feed starts waits as usual, a member online may not have been
  heard yet), there are no acknowledgements to wait for: lines are admitted at once,
  and those the full buffer pushes out wait for the next member heard, who gets them
  (``app/node/unheard.py``). Before, 5,000 lines into an
  empty channel took 5 min 35 s: the feed waited for the first lines to be given up.
* **EOF (or ``/quit``) drains.** The node exits only once every line it read is durable
  (in the outbox, fsynced) and sent (handed to the transport at least once), or when
  no line has made progress for :data:`DRAIN_IDLE_S` seconds (:data:`OFFLINE_WAIT_S`
  while disconnected; while connected, at least one resend period and
  :data:`RESEND_GRACE_S` more, since a line the transport could not take at once goes
  with the node's next resend): then
  it writes an ``error`` event naming each line not sent (its stdin line number and
  ``local_id``) and exits with status :data:`EXIT_UNSENT` (6). Lines that were durable
  but not sent are still in the outbox: the next start sends them.
* **Sent is sent.** A line handed to the transport is never reported as not sent, even
  when the node later gave up on its acknowledgement (``failed``: the members may well
  have it; LAN members who never name it, say). Such lines are listed apart
  (:meth:`LineFeed.unacknowledged`; an ``info`` event with ``unacknowledged``), and do
  not change the exit status: typing them again would make copies, while ``/retry``
  publishes the same message again, which a member who has it drops.
* A signal (SIGTERM, SIGINT) stops at once, without draining (durable lines are sent at
  the next start).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.node.events import Info, NodeEvent, OwnMessage
from app.node.runtime import Node
from app.node.unheard import heard_since

__all__ = ["DRAIN_IDLE_S", "EXIT_UNSENT", "RESEND_GRACE_S", "LineFeed", "Unsent"]

EXIT_UNSENT = 6
"""Exit status of ``sdschat join --headless`` when lines read were not all sent."""

DRAIN_IDLE_S = 30.0
"""At EOF, give up waiting once no line has made progress for this long."""

OFFLINE_WAIT_S = 10.0
"""At EOF while the transport is disconnected, give up after this long without progress
(a reconnection within it sends the lines, and the idle bound applies again)."""

RESEND_GRACE_S = 5.0
"""While connected, the drain waits this long beyond one resend period for a line the
transport refused (a LAN peer whose subscription has not arrived yet): the node's
resend sends it. (A drain bounded by exactly the resend period raced that resend and
reported lines the peer was just receiving.)"""

MAX_UNDURABLE = 1024
"""Lines handed to the node and not yet durable (its inbox stays bounded)."""

_LEFT = frozenset({"sent", "possibly_acknowledged", "acknowledged"})
_RANK = {
    "posted": 0, "queued": 1, "logged": 2, "sent": 3, "possibly_acknowledged": 4,
    "failed": 5, "acknowledged": 6, "error": 7,
}


def _later(state: str | None, new: str | None) -> str:
    """The later of two own-message states (they only move forward)."""
    if state is None:
        return new or "posted"
    if new is None:
        return state
    return new if _RANK.get(new, 0) > _RANK.get(state, 0) else state


@dataclass(slots=True)
class _Line:
    number: int  # stdin line number (1-based)
    channel: str
    local_id: int | None = None
    state: str = "posted"  # posted, then the node's OwnMessage states; "error" if refused
    error: str | None = None
    sent: bool = False  # handed to the transport at least once (whatever came after)


@dataclass(frozen=True, slots=True)
class Unsent:
    """A line read that did not leave: its stdin line number, outbox id and last state."""

    number: int
    local_id: int | None
    state: str
    error: str | None = None


class LineFeed:
    """Admits lines into a :class:`~app.node.Node` with backpressure and drains at EOF.

    Create it before the node starts sending (it subscribes to the node's events);
    :meth:`admit` before each line, :meth:`post` it, :meth:`drain` at the end.
    """

    def __init__(
        self,
        node: Node,
        report: Callable[[NodeEvent], None],
        *,
        idle_s: float = DRAIN_IDLE_S,
    ) -> None:
        self.node = node
        self.report = report
        self.idle_s = idle_s
        self._lines: list[_Line] = []
        self._by_local: dict[int, _Line] = {}
        # states reported before the line's future handed us its local_id (a round
        # emits its events as it resolves the futures; the callbacks run after)
        self._early: dict[int, str] = {}
        self._early_sent: set[int] = set()
        self._undurable = 0
        self._changed = asyncio.Event()
        self._last_progress = time.monotonic()
        self._waiting_told = False
        #: when each channel was first fed: nobody heard counts only after a resend
        #: and a sync period there (time enough for a member's sync to arrive)
        self._fed_since: dict[str, int] = {}
        self.stopping = False
        self.unsubscribe = node.subscribe(self._on_event)

    # ------------------------------------------------------------------ events

    def _on_event(self, ev: NodeEvent) -> None:
        if not isinstance(ev, OwnMessage):
            return
        self._changed.set()  # an ack or a failure frees room in the outgoing buffer
        if ev.local_id is None:
            return
        line = self._by_local.get(ev.local_id)
        if line is None:
            if self._undurable and ev.local_id >= 0:
                self._early[ev.local_id] = _later(self._early.get(ev.local_id), ev.state)
                if ev.state in _LEFT:
                    self._early_sent.add(ev.local_id)
            return
        line.state = _later(line.state, ev.state)
        line.sent = line.sent or ev.state in _LEFT
        self._last_progress = time.monotonic()

    def stop(self) -> None:
        """Stop waiting (a signal): :meth:`admit` and :meth:`drain` return at once."""
        self.stopping = True
        self._changed.set()

    # ------------------------------------------------------------------ admission

    def _room(self, channel: str) -> bool:
        if self._undurable >= MAX_UNDURABLE:
            return False
        try:
            unacked = len(self.node.core(channel).outgoing_ids())
        except KeyError:  # left meanwhile: post() reports it
            return True
        cap = self.node.options.config.outgoing_buffer_cap
        return unacked + self._undurable < cap - max(1, cap // 10) or self._nobody_listens(
            channel)

    def _nobody_listens(self, channel: str) -> bool:
        """Nobody heard in ``channel`` for a resend and a sync period, while this feed
        was there: what the buffer pushes out waits for the next member heard instead
        of failing (``app/node/unheard.py``). Not in the first such period: a member
        online has not necessarily been heard yet."""
        node = self.node
        now = node.now_ms()
        since = heard_since(node.options.config, 0, now)
        if self._fed_since.setdefault(channel, now) > since:
            return False
        return not any(p.last_seen_ms >= since and p.sender_id != node.sender_id
                       for p in node.peers(channel))  # fmt: skip

    def _quiet_check_s(self, channel: str) -> float | None:
        """Seconds until :meth:`_nobody_listens` may first hold for ``channel`` (``None``:
        it may already): :meth:`admit` looks again then, since no event may wake it."""
        first = self._fed_since.get(channel)
        if first is None:
            return None
        cfg = self.node.options.config
        left = first + cfg.resend_unacknowledged_ms + cfg.sync_interval_ms - self.node.now_ms()
        return left / 1000 + 0.05 if left >= 0 else None

    async def admit(self, channel: str) -> None:
        """Wait until ``channel``'s outgoing buffer has room for one more line (woken by
        the node's own-message events: an acknowledgement frees a place)."""
        while not self.stopping and not self._room(channel):  # each pass waits for an event
            if not self._waiting_told:
                self._waiting_told = True
                self.report(
                    Info(
                        "waiting: the outgoing buffer is full of unacknowledged lines; "
                        "stdin is read again as they are acknowledged",
                        {"channel": channel, "waiting": True},
                    )
                )
            self._changed.clear()
            wake = self._quiet_check_s(channel)
            if wake is None:
                await self._changed.wait()
            else:  # nobody heard may hold by then: no event would tell
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wake)
        self._waiting_told = False

    def post(self, number: int, channel: str, text: str, kind: str) -> None:
        """Hand stdin line ``number`` to the node (raises as :meth:`Node.post` does)."""
        future = self.node.post(channel, text, kind)
        self._fed_since.setdefault(channel, self.node.now_ms())
        line = _Line(number, channel)
        self._lines.append(line)
        self._undurable += 1

        def done(fut: asyncio.Future[int]) -> None:
            self._undurable -= 1
            self._changed.set()
            self._last_progress = time.monotonic()
            if fut.cancelled():
                line.state, line.error = "error", "cancelled"
                return
            exc = fut.exception()
            if exc is not None:
                line.state, line.error = "error", str(exc)
                return
            line.local_id = fut.result()
            self._by_local[line.local_id] = line
            line.state = _later("queued", self._early.pop(line.local_id, None))
            line.sent = line.state in _LEFT or line.local_id in self._early_sent
            self._early_sent.discard(line.local_id)
            if not self._undurable:
                self._early.clear()
                self._early_sent.clear()

        future.add_done_callback(done)

    def refuse(self, number: int, channel: str | None, reason: str) -> None:
        """Stdin line ``number`` was refused before reaching the node (not UTF-8): it
        counts as read and not sent."""
        self._lines.append(_Line(number, channel or "", state="error", error=reason))

    # ------------------------------------------------------------------ end

    def unsent(self) -> list[Unsent]:
        """Lines read that never left: not handed to the transport (or refused, or given
        up before they were ever sent)."""
        return [
            Unsent(x.number, x.local_id, x.state, x.error)
            for x in self._lines
            if x.state not in _LEFT and not x.sent
        ]

    def unacknowledged(self) -> list[Unsent]:
        """Lines sent that the node then gave up on (``failed``): nobody acknowledged
        them, yet members may have them (never to be typed again: ``/retry``)."""
        return [
            Unsent(x.number, x.local_id, x.state, x.error)
            for x in self._lines
            if x.sent and x.state == "failed"
        ]

    def _idle_bound(self) -> float:
        """How long the drain waits without progress (see the module docstring)."""
        if not self.node.connected:
            return min(self.idle_s, OFFLINE_WAIT_S)
        if any(not x.sent and x.state in ("queued", "logged") for x in self._lines):
            resend_s = self.node.options.config.resend_unacknowledged_ms / 1000
            return max(self.idle_s, resend_s + RESEND_GRACE_S)
        return self.idle_s

    def _settled(self) -> bool:
        return all(x.state in _LEFT or x.state in ("failed", "error") for x in self._lines)

    async def drain(self) -> list[Unsent]:
        """Wait until every line read is durable and sent, or nothing moved for
        ``idle_s`` seconds; returns the lines that did not leave."""
        self._last_progress = time.monotonic()
        while not self.stopping and not self._settled():  # bounded by idle_s without progress
            left = self._last_progress + self._idle_bound() - time.monotonic()
            if left <= 0:
                break
            self._changed.clear()
            try:
                async with asyncio.timeout(left):
                    await self._changed.wait()
            except TimeoutError:
                pass
        return self.unsent()
