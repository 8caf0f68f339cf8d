"""The channels a participant has joined, remembered between runs (like an IRC autojoin list).

``DATA_DIR/channels.json`` lists, in the order they were joined, each channel
joined and not left, with its **derived** channel key (never the passphrase),
so that a channel joined with ``/join`` under another passphrase is rejoined
at the next start without asking for it again. The file is written like the
identity key: mode 0600 from its first byte (a temporary file created with
``O_CREAT | O_EXCL`` and 0600, synced, then renamed into place). ``/leave``
removes the channel. A file that cannot be read is ignored (the channels of the
command line are still joined); one that cannot be written is reported by the
caller.

Format (version 1)::

    {"v": 1, "channels": [{"name": "ops", "key": "<64 hex>", "public": false}, ...]}
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from net.channel_key import KEY_BYTES, ChannelKey, topic_for_key

__all__ = ["JOINED_FILE", "forget_channel", "load_joined", "remember_channel"]

JOINED_FILE = "channels.json"
"""Joined channels and their derived keys, in the data directory (mode 0600)."""


def load_joined(data_dir: Path) -> list[ChannelKey]:
    """The remembered channels in the order they were joined (unreadable entries skipped)."""
    try:
        data = json.loads((data_dir / JOINED_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return []
    out: list[ChannelKey] = []
    items = data.get("channels") if isinstance(data, dict) else None
    for item in items if isinstance(items, list) else ():
        try:
            name, key = str(item["name"]), bytes.fromhex(str(item["key"]))
            public = bool(item.get("public", False))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if len(key) == KEY_BYTES and name and all(k.channel != name for k in out):
            out.append(ChannelKey(name, key, topic_for_key(key), public))
    return out


def _write(data_dir: Path, keys: list[ChannelKey]) -> None:
    doc = {
        "v": 1,
        "channels": [{"name": k.channel, "key": k.key.hex(), "public": k.is_public} for k in keys],
    }
    path = data_dir / JOINED_FILE
    tmp = path.with_name(f".{JOINED_FILE}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def remember_channel(data_dir: Path, key: ChannelKey) -> None:
    """Add (or update) ``key``'s channel at the end of the list. Raises OSError."""
    keys = load_joined(data_dir)
    for i, k in enumerate(keys):
        if k.channel == key.channel:
            if k == key:
                return
            keys[i] = key
            break
    else:
        keys.append(key)
    _write(data_dir, keys)


def forget_channel(data_dir: Path, channel: str) -> None:
    """Remove ``channel`` from the list (``/leave``). Raises OSError."""
    keys = load_joined(data_dir)
    kept = [k for k in keys if k.channel != channel]
    if len(kept) != len(keys):
        _write(data_dir, kept)
