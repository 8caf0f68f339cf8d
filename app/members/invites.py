"""The invites an admin's node keeps open, and the invite handshake on the wire.

An admin's node keeps every invite it made until it expires
(``DATA_DIR/members/invites.json``, mode 0600, replaced atomically): the invite
(its secret included, so a restart still answers), and which identity redeemed
it. While an invite is open the node subscribes to its topic and answers join
requests there (app/members/invite.py makes and checks the messages).

A join request or answer travels as an ordinary envelope (net/envelope.proto's
``Envelope``) on the invite's topic, with the handshake box as its ciphertext, so
that relays, LAN gossip and store peers carry it like any envelope and see only a
topic (:func:`wrap`, :func:`unwrap`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.members.invite import Invite, decode_invite, encode_invite
from app.members.private_file import write_private
from net import envelope_pb2
from net.envelope import ENVELOPE_VERSION, NONCE_BYTES

__all__ = ["InviteBook", "OpenInvite", "unwrap", "wrap"]


def wrap(topic: bytes, box: bytes) -> bytes:
    """An envelope carrying a handshake ``box`` on an invite ``topic``."""
    env = envelope_pb2.Envelope(version=ENVELOPE_VERSION, topic=topic,
                                nonce=bytes(NONCE_BYTES), ciphertext=box)  # fmt: skip
    return env.SerializeToString()


def unwrap(envelope: bytes) -> tuple[bytes, bytes] | None:
    """``(topic, box)`` of an envelope made by :func:`wrap`, else ``None``."""
    try:
        env = envelope_pb2.Envelope.FromString(envelope)
    except Exception:
        return None
    if env.version != ENVELOPE_VERSION or not env.ciphertext:
        return None
    return bytes(env.topic), bytes(env.ciphertext)


@dataclass(slots=True)
class OpenInvite:
    """An invite this node made: the code's content, and who redeemed it (if anyone)."""

    invite: Invite
    used_by: str = ""
    approve: bool = False  # an admin approves each request by hand (/approve, /deny)


class InviteBook:
    """The open invites of one data directory (see the module docstring)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "members" / "invites.json"
        self._open: dict[bytes, OpenInvite] = {}  # topic -> invite
        self._mtime_ns = -1
        self.reload()

    def reload(self) -> bool:
        """Read the file again if another program (``sdschat invite``) changed it;
        True when it did. Invites this book holds are kept."""
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return False
        if mtime == self._mtime_ns:
            return False
        self._mtime_ns = mtime
        doc = json.loads(self.path.read_bytes())
        for item in doc.get("invites", []):
            inv = decode_invite(item["code"])
            known = self._open.get(inv.topic)
            used = item.get("used_by", "") or (known.used_by if known else "")
            self._open[inv.topic] = OpenInvite(inv, used, bool(item.get("approve", False)))
        return True

    def add(self, invite: Invite, *, approve: bool = False) -> None:
        self.reload()
        self._open[invite.topic] = OpenInvite(invite, approve=approve)
        self.save()

    def get(self, topic: bytes) -> OpenInvite | None:
        return self._open.get(topic)

    def topics(self, now_ms: int, channel: str | None = None) -> list[bytes]:
        """Topics of the unexpired invites (of ``channel`` if given)."""
        return [t for t, o in self._open.items() if o.invite.expires_ms > now_ms
                and (channel is None or o.invite.channel == channel)]  # fmt: skip

    def mark_used(self, topic: bytes, sender_id: str) -> None:
        entry = self._open.get(topic)
        if entry is not None and not entry.used_by:
            entry.used_by = sender_id
            self.save()

    def expire(self, now_ms: int) -> list[bytes]:
        """Forget expired invites; returns their topics (to unsubscribe)."""
        gone = [t for t, o in self._open.items() if o.invite.expires_ms <= now_ms]
        for t in gone:
            del self._open[t]
        if gone:
            self.save()
        return gone

    def save(self) -> None:
        doc = {"version": 1, "invites": [
            {"code": encode_invite(o.invite), "used_by": o.used_by, "approve": o.approve}
            for o in self._open.values()]}  # fmt: skip
        write_private(self.path, json.dumps(doc).encode())
        self._mtime_ns = self.path.stat().st_mtime_ns
