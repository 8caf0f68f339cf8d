"""A members channel's keys and membership records in the data directory.

Two files per channel, ``DATA_DIR/members/<sha256(name)[:16] hex>.json`` and
``.log`` beside it, mode 0600 from their first byte (like the identity key file):

* the **state** (``.json``): the outer keys of every epoch (and which epoch each
  opened), the Megolm state (:meth:`GroupKeys.export`, its pickles encrypted with a
  key kept in the same file: the data directory is the secret boundary, as for the
  identity key) and the sessions' bookkeeping. Replaced atomically (written beside,
  fsynced, renamed, directory fsynced) only when it changed: a crash leaves the old
  file or the new one.
* the **membership records** (``.log``): one JSON line per chained event, part,
  epoch-key part (and, before the upgrade, unchained event with its envelope), as
  the roster needs them, appended with one fsync per round that took any, never
  rewritten whole (except to drop records a restart found superseded). A record is
  its control content without the SDS envelope that carried it (a chained event is
  signed in itself), so the file grows by a few hundred bytes per event whatever the
  envelope held (a bloom filter of 200 KB once made it grow by as much per event).
  A line torn by a crash is dropped at the next start, and the file cut there.

So a restart asks nothing: the member list is folded again from the records, the
keys are as they were. What a stolen data directory reveals is in docs/security.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from base64 import b64decode, b64encode
from pathlib import Path

from app import AppError
from app.members.channel import MembersChannel
from app.members.group_keys import GroupKeys, RotationPolicy
from app.members.private_file import write_private
from app.members.roster import Roster

__all__ = ["MembersFileError", "load", "members_file", "read_roster", "records_file", "save"]

_VERSION = 2


class MembersFileError(AppError):
    """The file exists but cannot be used; the message says what to do."""


def members_file(data_dir: Path, channel: str) -> Path:
    """Where ``channel``'s members-channel state lives in ``data_dir``."""
    digest = hashlib.sha256(channel.encode("utf-8")).hexdigest()[:32]
    return data_dir / "members" / f"{digest}.json"


def records_file(data_dir: Path, channel: str) -> Path:
    """Where ``channel``'s membership records are appended."""
    return members_file(data_dir, channel).with_suffix(".log")


def _b64(data: bytes | None) -> str | None:
    return None if data is None else b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else b64decode(text)


