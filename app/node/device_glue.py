"""The node's part for device logs in public and passphrase channels (issue 40 §1):
:class:`DeviceGlue`.

* **Sending.** At start it reads our person's log (``members/devices.json``,
  :mod:`app.members.person_file`) and the book of the others' (``members/people.json``,
  :mod:`app.members.device_labels`). Every public or passphrase channel joined (or
  resumed) gets our log as device-log content, once per channel and state of the log
  (the marks are kept in the book); a link that adds a device (:meth:`reload`: ``/link``
  here, or ``sdschat link`` beside the node, whose file is looked at every
  :data:`WATCH_S`) sends the new log to every such channel; a sender heard first in a
  channel that no log names (a newcomer, who may not hold what we sent before) gets it
  again, at most once per two sync intervals (a minute by default) per channel. A person
  of one device (no log) sends nothing.
* **Receiving.** The effects hand it every delivered device-log content of such a
  channel (:meth:`delivered`) before the line is labelled; the book checks and folds
  it, and a change is written (in a thread, atomically, mode 0600).

The book is what the labels read (:class:`app.chat.authors.Authors` ``devices``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.members import person_file
from app.members.device_labels import PEOPLE_FILE, DeviceBook
from app.members.devices import PersonLog
from app.members.private_file import write_private
from app.node.events import ChannelJoined, Info, NodeError, NodeEvent, PeerInfo, PeerSeen

if TYPE_CHECKING:
    from app.node.context import NodeContext

__all__ = ["RESEND_SYNCS", "DeviceGlue", "by_person"]

WATCH_S = 5.0
"""How often ``members/devices.json`` is looked at (``sdschat link`` beside the node)."""
RESEND_SYNCS = 2
"""Our log is sent again to a channel where a newcomer is heard at most once per this
many sync intervals (``sync_interval_ms``: a minute by default)."""


class DeviceGlue:
    """Device logs sent into and folded from public and passphrase channels."""

    def __init__(self, ctx: NodeContext, *, post_content: Callable[[str, bytes], Awaitable[int]],
                 is_members: Callable[[str], bool]) -> None:  # fmt: skip
        self.book = DeviceBook(ctx.sender_id)
        self._ctx = ctx
        self._data_dir: Path = ctx.store.data_dir
        self._post = post_content
        self._is_members = is_members
        self._started = False
        self._waiting: list[str] = []
        self._saving: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._seen_file: tuple[int, int] | None = None
        self._last_sent: dict[str, int] = {}
        """Channel -> when our log was last sent there (this run)."""
        self._told_unlinked = False
        self.on_own_log: Callable[[], None] = lambda: None
        """Called once our log was read and whenever it changed (members channels
        follow it: app/node/device_members.py)."""

    def own_log(self) -> PersonLog | None:
        """Our person's log as this node holds it (ours, with what it folded of our
        other devices'), ``None`` for a person of one device."""
        book = self.book
        return book.people.log_of(book.own_root) if book.own_root else None

    async def start(self) -> None:
        """Read the files; send our log to the channels joined so far."""
        own = await asyncio.to_thread(self._own_log)
        data = await asyncio.to_thread(self._read_people)
        if data is not None:  # the labels hold this book: read into it, on the loop
            self.book.decode_into(data)
        self.book.set_own(own)
        self.book.changed = False
        self._started = True
        waiting, self._waiting = self._waiting, []
        for channel in waiting:
            self._announce(channel)
        self._seen_file = self._file_stamp()
        asyncio.get_running_loop().call_later(WATCH_S, self._watch)
        self.on_own_log()

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = (self._data_dir / person_file.PERSON_FILE).stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def _watch(self) -> None:
        """``sdschat link`` beside this node wrote our log: read it and send it."""
        if self._ctx.closing:
            return
        stamp = self._file_stamp()
        if stamp != self._seen_file:
            self._seen_file = stamp
            self._spawn(self.reload())
        asyncio.get_running_loop().call_later(WATCH_S, self._watch)

    def _read_people(self) -> bytes | None:
        try:
            return (self._data_dir / PEOPLE_FILE).read_bytes()
        except OSError:
            return None

    def _own_log(self) -> PersonLog | None:
        try:
            return person_file.load(self._data_dir)
        except person_file.PersonFileError as exc:
            self._ctx.emit(NodeError(f"own device log not sent: {exc}"))
            return None

    def on_event(self, ev: NodeEvent) -> None:
        """A node event (subscribed): a joined channel gets our log; so does a channel
        where a sender is heard first that no log names (a newcomer, who did not read
        what we sent before it came), at most once per :data:`RESEND_SYNCS` sync intervals."""
        if isinstance(ev, ChannelJoined):
            if not self._started:
                self._waiting.append(ev.channel)
            else:
                self._announce(ev.channel)
        elif isinstance(ev, PeerSeen) and ev.first and self._started and (
                self.book.speaker(ev.sender_id) is None):  # fmt: skip
            last = self._last_sent.get(ev.channel)
            every = RESEND_SYNCS * self._ctx.options.config.sync_interval_ms
            if last is None or self._ctx.now() - last >= every:
                self._announce(ev.channel, again=True)

    async def reload(self) -> None:
        """Our person's log changed (a link): read it again and send it everywhere."""
        self._seen_file = await asyncio.to_thread(self._file_stamp)
        own = await asyncio.to_thread(self._own_log)
        self.book.set_own(own)
        for channel in list(self._ctx.channels):
            self._announce(channel)
        self._save_soon()
        self.on_own_log()

    def _announce(self, channel: str, again: bool = False) -> None:
        if self._is_members(channel) or channel not in self._ctx.channels:
            return
        content = self.book.own_content() if again else self.book.due(channel)
        if content is None:
            return
        self._last_sent[channel] = self._ctx.now()
        try:
            future = self._post(channel, content)
        except (KeyError, ValueError, RuntimeError) as exc:
            self._ctx.emit(NodeError(f"device log not sent to #{channel}: {exc}"))
            return
        self.book.mark_sent(channel, content)

        async def sent() -> None:
            try:
                await future
            except Exception as exc:  # the line stays in the outbox or was refused
                self.book.sent.pop(channel, None)
                self._ctx.emit(NodeError(f"device log not sent to #{channel}: {exc}"))
            self._save_soon()

        self._spawn(sent())

    def delivered(self, channel: str, sender_id: str, content: bytes) -> None:
        """A device-log content delivered in ``channel`` (not a members channel)."""
        why = self.book.take(sender_id, content)
        self._ctx.counters["device_logs_taken" if not why else f"device_logs_refused_{why}"] += 1
        if not why:
            self._unlinked_here(channel, sender_id)
        if self.book.changed:
            self._save_soon()

    def _unlinked_here(self, channel: str, sender_id: str) -> None:
        """Another device of our person revoked this one (``/unlink``): say it, once."""
        book = self.book
        log = book.people.log_of(book.own_root) if book.own_root else None
        if (self._told_unlinked or log is None
                or book.own_sender_id not in log.revoked_ids()):  # fmt: skip
            return
        self._told_unlinked = True
        by = log.device_by_id(sender_id)
        self._ctx.emit(Info(
            f"this device was unlinked by {by.name if by is not None else 'another device'} "
            f"(in #{channel}): the others no longer show its lines as yours. Link it again "
            "with /link on one of your devices, into a new data directory",
            data={"unlinked": book.own_sender_id, "by": sender_id}))  # fmt: skip

    def _save_soon(self) -> None:
        if self._saving is not None and not self._saving.done():
            return  # the running save writes what is held when it starts; redo after

        async def save() -> None:
            while self.book.changed:
                data = self.book.encode()  # here, on the loop: the thread only writes
                self.book.changed = False
                try:
                    await asyncio.to_thread(write_private, self._data_dir / PEOPLE_FILE, data)
                except OSError as exc:
                    self._ctx.emit(NodeError(f"cannot keep the device logs: {exc}"))
                    return

        self._saving = asyncio.get_running_loop().create_task(save())
        self._tasks.add(self._saving)
        self._saving.add_done_callback(self._tasks.discard)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def by_person(peers: list[PeerInfo], book: DeviceBook) -> list[PeerInfo]:
    """``peers`` with each person's certified devices as one participant (its root id,
    the name its devices claimed last, the devices' names, its channels, newest sight,
    messages summed); another device of our own person on its own, as ``bob · laptop``."""
    out: list[PeerInfo] = []
    groups: dict[str, list[tuple[PeerInfo, str]]] = {}
    for p in peers:
        sp = book.speaker(p.sender_id)
        if sp is None:
            out.append(p)
        elif sp.own:
            name = book.name_of(p.sender_id, p.name)
            out.append(replace(p, name=f"{name or '?'} · {sp.device}", person=sp.person,
                               devices=(sp.device,)))  # fmt: skip
        else:
            groups.setdefault(sp.person, []).append((p, sp.device))
    for root, members in groups.items():
        first = members[0][0]
        out.append(PeerInfo(
            root, book.name_of(first.sender_id, first.name),
            tuple(sorted({c for p, _ in members for c in p.channels})),
            max(p.last_seen_ms for p, _ in members), sum(p.messages for p, _ in members),
            person=root, devices=tuple(sorted(d for _, d in members)),
        ))  # fmt: skip
    return out
