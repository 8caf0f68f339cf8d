"""One-line summaries of a members channel's own contents, for the log and ``history``.

Control messages read as what they did ("added bob", "removed 3f9a2b1c"); a key
share as "shared keys"; the marker of a message sent before we were added as
"message from before you joined". Whether an event was *valid* is the roster's
word, not this summary's: the node reports rejected events separately.
"""

from __future__ import annotations

from app.members import members_pb2 as pb
from app.members.channel import BEFORE_JOINED
from app.members.events import ENCRYPTED_MAGIC, decode_control, is_control, role_name

__all__ = ["describe", "is_members_content"]


def is_members_content(content: bytes) -> bool:
    """Control, encrypted or marker content of a members channel (``FF 'S' 'M'/'E'``)."""
    return content[:2] == b"\xffS" and content[2:3] in (b"M", b"E")


def describe(content: bytes) -> tuple[str, str]:
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
    if body == "create":
        return "member", f"created #{msg.create.channel} (members channel)"
    if body == "add":
        role = " as admin" if role_name(msg.add.role) == "admin" else ""
        via = " (invite)" if msg.add.invite_id else ""
        return "member", f"added {msg.add.member.name}{role}{via}"
    if body == "remove":
        return "member", f"removed {msg.remove.member_id[:8]} (new channel keys)"
    if body == "set_role":
        return "member", f"made {msg.set_role.member_id[:8]} {role_name(msg.set_role.role)}"
    if body == "share_key":
        return "keys", "new key for key shares"
    if body == "rekey":
        return "keys", "new channel keys"
    if body == "direct_invite":
        return "keys", f"opened a direct conversation with {msg.direct_invite.recipient_id[:8]}"
    return "keys", "shared keys"
