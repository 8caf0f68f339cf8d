"""Where a person stands in a members channel: a member, or out of it (removed by an
admin, or left), and since when. "Removed or left means read-only": the channel stays,
with its history up to the cut, and what would write to it is refused with the reason
(:func:`read_only_reason`, for both front ends); the TUI shows the same words in a
lasting banner. Read from the resolved membership chain (who signed the applied
removal, its Lamport time: the remover's clock, in ms), nothing stored of its own."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from app.members.channel import MembersChannel
    from app.node.runtime import Node

__all__ = ["Removal", "members_only", "read_only_reason", "removal_of"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Removal:
    """How ``member_id`` left members channel ``channel``."""

    channel: str
    member_id: str
    left: bool
    """It left by itself (a ``leave``), else an admin removed it."""
    by: str | None
    """The remover's sender id (None when not known: a channel made before chaining)."""
    by_name: str | None
    at_ms: int
    """The removal's Lamport time (its author's clock, ms); 0 when not known."""

    def text(self, tz: tzinfo | None = None, *, who: str = "you") -> str:
        """``you were removed from #team by alice on 2026-12-07 14:03`` (``who``: the
        person's name, for the others' notice: ``dave was removed …``)."""
        verb = "left" if self.left else f"{'were' if who == 'you' else 'was'} removed from"
        line = f"{who} {verb} #{self.channel}"
        if not self.left and self.by_name:
            line += f" by {self.by_name}"
        if self.at_ms > 0:
            line += f" on {datetime.fromtimestamp(self.at_ms / 1000, tz):%Y-%m-%d %H:%M}"
        return line


def removal_of(mc: MembersChannel, member_id: str) -> Removal | None:
    """The applied removal (or leave) that made ``member_id`` no member of ``mc`` now;
    None while it is a member, or when it never was one."""
    roster = mc.roster
    if roster.is_member(member_id) or not roster.ever_member(member_id):
        return None
    chain = roster.chain
    for ev in reversed(chain.events_in_order()):
        if ev.body not in ("remove", "leave") or ev.target != member_id:
            continue
        outcome = roster.outcome_of_event(ev.hash)
        if outcome is None or not outcome.applied:
            continue
        node = chain.nodes.get(ev.hash)
        at = node.position[0] if node is not None else 0
        by = ev.author_id
        return Removal(mc.channel, member_id, ev.body == "leave", by, roster.label_of(by), at)
    return Removal(mc.channel, member_id, False, None, None, 0)  # before chaining: no event


def read_only_reason(node: Node, channel: str, tz: tzinfo | None = None) -> str | None:
    """Why nothing can be written to ``channel`` (we were removed, or left), or None."""
    mc = node.members_channel(channel)
    if mc is None or mc.roster.is_member(node.sender_id) or not mc.roster.created:
        return None
    removal = removal_of(mc, node.sender_id)
    if removal is None:
        return f"you are not a member of #{channel}: it is read-only here"
    return f"{removal.text(tz)}: #{channel} is read-only (its history stays readable)"


def members_only(node: Node, channel: str | None, items: Iterable[T], key: str) -> list[T]:
    """``items`` (peers, holders) of ``channel`` without those who are no members of it
    now, when it is a members channel: a removed person drops out of the roster, /who,
    /info and the counts at once. ``key`` names the sender-id attribute."""
    mc = node.members_channel(channel) if channel is not None else None
    if mc is None:
        return list(items)
    return [x for x in items if mc.roster.is_member(getattr(x, key))]
