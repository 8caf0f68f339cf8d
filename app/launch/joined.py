"""The channels a participant has joined, remembered between runs (like an IRC autojoin list).

``DATA_DIR/channels.json`` lists, in the order they were joined, each channel
joined and not left: a passphrase or public channel with its **derived** channel key
(never the passphrase), so that a channel joined with ``/join`` under another
passphrase is rejoined at the next start without asking for it again; a members
channel or a direct conversation by name only (its keys are in ``DATA_DIR/members/``,
:mod:`app.members.secrets_file`). :class:`JoinedKeeper` writes it from the node's own
events, so every channel the node joins is kept, whoever joined it (a direct
conversation a member opened with us included). The file is written like the
identity key: mode 0600 from its first byte (a temporary file created with
``O_CREAT | O_EXCL`` and 0600, synced, then renamed into place). ``/leave``
removes the channel. A file that cannot be read is ignored (the channels of the
command line are still joined); one that cannot be written is reported by the
caller.

Format (version 1)::

    {"v": 1, "channels": [{"name": "ops", "key": "<64 hex>", "public": false},
                          {"name": "team", "members": true}, ...]}

(an sdschat that does not know ``members`` entries skips them: they have no key).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.members.private_file import write_private
from net.channel_key import KEY_BYTES, ChannelKey, topic_for_key

if TYPE_CHECKING:
    from app.node.events import NodeEvent
    from app.node.runtime import Node

__all__ = [
    "JOINED_FILE",
    "JoinedKeeper",
    "Remembered",
    "forget_channel",
    "load_joined",
    "load_remembered",
    "rejoinable",
    "remember_channel",
    "remember_members",
    "remembered_order",
]


@dataclass(frozen=True)
class Remembered:
    """A channel of ``channels.json``: its key, or None for a members channel."""

    name: str
    key: ChannelKey | None

JOINED_FILE = "channels.json"
"""Joined channels and their derived keys, in the data directory (mode 0600)."""


def _entry(item: object) -> Remembered | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        return None
    name = item["name"]
    if item.get("members") is True:
        return Remembered(name, None)
    try:
        key = bytes.fromhex(str(item["key"]))
    except (KeyError, TypeError, ValueError):
        return None
    if len(key) != KEY_BYTES:
        return None
    return Remembered(name, ChannelKey(name, key, topic_for_key(key), bool(item.get("public"))))


def load_remembered(data_dir: Path) -> list[Remembered]:
    """Every remembered channel in the order they were joined (unreadable entries skipped)."""
    try:
        data = json.loads((data_dir / JOINED_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return []
    out: list[Remembered] = []
    items = data.get("channels") if isinstance(data, dict) else None
    for item in items if isinstance(items, list) else ():
        entry = _entry(item)
        if entry is not None and all(e.name != entry.name for e in out):
            out.append(entry)
    return out


def load_joined(data_dir: Path) -> list[ChannelKey]:
    """The remembered passphrase and public channels' keys, in the order they were joined."""
    return [e.key for e in load_remembered(data_dir) if e.key is not None]


def _write(data_dir: Path, entries: list[Remembered]) -> None:
    doc = {
        "v": 1,
        "channels": [
            {"name": e.name, "members": True} if e.key is None
            else {"name": e.name, "key": e.key.key.hex(), "public": e.key.is_public}
            for e in entries
        ],
    }
    write_private(data_dir / JOINED_FILE, json.dumps(doc).encode("utf-8"))


def _remember(data_dir: Path, entry: Remembered) -> None:
    entries = load_remembered(data_dir)
    for i, e in enumerate(entries):
        if e.name == entry.name:
            if e == entry:
                return
            entries[i] = entry
            break
    else:
        entries.append(entry)
    _write(data_dir, entries)


def remember_channel(data_dir: Path, key: ChannelKey) -> None:
    """Add (or update) ``key``'s channel at the end of the list. Raises OSError."""
    _remember(data_dir, Remembered(key.channel, key))


def remember_members(data_dir: Path, channel: str) -> None:
    """Add members channel (or direct conversation) ``channel``. Raises OSError."""
    _remember(data_dir, Remembered(channel, None))


def forget_channel(data_dir: Path, channel: str) -> None:
    """Remove ``channel`` from the list (``/leave``). Raises OSError."""
    entries = load_remembered(data_dir)
    kept = [e for e in entries if e.name != channel]
    if len(kept) != len(entries):
        _write(data_dir, kept)


def rejoinable(data_dir: Path, remembered: Sequence[Remembered],
               joined: Collection[str]) -> list[Remembered]:  # fmt: skip
    """The remembered channels a start joins after those named on its command line
    (``joined``): the others, in their order; a members channel only while its keys
    are here (never joined as a PUBLIC channel of that name once they went)."""
    from app.members.secrets_file import members_file

    return [e for e in remembered if e.name not in joined
            and (e.key is not None or members_file(data_dir, e.name).exists())]  # fmt: skip


def remembered_order(names: Sequence[str], remembered: Sequence[Remembered]) -> list[str]:
    """``names`` (the channels joined) in the order they were first joined: those of
    ``channels.json`` in its order, the others after them as they come (the channel
    list keeps its numbers, Alt+1..9, from one start to the next)."""
    place = {e.name: i for i, e in enumerate(remembered)}
    return sorted(names, key=lambda n: (place.get(n, len(place)), names.index(n)))


class JoinedKeeper:
    """Keeps ``channels.json`` as the node joins and leaves channels (subscribe
    :meth:`on_event`): every channel the node joined is rejoined at the next start,
    a direct conversation opened by someone else included; one it left is not.
    The first write error goes to ``on_failure`` (once)."""

    def __init__(self, node: Node, data_dir: Path,
                 on_failure: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self._node = node
        self._data_dir = data_dir
        self._on_failure = on_failure
        self.failed: str | None = None

    def on_event(self, event: NodeEvent) -> None:
        from app.node.events import ChannelJoined, ChannelLeft

        if not isinstance(event, ChannelJoined | ChannelLeft):
            return
        channel = event.channel
        try:
            if isinstance(event, ChannelLeft):
                forget_channel(self._data_dir, channel)
            elif self._node.members_channel(channel) is not None:
                remember_members(self._data_dir, channel)
            elif (info := self._node.channels.get(channel)) is not None:
                remember_channel(self._data_dir, info.key)
        except OSError as exc:
            if self.failed is None:
                self.failed = f"#{channel} will not be rejoined at the next start: {exc}"
                if self._on_failure is not None:
                    self._on_failure(self.failed)
