"""The TUI's side of "removed or left means read-only" (:mod:`app.commands.standing`):
the banner over a channel we are out of, the notices of a removal with names (ours,
and the others' as they happen), and who counts in a members channel's lists (a
removed member drops out of the peer list, ``/who``, ``/info`` and the counts at once).
The app calls these; nothing here imports the app."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import tzinfo
from typing import TypeVar

from app.commands.standing import members_only, read_only_reason, removal_of
from app.node.events import MembersEvent, Rejected
from app.node.runtime import Node

__all__ = ["banner_text", "counted", "members_notices", "quiet_rejection"]

T = TypeVar("T")


def banner_text(node: Node | None, channel: str | None, tz: tzinfo | None) -> str | None:
    """What the banner says over ``channel`` (None: nothing, hidden)."""
    if node is None or channel is None or channel not in node.channels:
        return None
    return read_only_reason(node, channel, tz)


def counted(node: Node | None, channel: str | None, items: Iterable[T],
            key: str = "sender_id") -> list[T]:  # fmt: skip
    """``items`` without the people who are no members of ``channel`` now."""
    return list(items) if node is None else members_only(node, channel, items, key)


def members_notices(node: Node | None, ev: MembersEvent,
                    tz: tzinfo | None) -> list[tuple[str, str]]:  # fmt: skip
    """(severity, text) of the notices a members event makes: our own removal, with who
    and when ("you were removed from #team by alice on …"), and the others' by name
    ("dave was removed from #team by alice on …") rather than "the member list
    changed"."""
    mc = node.members_channel(ev.channel) if node is not None else None
    if node is None or mc is None:
        return []
    if ev.what == "removed_me":
        removal = removal_of(mc, node.sender_id)
        return [("warning", (removal.text(tz) if removal is not None else ev.text)
                 + f": #{ev.channel} is read-only now; its history stays")]  # fmt: skip
    out: list[tuple[str, str]] = []
    removed = ev.data.get("removed") if ev.what == "changed" else None
    for mid in removed if isinstance(removed, list) else ():
        removal = removal_of(mc, str(mid))
        if removal is None or mid == node.sender_id:
            continue
        who = mc.roster.label_of(str(mid))  # its fingerprint when a name looks like it
        out.append(("information", removal.text(tz, who=who)))
    return out


def quiet_rejection(node: Node | None, ev: Rejected) -> bool:
    """An envelope of a channel we are out of that does not open: of course (it is
    sealed to keys we were not given), nothing to warn about."""
    if node is None or ev.channel is None or ev.reason != "wrong_key_or_tampered":
        return False
    mc = node.members_channel(ev.channel)
    return mc is not None and mc.roster.created and not mc.roster.is_member(node.sender_id)
