"""One-line summaries of a members channel's own contents, for the log and ``history``.

Control messages read as what they did ("added bob", "removed dave", "made carol
admin", "is now called alicia"), whether chained (signed events) or of the first
version; a key share as "shared keys"; the marker of a message sent before we were
added as "message from before you joined". Whether an event was *valid* is the
roster's word, not this summary's: the node reports rejected events separately.
Members are named by ``name_of`` (the roster's names, :meth:`Roster.name_of`) where
the event names them by id; without it, by their id's start.
"""

from __future__ import annotations

from collections.abc import Callable

from app.members import members_pb2 as pb
from app.members.channel import BEFORE_JOINED
from app.members.events import ENCRYPTED_MAGIC, decode_control, is_control, role_name

__all__ = ["describe", "is_members_content"]

NameOf = Callable[[str], str | None]


def is_members_content(content: bytes) -> bool:
    """Control, encrypted or marker content of a members channel (``FF 'S' 'M'/'E'``)."""
    return content[:2] == b"\xffS" and content[2:3] in (b"M", b"E")


def describe(content: bytes, name_of: NameOf | None = None) -> tuple[str, str]:
    """``(kind, text)``: kind ``member`` (a membership event), ``keys`` (a key share),
    ``sealed`` (a message this member cannot read)."""
    if content == BEFORE_JOINED:
        return "sealed", "message from before you joined"
    if content.startswith(ENCRYPTED_MAGIC):
        return "sealed", "encrypted message (no key for it)"
    if not is_control(content):
        return "sealed", "members-channel content this sdschat does not know"
    msg = decode_control(content)
    if not isinstance(msg, pb.Control):
        return "member", f"membership event refused ({msg.reason})"
    body = msg.WhichOneof("body")
    if body == "signed":
        chained = pb.Chained()
        try:
            chained.ParseFromString(msg.signed.body)
        except Exception:
            return "member", "membership event refused (malformed)"
        return _describe(chained, chained.WhichOneof("body") or "", name_of)
    return _describe(msg, body or "", name_of)


def _who(member_id: str, name_of: NameOf | None) -> str:
    name = name_of(member_id) if name_of is not None else None
    return name or member_id[:8]


def _describe(m: pb.Control | pb.Chained, body: str,
              name_of: NameOf | None) -> tuple[str, str]:  # fmt: skip
    if body == "create":
        return "member", f"created #{m.create.channel} (members channel)"
    if body == "genesis" and isinstance(m, pb.Chained):
        return "member", f"chained the member list of #{m.genesis.create.channel}"
    if body == "add":
        role = " as admin" if role_name(m.add.role) == "admin" else ""
        via = " (invite)" if m.add.invite_id else ""
        return "member", f"added {m.add.member.name}{role}{via}"
    if body == "remove":
        return "member", f"removed {_who(m.remove.member_id, name_of)} (new channel keys)"
    if body == "leave":
        return "member", "left (new channel keys)"
    if body == "set_role":
        return "member", (f"made {_who(m.set_role.member_id, name_of)} "
                          f"{role_name(m.set_role.role)}")  # fmt: skip
    if body == "rename" and isinstance(m, pb.Chained):
        return "member", f"is now called {m.rename.name}"
    if body == "add_device" and isinstance(m, pb.Chained):
        return "member", f"linked a device: {m.add_device.device.name}"
    if body == "share_key":
        return "keys", "new key for key shares"
    if body == "rekey":
        return "keys", "new channel keys"
    if body == "part":
        return "keys", "part of a membership event"
    if body == "direct_invite" and isinstance(m, pb.Control):
        return "keys", ("opened a direct conversation with "
                        f"{_who(m.direct_invite.recipient_id, name_of)}")  # fmt: skip
    return "keys", "shared keys"
