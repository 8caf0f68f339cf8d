"""A received file's progress and integrity, read from the stored log for the TUI.

A file is a manifest and segments (``app/files.py``), each an ordinary SDS message.
The log shows one line for it; while segments are missing that line is a progress
bar (segments received of the total, bytes), and once every segment is stored the
joined bytes are checked against the manifest's sha256: only then is it the
saveable ``📎 NAME (SIZE bytes)`` line (or, if they do not match, a damaged one).

:func:`read_file_state` reads the manifest and the segments stored so far (one
``LIKE`` scan for the file id: the segments carry it as text). The model counts
segments as they arrive (:meth:`app.tui.model.ChannelView.note_segment`), so the
store is read once when a file line first shows, and once more to check it when
complete.
"""

from __future__ import annotations

import asyncio
import hashlib

from app.content import decode
from app.tui.model import FileState
from storage import Store

__all__ = ["read_file_state"]


async def read_file_state(store: Store, channel: str, manifest_id: str) -> FileState | None:
    """The file announced by message ``manifest_id``: its manifest, the segments stored
    (only its author's count) and, when all are there, whether the sha256 matches.
    None if the message is not a stored file manifest."""
    found = await store.get_messages(channel, [manifest_id])
    msg = found.get(manifest_id)
    if msg is None:
        return None
    d = decode(msg.content)
    info = d.file
    if d.kind != "file" or info is None:
        return None
    entries = await store.search(channel, info.file_id, limit=info.segment_count + 64)
    data: dict[int, bytes] = {}
    for e in entries:
        if e.sender_id != msg.sender_id:
            continue
        s = decode(e.content)
        ours = s.kind == "segment" and s.target_id == info.file_id
        if ours and 0 <= s.segment_index < info.segment_count:
            data.setdefault(s.segment_index, s.segment_data)
    state = FileState(
        file_id=info.file_id,
        name=info.name,
        size=info.size,
        total=info.segment_count,
        segment_size=info.segment_size,
        present=set(data),
    )
    if len(data) == info.segment_count:

        def check() -> bool:
            joined = b"".join(data[i] for i in range(info.segment_count))[: info.size]
            return hashlib.sha256(joined).digest() == info.sha256

        state.intact = await asyncio.to_thread(check)
    return state

