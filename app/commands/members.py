"""The members-channel commands of headless mode (and the TUI): /create, /invite,
/members, /remove, /admin, /unadmin, /verify, /msg and /query (direct messages).

Each command reports its result as node events (``members`` and ``invite`` JSON
lines in headless mode, see app/node/events.py), or an ``error`` event saying what
was wrong; a refused command changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from app.members.events import encode_set_role
from app.members.roster import Member
from app.members.safety import safety_emoji, safety_number
from app.names import FINGERPRINT_HEX, channel_arg, check_new_channel_name, confusable
from app.node.events import MembersEvent, NodeError, NodeEvent

if TYPE_CHECKING:
    from app.node.runtime import Node

__all__ = ["MEMBERS_COMMANDS", "find_member", "parse_ttl", "run_members_command"]

MEMBERS_COMMANDS = frozenset(
    {"create", "invite", "members", "remove", "admin", "unadmin", "verify", "msg", "query",
     "approve", "deny"})

ONLINE_MS = 90_000
"""A member heard from within this long is shown online."""

_TTL = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_ttl(text: str) -> int:
    """``30m``, ``2h``, ``7d`` as milliseconds (at most 30 days).

    Raises:
        ValueError: anything else.
    """
    m = _TTL.match(text.strip().lower())
    if not m:
        raise ValueError(f"an invite lifetime is a number and a unit (30m, 2h, 7d), not {text!r}")
    ms = int(m.group(1)) * _UNITS[m.group(2)]
    if not 60_000 <= ms <= 30 * 86_400_000:
        raise ValueError("an invite lifetime is between 1 minute and 30 days")
    return ms


def label(member: Member, members: Sequence[Member]) -> str:
    """``name``, or ``name (3f9a2b1c)`` when another member's name looks like it
    (:func:`app.names.confusable`: TR39 skeletons); the fingerprint grows until the
    look-alikes differ."""
    same = [m for m in members if confusable(m.name, member.name)]
    if len(same) < 2:
        return member.name
    width = FINGERPRINT_HEX
    while width < 32 and len({m.member_id[:width] for m in same}) < len(same):
        width += 2
    return f"{member.name} ({member.member_id[:width]})"


def renames_for(node: Node, new: str) -> list[tuple[str, bytes]]:
    """The ``rename`` events ``/nick new`` posts: one per members channel whose roster
    lists us under another name (channels made before chaining keep the admitted name).

    Raises:
        ValueError: ``new`` looks like another current member's name in one of them
            (:func:`app.names.confusable`): nothing is renamed anywhere.
    """
    out: list[tuple[str, bytes]] = []
    for channel in list(node.channels):
        mc = node.members_channel(channel)
        if mc is None or not mc.roster.chained or not mc.roster.is_member(node.sender_id):
            continue
        clash = mc.roster.confusable_with(new, node.sender_id)
        if clash:
            raise ValueError(f"/nick {new}: looks like the name of "
                             f"{mc.roster.label_of(clash[0].member_id)} in #{channel}; "
                             "pick a name nobody could take for theirs")  # fmt: skip
        if mc.roster.name_of(node.sender_id) != new:
            out.append((channel, mc.rename(new)))
    return out


def find_member(members: Sequence[Member], who: str) -> Member:
    """The member ``who`` names: a display name (any member whose name looks like it:
    several are refused, the message lists them with fingerprints), ``name (fp)``, or
    an id prefix (4+ hex).

    Raises:
        ValueError: nobody, or several members, match (the message lists them).
    """
    who = who.strip().lstrip("@")
    m = re.fullmatch(r"(.+?)\s*\(([0-9a-f]{4,32})\)", who)
    if m:
        found = [x for x in members if x.name == m.group(1) and x.member_id.startswith(m.group(2))]
    else:
        # a name names everyone whose name looks like it (TR39 skeletons): typing
        # "alice" must not pick one of alice and аlice (Cyrillic а) for the reader
        found = [x for x in members if confusable(x.name, who)]
        if not found and re.fullmatch(r"[0-9a-f]{4,32}", who):
            found = [x for x in members if x.member_id.startswith(who)]
    if not found:
        raise ValueError(f"no member called {who!r} here (/members lists them)")
    if len(found) > 1:
        names = ", ".join(label(x, members) for x in found)
        raise ValueError(f"{who!r} names several members: {names}; say which")
    return found[0]


async def run_members_command(
    node: Node,
    name: str,
    arg: str,
    current: str | None,
    emit: Callable[[NodeEvent], None],
    relays: Sequence[str] = (),
) -> str | None:
    """Run one members command; returns the (possibly new) current channel."""
    if name == "create":
        channel = check_new_channel_name(channel_arg(arg))
        await node.create_channel(channel)
        return channel
    if current is None:
        emit(NodeError("no current channel: /join or /create one first"))
        return current
    mc = node.members_channel(current)
    if mc is None:
        emit(NodeError(f"#{current} is not a members channel (/create one)"))
        return current
    members = list(mc.roster.members.values())
    if name == "invite":
        words = arg.split()
        approve = "approve" in words
        rest = [w for w in words if w != "approve"]
        if len(rest) > 1:
            raise ValueError("/invite [TTL] [approve]: e.g. /invite 2h approve")
        ttl = parse_ttl(rest[0]) if rest else None
        if ttl is None:
            await node.make_invite(current, relays, approve=approve)
        else:
            await node.make_invite(current, relays, ttl, approve=approve)
    elif name in ("approve", "deny"):
        waiting = node.pending_joins(current)
        who = arg.strip().lstrip("@")
        found = [(sid, n) for sid, n in waiting
                 if n == who or (len(who) >= 4 and sid.startswith(who))]  # fmt: skip
        if len(found) != 1:
            names = ", ".join(f"{n} ({sid[:8]})" for sid, n in waiting) or "none"
            raise ValueError(f"/{name}: {'several requests match' if found else 'no request from'}"
                             f" {who!r} (waiting: {names})")  # fmt: skip
        joined = await node.decide_join(current, found[0][0], approve=name == "approve")
        verb = "let in" if name == "approve" else "refused"
        emit(MembersEvent(current, name, f"{joined} {verb}", {"member": found[0][0]}))
    elif name == "members":
        now = node.now_ms()
        seen = {p.sender_id: p.last_seen_ms for p in node.peers(current)}
        rows = []
        for mid, _name, role in mc.roster.listing():
            m = mc.roster.member(mid)
            assert m is not None
            online = mid == node.sender_id or now - seen.get(mid, -ONLINE_MS) < ONLINE_MS
            you = mid == node.sender_id
            rows.append({"id": mid, "name": m.name, "label": label(m, members), "role": role,
                         "fingerprint": mid[:8], "online": online, "you": you,
                         "verified": mid in node.verified})  # fmt: skip
        text = "\n".join(
            f"{'●' if r['online'] else '○'} {r['label']:<24} {r['role']:<6} {r['fingerprint']}"
            + ("  ✓ verified" if r["verified"] else "")
            + ("  (you)" if r["you"] else "") for r in rows)  # fmt: skip
        emit(MembersEvent(current, "members", text, {"members": rows}))
    elif name in ("msg", "query"):
        who, _, text = arg.partition(" ")
        if name == "msg" and not text.strip():
            emit(NodeError("/msg needs a member and a text: /msg NAME TEXT"))
            return current
        target = find_member(members, who)
        info = await node.open_direct(current, target.member_id)
        if name == "query":
            return info.name
        await node.post(info.name, text.strip())
    elif name == "remove":
        target = find_member(members, arg)
        await node.remove_member(current, target.member_id)
    elif name in ("admin", "unadmin"):
        target = find_member(members, arg)
        if not mc.roster.is_admin(node.sender_id):
            raise ValueError(f"only an admin of #{current} can change roles")
        if target.is_admin == (name == "admin"):
            role = "an admin" if target.is_admin else "not an admin"
            raise ValueError(f"{label(target, members)} is {role} already")
        if name == "unadmin" and sum(1 for m in members if m.is_admin) == 1:
            raise ValueError(f"{label(target, members)} is the last admin of #{current}: "
                             "make another member an admin first")  # fmt: skip
        await node.post_content(current, encode_set_role(
            target.member_id, "admin" if name == "admin" else "member"))  # signed as it goes out
    elif name == "verify":
        who, _, confirm = arg.rpartition(" ")
        if confirm.lower() not in ("yes", "ok"):
            who, confirm = arg, ""
        target = find_member(members, who)
        if confirm:
            node.verified.mark(target.member_id, target.name)
            emit(MembersEvent(current, "verified",
                              f"{label(target, members)} is verified (✓ in /members)",
                              {"member": target.member_id}))  # fmt: skip
            return current
        me = node.identity
        number = safety_number(me.public_key, me.sender_id, target.info.identity_key,
                               target.member_id)  # fmt: skip
        pairs = safety_emoji(me.public_key, me.sender_id, target.info.identity_key,
                             target.member_id)  # fmt: skip
        emoji = [e for e, _ in pairs]
        emit(MembersEvent(current, "verify",
                          f"safety number with {label(target, members)}: {number} (the same "
                          f"on both screens? then /verify {who} yes)",
                          {"member": target.member_id, "name": target.name,
                           "label": label(target, members), "number": number,
                           "emoji": " ".join(emoji),
                           "emoji_names": [n for _, n in pairs]}))  # fmt: skip
    return current
