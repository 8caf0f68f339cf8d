"""A received file's progress and integrity, read from the stored log for the TUI.

A file is a manifest and segments (``app/chat/files.py``), each an ordinary SDS message.
The log shows one line for it; while segments are missing that line is a progress
bar (segments received of the total, bytes), and once every segment is stored the
joined bytes are checked against the manifest's sha256: only then is it the
saveable ``📎 NAME (SIZE bytes)`` line (or, if they do not match, a damaged one).

:func:`read_file_state` reads the manifest and the segments stored so far (one range
of the store's file index, ``messages.file_id``: at most the file's own segments
whatever the log holds). The model counts
segments as they arrive (:meth:`app.tui.model.ChannelView.note_segment`), so the
store is read once when a file line first shows, and once more to check it when
complete.
"""

from __future__ import annotations

import asyncio

from app.chat.files import stored_file
from app.tui.model import FileState
from storage import Store

__all__ = ["read_file_state"]


async def read_file_state(store: Store, channel: str, manifest_id: str) -> FileState | None:
    """The file announced by message ``manifest_id``: its manifest, the segments stored
    (only its author's count) and, when all are there, whether the sha256 matches.
    None if the message is not a stored file manifest (``app.chat.files.stored_file``)."""
    f = await stored_file(store, channel, manifest_id)
    if f is None:
        return None
    info = f.info
    state = FileState(
        file_id=info.file_id,
        name=info.name,
        size=info.size,
        total=info.segment_count,
        segment_size=info.segment_size,
        present=set(f.segments),
        not_kept=f.not_kept > 0,
    )
    if f.complete:
        state.intact = await asyncio.to_thread(f.intact)
    return state
