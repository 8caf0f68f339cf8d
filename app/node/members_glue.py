"""What the node does with a members channel's decisions: events to show, refusals to log.

The members machine (:class:`~app.members.channel.MembersChannel`) leaves what it
decided in plain lists (notices, cuts made complete); the node calls these functions
after each call into it, and they turn the decisions into node events and event-log
rows. Nothing here imports the node's runtime.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.members.cut import MessageRefused
from app.node.events import MembersEvent
from storage.events import event_row

if TYPE_CHECKING:
    from app.members.channel import MembersChannel
    from storage import Store

__all__ = ["drain_notices", "mark_outside_cut", "refusals", "refused_event"]


def drain_notices(mc: MembersChannel) -> list[MembersEvent]:
    """The members events for what ``mc`` noticed since the last call."""
    out = [MembersEvent(mc.channel, n.what, n.text, n.data) for n in mc.notices]
    mc.notices.clear()
    return out


def refusals(mc: MembersChannel, removal: bytes, member_id: str,
             stored: Iterable[str]) -> list[MessageRefused]:  # fmt: skip
    """``member_id``'s stored messages (ids) that its removal's cut leaves out."""
    return [MessageRefused(mc.channel, mid, member_id, "outside_cut", removal.hex())
            for mid in mc.outside_cuts(member_id, stored)]  # fmt: skip


def refused_event(mc: MembersChannel, member_id: str,
                  refused: list[MessageRefused]) -> MembersEvent:  # fmt: skip
    """The members event telling that lines already shown are refused now."""
    m = mc.roster.member(member_id)
    who = m.name if m is not None else member_id[:8]
    n = len(refused)
    text = (f"#{mc.channel}: {n} message{'' if n == 1 else 's'} of {who} ({member_id[:8]}) "
            "refused: sent outside what its removal accepted")  # fmt: skip
    return MembersEvent(mc.channel, "refused", text, {
        "sender": member_id, "ids": [r.message_id for r in refused],
        "removal": refused[0].removal if refused else "", "reason": "outside_cut"})


async def mark_outside_cut(store: Store, mc: MembersChannel, removal: bytes, member_id: str,
                           now_ms: int) -> MembersEvent | None:  # fmt: skip
    """A removal's cut is complete: log a ``MessageRefused`` row for each of the removed
    member's stored messages it leaves out (``sdschat history`` marks them); the members
    event to show, if any."""
    refused = refusals(mc, removal, member_id, await store.sender_ids(mc.channel, member_id))
    if not refused:
        return None
    await store.append_events([event_row(r, now_ms) for r in refused])
    return refused_event(mc, member_id, refused)
