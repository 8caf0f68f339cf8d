"""Typed-content commands on a running :class:`~app.node.Node`, by message id: headless
mode's ``/reply``, ``/react``, ``/edit``, ``/delete`` and ``/topic``, and both front ends'
``/send`` and ``/save`` (the TUI names the selected file line's id).

Each reads the channel's conversation view from the node's stored log
(:func:`channel_view`), checks what it can locally (the target exists, it is our own
message for ``/edit`` and ``/delete``), and queues typed content
(:mod:`app.chat.content`, :mod:`app.chat.files`) with :meth:`app.node.runtime.Node.post_content`.
Receivers check again (an edit or delete by anyone but the author is ignored).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from app.chat.content import (
    ConversationView,
    encode_delete,
    encode_edit,
    encode_reaction,
    encode_reply,
    encode_topic,
)
from app.chat.files import FileError, read_file_to_send, save_stored, split_file, stored_file
from app.node.events import Info, NodeEvent, OwnMessage

if TYPE_CHECKING:
    from app.node.runtime import Node

__all__ = [
    "CONTENT_COMMANDS",
    "add_delivered",
    "channel_view",
    "current_topic",
    "paste_file_name",
    "resolve_id",
    "run_content_command",
    "target_view",
]

CONTENT_COMMANDS = ("reply", "react", "edit", "delete", "topic", "send", "paste", "save")

_PAGE = 1000
_OPS_PAGES = 100  # at most 100,000 of one author's lines naming a target are read
_PREFIX_MATCHES = 100

LOGGED_WAIT_S = 5.0
"""How long a command waits for its message to enter the log before the next one."""


async def channel_view(
    node: Node, channel: str, *, keep_file_data: bool = True
) -> ConversationView:
    """The conversation view of ``channel``'s whole stored log (paged, newest first);
    ``keep_file_data=False`` keeps no file bytes in memory (see
    :class:`~app.chat.content.ConversationView`)."""
    view = ConversationView(keep_file_data=keep_file_data)
    before: tuple[int, str] | None = None
    for _ in range(100_000):  # bounded: a page of 1,000 per pass
        page = await node.page(channel, before=before, limit=_PAGE)
        for line in page:
            view.add(line.message_id, line.sender_id, line.lamport, line.content)
        if len(page) < _PAGE:
            break
        before = (page[0].lamport, page[0].message_id)
    return view


async def resolve_id(node: Node, channel: str, ref: str) -> str:
    """The id of the stored message of ``channel`` that ``ref`` names: a full id or a
    unique prefix of at least 4 hex characters, as :meth:`ConversationView.resolve`
    answers it, from one range of the store's primary key (not the whole log).

    Raises:
        ValueError: ``ref`` is not hex, too short, unknown or ambiguous.
    """
    ref = ref.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{4,64}", ref):
        raise ValueError(f"not a message id or id prefix (4+ hex characters): {ref!r}")
    found = await node.store.ids_with_prefix(channel, ref, limit=_PREFIX_MATCHES)
    if ref in found:
        return ref
    if not found:
        raise ValueError(f"no message {ref} in this channel")
    if len(found) > 1:
        many = f"{len(found)}+" if len(found) >= _PREFIX_MATCHES else str(len(found))
        raise ValueError(f"{ref} names {many} messages: give more characters")
    return found[0]


async def target_view(
    node: Node, channel: str, target: str, *, ops_of: Iterable[str] = ()
) -> ConversationView:
    """A conversation view of message ``target`` alone, with the reactions, edits and
    deletions that its author and the senders ``ops_of`` made on it: what a command
    needs to know of one message (its author, kind, current text, whether we reacted
    with an emoji), read without the rest of the log. Each author's messages naming
    the target are found by a search limited to that author (others' contents, file
    segments included, are not read); no file bytes are kept."""
    view = ConversationView(keep_file_data=False)
    found = await node.store.get_messages(channel, [target])
    msg = found.get(target)
    if msg is None:
        return view
    view.add(target, msg.sender_id, msg.lamport, msg.content)
    for author in dict.fromkeys([msg.sender_id, *ops_of]):
        before: tuple[int, str] | None = None
        for _ in range(_OPS_PAGES):  # bounded: an author's lines naming the target
            page = await node.store.search(
                channel, target, before=before, limit=_PAGE, sender_id=author
            )
            for e in page:
                view.add(e.message_id, e.sender_id, e.lamport, e.content)
            if len(page) < _PAGE:
                break
            before = page[-1].cursor
    return view


async def current_topic(node: Node, channel: str) -> str | None:
    """The channel's topic as :attr:`ConversationView.topic` gives it (the newest topic
    line in SDS order that its author did not delete; ``None``: never set, ``""``:
    cleared), from the lines that mention "topic", newest first, instead of the whole
    log folded."""
    before: tuple[int, str] | None = None
    for _ in range(_OPS_PAGES):  # bounded: 100,000 lines mentioning "topic"
        page = await node.store.search(channel, "topic", before=before, limit=_PAGE)
        for e in page:  # newest first
            if ConversationView([(e.message_id, e.sender_id, e.lamport, e.content)]).topic is None:
                continue  # not a topic line
            topic = (await target_view(node, channel, e.message_id)).topic
            if topic is not None:  # None: its author deleted it; an older one counts
                return topic
        if len(page) < _PAGE:
            return None
        before = page[-1].cursor
    return None


async def add_delivered(
    node: Node, view: ConversationView, channel: str, message_ids: Iterable[str]
) -> int:
    """Add to ``view`` the stored messages ``message_ids`` of ``channel`` (e.g. the ids
    of ``Delivered``/``OwnMessage`` events, which carry no content bytes); returns how
    many were new to the view. A front end keeps one view per channel: build it with
    :func:`channel_view`, then call this as messages arrive."""
    wanted = [m for m in message_ids if view.get(m) is None]
    if not wanted:
        return 0
    stored = await node.store.get_messages(channel, wanted)
    for mid in wanted:  # in the caller's order; the view sorts anyway
        msg = stored.get(mid)
        if msg is not None:
            view.add(mid, msg.sender_id, msg.lamport, msg.content)
    return sum(1 for m in wanted if view.get(m) is not None)


async def _post_logged(node: Node, channel: str, content: bytes) -> int:
    """Post ``content`` and wait (at most :data:`LOGGED_WAIT_S`) until it is in the log,
    so that the next command's view holds it (a second ``/react`` takes it back)."""
    logged: set[int] = set()
    done = asyncio.Event()
    wanted: list[int] = []

    def on_event(ev: NodeEvent) -> None:
        if isinstance(ev, OwnMessage) and ev.state == "logged" and ev.local_id is not None:
            logged.add(ev.local_id)
            if wanted and ev.local_id == wanted[0]:
                done.set()

    unsubscribe = node.subscribe(on_event)
    try:
        local_id = await node.post_content(channel, content)
        wanted.append(local_id)
        if local_id not in logged:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), LOGGED_WAIT_S)
        return local_id
    finally:
        unsubscribe()