def _state_doc(mc: MembersChannel) -> bytes:
    doc = {
        "version": _VERSION,
        "channel": mc.channel,
        "channel_id": mc.channel_id.hex(),
        "own_id": mc.own_id,
        "epoch_keys": [k.hex() for k in mc.epoch_keys],
        "epochs": mc.epoch_key_state(),
        "current": mc.sending_key().key.hex(),
        "pickle_key": mc.pickle_key.hex(),
        "group_keys": mc.group_keys.export(mc.pickle_key).decode(),
        "sent": mc.sent_state(),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _line(mid: str, entry: tuple[str, int, bytes, bytes | None]) -> bytes:
    author, lamport, content, envelope = entry
    row = [mid, author, lamport, _b64(content), _b64(envelope)]
    return json.dumps(row, separators=(",", ":")).encode() + b"\n"


def _append(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def save(data_dir: Path, mc: MembersChannel, *, state: bool = True) -> None:
    """Append ``mc``'s new membership records, and replace its state file when it
    changed (with ``state=False``: only when key material moved, what must be durable
    before the round's commit; the rest waits for the next periodic save)."""
    if mc.unsaved:
        data = b"".join(_line(mid, mc.records[mid]) for mid in mc.unsaved if mid in mc.records)
        _append(records_file(data_dir, mc.channel), data)
        mc.unsaved.clear()
    path = members_file(data_dir, mc.channel)
    if not (state or mc.keys_moved) and path.exists():
        return
    doc = _state_doc(mc)
    digest = hashlib.sha256(doc).digest()
    if digest != mc.saved_digest or not path.exists():
        write_private(path, doc)
        mc.saved_digest = digest
    mc.saved_changes = mc.group_keys.changes
    mc.keys_moved = False


def _check_mode(path: Path) -> None:
    st = path.stat()
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise MembersFileError(
            f"{path} may be read by other users (mode {stat.S_IMODE(st.st_mode):o}); "
            f"run: chmod 600 {path}")  # fmt: skip


def _read_records(path: Path) -> tuple[list[list[object]], int]:
    """The records of a ``.log`` and the length of its intact part."""
    rows: list[list[object]] = []
    good = 0
    data = path.read_bytes()
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break  # torn by a crash
        try:
            row = json.loads(line)
        except ValueError:
            break
        if not isinstance(row, list) or len(row) != 5:
            break
        rows.append(row)
        good += len(line)
    return rows, good


def load(data_dir: Path, channel: str, policy: RotationPolicy | None = None
         ) -> MembersChannel | None:  # fmt: skip
    """The saved state of ``channel``, or ``None`` if it is not a members channel here.
    A file of the first version (every control message with its envelope, in the
    state file) is read and written back in this form.

    Raises:
        MembersFileError: a file is readable by others, or not one this code wrote.
    """
    path = members_file(data_dir, channel)
    if not path.exists():
        return None
    _check_mode(path)
    log = records_file(data_dir, channel)
    try:
        doc = json.loads(path.read_bytes())
        version = doc.get("version")
        if version not in (1, _VERSION):
            raise MembersFileError(f"{path}: version {version!r} is not one "
                                   "this sdschat reads; use a newer sdschat")  # fmt: skip
        pickle_key = bytes.fromhex(doc["pickle_key"])
        keys = GroupKeys.restore(doc["group_keys"].encode(), pickle_key, policy)
        keys.on_members_removed()  # never reuse an outbound ratchet after a restart
        epoch_keys = [bytes.fromhex(k) for k in doc["epoch_keys"]]
        mc = MembersChannel(doc["channel"], bytes.fromhex(doc["channel_id"]), doc["own_id"],
                            epoch_keys, keys, pickle_key=pickle_key)  # fmt: skip
        mc.restore_epoch_keys(doc.get("epochs", []))
        rows: list[list[object]] = list(doc.get("controls", []))  # the first version's
        good = 0
        if log.exists():
            _check_mode(log)
            found, good = _read_records(log)
            rows.extend(found)
        for mid, author, lamport, content, envelope in rows:
            assert isinstance(mid, str) and isinstance(author, str) and isinstance(lamport, int)
            mc.replay_control(author, lamport, mid, _unb64(content) or b"",  # type: ignore[arg-type]
                              _unb64(envelope))  # type: ignore[arg-type]  # fmt: skip
        mc.set_current(bytes.fromhex(doc["current"]))
        mc.restore_sent_state(doc.get("sent", {}))
    except MembersFileError:
        raise
    except Exception as exc:
        raise MembersFileError(f"{path} is damaged ({type(exc).__name__}: {exc}); "
                               "restore it from a backup or join again by invite") from exc
    kept = mc.saved_controls()
    if version != _VERSION or len(rows) > len(kept) + 64 or (log.exists()
                                                            and good < log.stat().st_size):
        # the first version's file, superseded records, or a line torn by a crash:
        # write the records once whole (beside, then renamed), then the state
        write_private(log, b"".join(_line(mid, entry) for mid, entry in kept))
        save(data_dir, mc)
    else:
        mc.saved_digest = hashlib.sha256(_state_doc(mc)).digest()
    return mc


def read_roster(data_dir: Path, channel: str) -> Roster | None:
    """``channel``'s member list folded from its membership records alone (no key is
    read or kept): what ``sdschat history`` names authors by, beside a running node
    (the records are only ever appended). ``None`` if it is not a members channel here
    or its files cannot be read."""
    path = members_file(data_dir, channel)
    try:
        doc = json.loads(path.read_bytes())
        roster = Roster(bytes.fromhex(doc["channel_id"]))
        rows: list[list[object]] = list(doc.get("controls", []))  # the first version's
        log = records_file(data_dir, channel)
        if log.exists():
            rows.extend(_read_records(log)[0])
        for mid, author, lamport, content, _envelope in rows:
            if isinstance(mid, str) and isinstance(author, str) and isinstance(lamport, int):
                roster.add_event(author, lamport, mid, _unb64(content) or b"",  # type: ignore[arg-type]
                                 trusted=True)  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return roster
