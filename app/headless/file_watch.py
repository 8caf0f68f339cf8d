"""Headless ``file`` events: what a script is told of a received file's state
(``docs/content.md``): incomplete and waiting for whom, then complete or damaged."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from app.chat.files import StoredFile, stored_file, stored_manifest
from app.node.events import Delivered, NodeEvent
from storage import Store

__all__ = ["FileWatch"]

#: The text of a segment's ``delivered`` event (``app.chat.content`` summarises it so).
_SEGMENT_TEXT = re.compile(r"file segment (\d+) of ([0-9a-f]{8})")


class FileWatch:
    """Headless ``file`` events: a received file's state, so a script (or a person
    reading the JSON) is told that a file is incomplete and whose segments it waits
    for, rather than nothing. One event when its manifest is delivered (``incomplete
    · waiting for alice``, or already ``complete``/``damaged``), one when its last
    segment is, with its sha256 checked. Feed it every node event (:meth:`on_event`);
    it reads the store twice per file."""

    def __init__(self, store: Store, emit: Callable[[dict[str, Any]], None]) -> None:
        self._store = store
        self._emit = emit
        # (channel, sender id, file id's first 8 hex) -> segment indices delivered
        self._seen: dict[tuple[str, str, str], set[int]] = {}
        # the same key -> (manifest id, segment count) of a file reported incomplete
        self._open: dict[tuple[str, str, str], tuple[str, int]] = {}
        self._names: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # (channel, sender id, file id) -> (state, present) of a file found complete or
        # damaged: another manifest naming it (a member can post any number) is
        # answered from here, without reading and hashing its segments again
        self._final: dict[tuple[str, str, str], tuple[str, int]] = {}

    def on_event(self, ev: NodeEvent) -> None:
        if not isinstance(ev, Delivered) or ev.kind not in ("file", "segment"):
            return
        if ev.name:
            self._names[ev.sender_id] = ev.name
        if ev.kind == "file":
            self._later(self._report(ev.channel, ev.message_id, first=True))
            return
        m = _SEGMENT_TEXT.fullmatch(ev.text)
        if m is None:
            return
        key = (ev.channel, ev.sender_id, m.group(2))
        if int(m.group(1)) >= 65_536:  # stored empty (app/chat/file_quota.py): it cannot complete
            known = self._open.pop(key, None)
            self._seen.pop(key, None)
            if known is not None:
                self._later(self._report(key[0], known[0], first=False))
            return
        if key not in self._seen and len(self._seen) >= 1024:
            del self._seen[next(iter(self._seen))]  # bounded: the oldest file forgotten
        self._seen.setdefault(key, set()).add(int(m.group(1)))
        self._maybe_done(key)

    def _maybe_done(self, key: tuple[str, str, str]) -> None:
        known = self._open.get(key)
        if known is not None and len(self._seen.get(key, ())) >= known[1]:
            del self._open[key]
            self._seen.pop(key, None)
            self._later(self._report(key[0], known[0], first=False))

    def _later(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Cancel reports still being read."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _report(self, channel: str, manifest_id: str, *, first: bool) -> None:
        try:
            manifest = await stored_manifest(self._store, channel, manifest_id)
            if manifest is None:
                return
            final = self._final.get((channel, manifest[1], manifest[0].file_id))
            f = StoredFile(*manifest) if final is not None else await stored_file(
                self._store, channel, manifest_id)  # fmt: skip
        except Exception:  # a closing store: no report
            return
        if f is None:
            return
        info = f.info
        who = self._names.get(f.sender_id) or f.sender_id[:8]
        have = len(f.segments) if final is None else final[1]
        if final is not None:
            state = final[0]
            said = state if state == "complete" else (
                "damaged: its bytes do not match the sha256 sent")  # fmt: skip
        elif f.complete:
            intact = await asyncio.to_thread(f.intact)
            state = "complete" if intact else "damaged"
            said = "complete" if intact else "damaged: its bytes do not match the sha256 sent"
            key = (channel, f.sender_id, info.file_id)
            if key not in self._final and len(self._final) >= 1024:
                del self._final[next(iter(self._final))]  # bounded: the oldest forgotten
            self._final[key] = (state, have)
        elif f.not_kept:
            state = "not_kept"
            said = ("not kept here: over the sender's file quota or the channel's file cap "
                    "(it cannot be saved)")  # fmt: skip
        else:
            state, said = "incomplete", f"incomplete · waiting for {who}"
        self._emit({
            "event": "file", "channel": channel, "id": manifest_id, "from": who,
            "name": info.name, "size": info.size, "present": have,
            "total": info.segment_count, "state": state,
            "text": f"{info.name} · {have}/{info.segment_count} segments · {said}",
        })
        if first and final is None and not f.complete and not f.not_kept:
            key = (channel, f.sender_id, info.file_id[:8])
            if key not in self._open and len(self._open) >= 1024:
                del self._open[next(iter(self._open))]  # bounded, as _seen
            self._open[key] = (manifest_id, info.segment_count)
            self._seen.setdefault(key, set()).update(f.segments)
            self._maybe_done(key)
