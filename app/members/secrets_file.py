"""A members channel's keys and control messages in the data directory.

One file per channel, ``DATA_DIR/members/<sha256(name)[:16] hex>.json``, mode
0600 from its first byte (like the identity key file), replaced atomically
(written beside, fsynced, renamed, directory fsynced): a crash leaves the old
file or the new one. It holds what lets a restart ask nothing: the outer keys of
every epoch, the Megolm state (:meth:`GroupKeys.export`, its pickles encrypted
with a key kept in the same file: the data directory is the secret boundary, as
for the identity key), and the channel's control messages (so that the member
list is folded again without reading the whole message log, and so that an
admin can hand them to a newcomer).

What a stolen data directory reveals is in docs/security.md.
"""

from __future__ import annotations

import hashlib
import json
import stat
from base64 import b64decode, b64encode
from pathlib import Path

from app import AppError
from app.members.channel import MembersChannel
from app.members.group_keys import GroupKeys, RotationPolicy
from app.members.private_file import write_private

__all__ = ["MembersFileError", "load", "members_file", "save"]

_VERSION = 1


class MembersFileError(AppError):
    """The file exists but cannot be used; the message says what to do."""


def members_file(data_dir: Path, channel: str) -> Path:
    """Where ``channel``'s members-channel file lives in ``data_dir``."""
    digest = hashlib.sha256(channel.encode("utf-8")).hexdigest()[:32]
    return data_dir / "members" / f"{digest}.json"


def _b64(data: bytes | None) -> str | None:
    return None if data is None else b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else b64decode(text)


def save(data_dir: Path, mc: MembersChannel) -> None:
    """Write ``mc``'s state (atomically, mode 0600)."""
    mc.saved_changes = mc.group_keys.changes
    pickle_key = mc.pickle_key
    doc = {
        "version": _VERSION,
        "channel": mc.channel,
        "channel_id": mc.channel_id.hex(),
        "own_id": mc.own_id,
        "epoch_keys": [k.hex() for k in mc.epoch_keys],
        "current": mc.sending_key().key.hex(),
        "pickle_key": pickle_key.hex(),
        "group_keys": mc.group_keys.export(pickle_key).decode(),
        "sent": mc.sent_state(),
        "controls": [
            [mid, author, lamport, _b64(content), _b64(envelope)]
            for mid, (author, lamport, content, envelope) in mc.saved_controls()
        ],
    }
    data = json.dumps(doc, separators=(",", ":")).encode()
    write_private(members_file(data_dir, mc.channel), data)


def load(data_dir: Path, channel: str, policy: RotationPolicy | None = None
         ) -> MembersChannel | None:  # fmt: skip
    """The saved state of ``channel``, or ``None`` if it is not a members channel here.

    Raises:
        MembersFileError: the file is readable by others, or not one this code wrote.
    """
    path = members_file(data_dir, channel)
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise MembersFileError(
            f"{path} may be read by other users (mode {stat.S_IMODE(st.st_mode):o}); "
            f"run: chmod 600 {path}")  # fmt: skip
    try:
        doc = json.loads(path.read_bytes())
        if doc.get("version") != _VERSION:
            raise MembersFileError(f"{path}: version {doc.get('version')!r} is not one "
                                   "this sdschat reads; use a newer sdschat")  # fmt: skip
        pickle_key = bytes.fromhex(doc["pickle_key"])
        keys = GroupKeys.restore(doc["group_keys"].encode(), pickle_key, policy)
        keys.on_members_removed()  # never reuse an outbound ratchet after a restart
        epoch_keys = [bytes.fromhex(k) for k in doc["epoch_keys"]]
        mc = MembersChannel(doc["channel"], bytes.fromhex(doc["channel_id"]), doc["own_id"],
                            epoch_keys, keys, pickle_key=pickle_key)  # fmt: skip
        for mid, author, lamport, content, envelope in doc["controls"]:
            mc.replay_control(author, int(lamport), mid, _unb64(content) or b"",
                              _unb64(envelope))  # fmt: skip
        mc.set_current(bytes.fromhex(doc["current"]))
        mc.restore_sent_state(doc.get("sent", {}))
        return mc
    except MembersFileError:
        raise
    except Exception as exc:
        raise MembersFileError(f"{path} is damaged ({type(exc).__name__}: {exc}); "
                               "restore it from a backup or join again by invite") from exc
