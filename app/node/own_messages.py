"""Our own messages while they are on their way: :class:`OwnMessages`.

An own message is ``queued`` when the core made it (stored with its envelope in the
round's commit), ``sent`` once its envelope left, then ``possibly_acknowledged``
(bloom filters of other members' messages hold it) and ``acknowledged`` (a causal
history names it) or ``failed`` (resends exhausted). States only move forward
(:data:`RANK`); an acknowledgement that comes after the core gave up still says the
message arrived. This part remembers, for the messages not acknowledged yet, their
state, their outbox ``local_id``, their text (for a ``failed`` event and for
``/retry``) and, for typed content, the exact bytes (resent as they are); and the
failed ones that ``/retry`` may send again.

Who writes: :class:`~app.node.effects.Effects` (the core's events),
:class:`~app.node.publishing.Publisher` (``sent``: advisory, carried into the next
round's transaction instead of a commit of its own), :class:`~app.node.joining.Joiner`
(the stored states of a channel joined again). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.chat.content import decode_content
from app.node.events import NodeEvent, OwnMessage
from storage import Batch, OwnState, StoredMessage

__all__ = ["RANK", "OwnMessages", "is_typed"]

#: Own states only move forward; an acknowledgement that comes after the core gave
#: up on a message (failed) still says it arrived.
RANK = {
    OwnState.QUEUED: 0,
    OwnState.SENT: 1,
    OwnState.POSSIBLY_ACKNOWLEDGED: 2,
    OwnState.FAILED: 3,
    OwnState.ACKNOWLEDGED: 4,
}


def is_typed(content: bytes) -> bool:
    """Typed content (``app/chat/content.py``: starts with 0xFF): resent byte for byte."""
    return content[:1] == b"\xff"


class OwnMessages:
    """The state of own messages not acknowledged yet, by ``(channel, message id)``."""

    def __init__(self) -> None:
        self.state: dict[tuple[str, str], OwnState] = {}
        self.local_ids: dict[tuple[str, str], int] = {}
        self.text: dict[tuple[str, str], tuple[str, str]] = {}
        """``(text, kind)`` of each: a ``failed`` event shows it, ``/retry`` re-encodes it."""
        self.typed: dict[tuple[str, str], bytes] = {}
        """Typed content (app.chat.content) of own unacknowledged messages: resent as is."""
        self.failed: list[tuple[str, str, bytes]] = []
        """``(channel, message id, content)`` that failed and may be retried."""
        self.carried: list[tuple[str, str, OwnState]] = []
        """States to store with the next batch (``sent``: see :meth:`mark_sent`)."""

    def set(self, channel: str, mid: str, state: OwnState, batch: Batch | None) -> bool:
        """Record an own-message state if it moves forward (into ``batch``, or carried to
        the next one when None); True if it changed."""
        key = (channel, mid)
        current = self.state.get(key)
        if current is not None and RANK[state] <= RANK[current]:
            return False
        if state in (OwnState.ACKNOWLEDGED, OwnState.FAILED):
            self.state.pop(key, None)
            self.text.pop(key, None)
            if state is OwnState.ACKNOWLEDGED:
                self.typed.pop(key, None)
        else:
            self.state[key] = state
        if batch is not None:
            batch.set_own_state(channel, [mid], state)
        else:
            self.carried.append((channel, mid, state))
        return True

    def logged(self, channel: str, mid: str, local_id: int | None, plain: bytes,
               text: str, kind: str) -> None:  # fmt: skip
        """The core made message ``mid`` of ours (content ``plain``): it is queued."""
        key = (channel, mid)
        if local_id is not None:
            self.local_ids[key] = local_id
        self.state[key] = OwnState.QUEUED
        self.text[key] = (text, kind)
        if is_typed(plain):
            self.typed[key] = plain

    def mark_sent(self, ch: str, mid: str, events: list[NodeEvent]) -> None:
        """Its envelope left: ``sent`` (carried into the next batch), with its event."""
        if self.state.get((ch, mid)) is OwnState.QUEUED and self.set(ch, mid, OwnState.SENT,
                                                                     None):  # fmt: skip
            events.append(OwnMessage(ch, "sent", self.local_ids.get((ch, mid)), mid))

    def add_carried(self, batch: Batch) -> None:
        """Put the carried own states that are still current into ``batch``.

        A carried "sent" may be committed a round or more after it happened; if
        the message moved on meanwhile (possibly acknowledged, or acknowledged
        and dropped from ``state``), that later state is already in a
        batch and the stale one must not overwrite it.
        """
        for ch, mid, state in self.carried:
            if self.state.get((ch, mid)) is state:
                batch.set_own_state(ch, [mid], state)
        self.carried = []

    def acknowledged_after_failing(self, channel: str, mid: str) -> None:
        """``mid`` was acknowledged: nothing of it is left to retry."""
        if self.failed:
            self.failed = [f for f in self.failed if f[0] != channel or f[1] != mid]

    def take_failed(self, channel: str | None) -> list[tuple[str, str, bytes]]:
        """The failed messages (of ``channel``, or all) to retry; forgotten here."""
        again = [f for f in self.failed if channel is None or f[0] == channel]
        self.failed = [f for f in self.failed if f not in again]
        return again

    def learn(self, channel: str, stored: Mapping[str, StoredMessage], *,
              text: bool = True) -> None:  # fmt: skip
        """The stored states (queued or sent) of ``channel``'s own unacknowledged
        messages, at a join (with their text) or after a full disk (``text=False``)."""
        for mid, msg in stored.items():
            if msg.state is not None:
                self.state[(channel, mid)] = msg.state
                if not text:
                    continue
                c = decode_content(msg.content)
                self.text[(channel, mid)] = (c.text, c.kind if c.kind != "raw" else "msg")
                if is_typed(msg.content):
                    self.typed[(channel, mid)] = msg.content

    def learn_failed(self, channel: str, failed: Iterable[tuple[str, bytes]]) -> None:
        """Own messages of ``channel`` that failed in an earlier run (``/retry`` may send them)."""
        for mid, content in failed:
            self.failed.append((channel, mid, content))

    def forget_states(self, channel: str) -> None:
        """``channel`` is left (or rebuilt from storage): its states go."""
        self.state = {k: v for k, v in self.state.items() if k[0] != channel}