def _two(arg: str, usage: str) -> tuple[str, str]:
    ref, _, rest = arg.strip().partition(" ")
    if not ref or not rest.strip():
        raise ValueError(f"usage: {usage}")
    return ref, rest.strip()


def paste_file_name(now_s: float) -> str:
    """The name a long paste sent as a file gets: ``paste-20261207-0214.txt`` (local time)."""
    return time.strftime("paste-%Y%m%d-%H%M%S.txt", time.localtime(now_s))


async def run_content_command(
    node: Node, name: str, arg: str, channel: str, emit: Callable[[NodeEvent], None]
) -> None:
    """Run one typed-content command in ``channel``; reports with ``emit``.

    Raises:
        ValueError: bad arguments, unknown target, not our message, unreadable file
            (the message says which; nothing was sent).
        KeyError: ``channel`` is not joined.
    """
    if name == "reply":
        ref, text = _two(arg, "/reply ID TEXT")
        target = await resolve_id(node, channel, ref)
        await _post_logged(node, channel, encode_reply(target, text, node.name))
    elif name == "react":
        ref, emoji = _two(arg, "/react ID EMOJI")
        target = await resolve_id(node, channel, ref)
        view = await target_view(node, channel, target, ops_of=(node.sender_id,))
        current = next((i for i in view.items() if i.message_id == target), None)
        mine = current is not None and node.sender_id in current.reactions.get(emoji.strip(), ())
        # the same reaction again takes it back (as the TUI does)
        content = encode_reaction(target, emoji, node.name, remove=mine)
        await _post_logged(node, channel, content)
    elif name in ("edit", "delete"):
        if name == "edit":
            ref, text = _two(arg, "/edit ID TEXT")
        else:
            ref, text = arg.strip(), ""
            if not ref or " " in ref:
                raise ValueError("usage: /delete ID")
        target = await resolve_id(node, channel, ref)
        view = await target_view(node, channel, target)
        if view.sender_of(target) != node.sender_id:
            raise ValueError(f"{target[:8]} is not your message: only its author may {name} it")
        decoded = view.get(target)
        if name == "edit" and decoded is not None and decoded.kind not in ("msg", "me", "reply"):
            raise ValueError(f"{target[:8]} is a {decoded.kind}, not a text message")
        content = (
            encode_edit(target, text, node.name)
            if name == "edit"
            else encode_delete(target, node.name)
        )
        await _post_logged(node, channel, content)
    elif name == "topic":
        if not arg.strip():
            topic = await current_topic(node, channel)
            emit(Info(f"topic: {topic}" if topic else "no topic set", {"topic": topic}))
            return
        text = "" if arg.strip() == "--clear" else arg
        await _post_logged(node, channel, encode_topic(text, node.name))
    elif name in ("send", "paste"):
        if name == "send":
            if not arg.strip():
                raise ValueError("usage: /send PATH")
            file_name, data = await asyncio.to_thread(read_file_to_send, arg.strip())
        else:  # a long paste, sent as a text file instead of a message
            file_name, data = paste_file_name(time.time()), arg.encode()
        parts = split_file(file_name, data, node.name)
        await node.post_contents(channel, parts)  # one durable commit: a restart finishes it
        emit(
            Info(
                f"sending {file_name} ({len(data)} bytes, {len(parts) - 1} segments)",
                {"file": file_name, "size": len(data), "segments": len(parts) - 1},
            )
        )
    elif name == "save":
        ref, _, dest = arg.strip().partition(" ")
        if not ref:
            raise ValueError("usage: /save ID [PATH]")
        target = await resolve_id(node, channel, ref)
        file = await stored_file(node.store, channel, target)
        if file is None:
            raise FileError(f"{target[:12]} is not a received file")
        where = await asyncio.to_thread(
            save_stored, file, node.store.data_dir, Path(dest.strip()) if dest.strip() else None
        )
        emit(Info(f"saved to {where}", {"saved": str(where), "id": target}))
    else:
        raise ValueError(f"unknown content command /{name}")
