"""The handlers of the command table (:mod:`app.commands.table`): one per command,
written once for both front ends against :class:`~app.commands.front.FrontEnd`.

Each takes the front end, the command's name and its argument (as the parser left
it: stripped, non-empty when the table says it needs one) and raises what the node
raises (``ValueError``/``KeyError``: refused; ``NodeClosedError``: shutting down) for
the front end's runner to report. The typed-content and members commands run the
shared code of :mod:`app.commands.content` and :mod:`app.commands.members`.
"""

from __future__ import annotations

import asyncio
from datetime import date
from typing import cast

from app.chat.lines import nick_text
from app.commands.channels import check_new_channel
from app.commands.content import run_content_command
from app.commands.front import TUI, FrontEnd, TuiFrontEnd
from app.commands.members import renames_for, run_members_command
from app.commands.standing import read_only_reason
from app.names import channel_arg, check_nick

__all__ = ["consume"]


def consume(fut: asyncio.Future[int]) -> None:
    """Done callback of a post whose failure the node reports itself (an ``error``
    event): retrieve its exception, so asyncio does not log it as never retrieved."""
    if not fut.cancelled():
        fut.exception()


def _need_channel(fe: FrontEnd) -> str | None:
    """The current channel; None (refused, said why) when there is none."""
    channel = fe.current
    if channel is None:
        fe.refuse(fe.no_channel)
    return channel


def _writable(fe: FrontEnd, channel: str | None) -> str | None:
    """``channel`` when lines may be written there; None (refused, with the reason)
    when we were removed from it, or left it (app/commands/standing.py)."""
    if channel is None:
        return None
    why = read_only_reason(fe.node, channel)
    if why is not None:
        fe.refuse(why)
        return None
    return channel


def _tui(fe: FrontEnd) -> TuiFrontEnd:
    """``fe`` for a command the table offers in the TUI only."""
    assert fe.front == TUI
    return cast(TuiFrontEnd, fe)


# ---------------------------------------------------------------- lines


async def say(fe: FrontEnd, name: str, arg: str) -> None:
    """A line typed (``name`` ``say``), or ``/me ACTION``."""
    channel = _writable(fe, _need_channel(fe))
    if channel is not None:
        await fe.say(channel, arg, "me" if name == "me" else "msg")


# ---------------------------------------------------------------- channels


async def join(fe: FrontEnd, name: str, arg: str) -> None:
    channel = channel_arg(arg)
    await check_new_channel(fe.node, channel, fe.joined())  # "a/b": refused if new here
    await fe.join(channel)


async def leave(fe: FrontEnd, name: str, arg: str) -> None:
    target = channel_arg(arg) if arg else fe.current
    if target:
        await fe.leaving(target)
    if not target or not await fe.node.leave(target):
        fe.refuse(f"not in {fe.channel_ref(target)}")
        return
    await fe.left(target)


async def switch(fe: FrontEnd, name: str, arg: str) -> None:
    target = channel_arg(arg)
    if target not in fe.joined():
        fe.refuse(f"not in {fe.channel_ref(target)} (/join it first)")
        return
    await fe.switch(target)


async def forget(fe: FrontEnd, name: str, arg: str) -> None:
    channel = channel_arg(arg)
    await fe.node.forget(channel)  # it says so itself (an Info event)
    fe.forgot(channel)


async def nick(fe: FrontEnd, name: str, arg: str) -> None:
    """``/nick NAME``: in a members channel a ``rename`` event we sign (refused, and
    nothing changed anywhere, when NAME looks like another member's name); elsewhere
    the name our lines claim, announced as a "nick" line."""
    node = fe.node
    new, old = check_nick(arg), node.name
    renames = renames_for(node, new)  # raises before anything changed
    if new != old:
        await node.set_name(new)
        # announced in every other channel joined, as a line (a "nick" message)
        for joined in list(node.channels):
            if node.members_channel(joined) is None:
                node.post(joined, nick_text(old, new), "nick").add_done_callback(consume)
    for channel, content in renames:
        await node.post_content(channel, content)
    fe.named(old, new)


# ---------------------------------------------------------------- what the node knows


async def who(fe: FrontEnd, name: str, arg: str) -> None:
    fe.show_peers(fe.current)


async def stats(fe: FrontEnd, name: str, arg: str) -> None:
    fe.show_stats(fe.node.stats())


async def retry(fe: FrontEnd, name: str, arg: str) -> None:
    fe.retried(await fe.node.retry())


async def help_(fe: FrontEnd, name: str, arg: str) -> None:
    fe.show_help()


async def quit_(fe: FrontEnd, name: str, arg: str) -> None:
    await fe.quit()


# ---------------------------------------------------------------- typed content


async def about_message(fe: FrontEnd, name: str, arg: str) -> None:
    """``/reply``, ``/react``, ``/edit``, ``/delete``."""
    channel = _writable(fe, _need_channel(fe))
    if channel is not None:
        await fe.about_message(name, channel, arg)


async def topic(fe: FrontEnd, name: str, arg: str) -> None:
    channel = _need_channel(fe)
    if arg:  # setting it writes; showing it does not
        channel = _writable(fe, channel)
    if channel is not None:
        await fe.topic(channel, arg)


async def send(fe: FrontEnd, name: str, arg: str) -> None:
    """``/send PATH``: a manifest and 48 KiB segments (app/chat/files.py)."""
    channel = _writable(fe, _need_channel(fe))
    if channel is not None:
        await run_content_command(fe.node, "send", arg, channel, fe.report)


async def paste(fe: FrontEnd, name: str, arg: str) -> None:
    """A long paste sent as a text file (the TUI's paste dialog, Ctrl+F): ``arg`` is the
    text itself."""
    channel = _writable(fe, _need_channel(fe))
    if channel is not None:
        await run_content_command(fe.node, "paste", arg, channel, fe.report)


async def save(fe: FrontEnd, name: str, arg: str) -> None:
    channel = _need_channel(fe)
    if channel is None:
        return
    ref = fe.file_to_save(arg)
    if ref is not None:
        await run_content_command(fe.node, "save", ref, channel, fe.report)


# ---------------------------------------------------------------- members channels


async def members(fe: FrontEnd, name: str, arg: str) -> None:
    """``/create``, ``/invite``, ``/approve``, ``/deny``, ``/members``, ``/remove``,
    ``/verify``, ``/msg``, ``/query`` (app/commands/members.py)."""
    current = fe.current
    new = await run_members_command(fe.node, name, arg, current, fe.report, fe.relays)
    if new is not None and new != current:
        await fe.entered(new)


async def link(fe: FrontEnd, name: str, arg: str) -> None:
    """``/link``: a code for a new device of yours (app/commands/link.py)."""
    from app.commands.link import link as run_link

    await run_link(fe, name, arg)


async def unlink(fe: FrontEnd, name: str, arg: str) -> None:
    """``/unlink DEVICE``: revoke another device of yours (app/commands/unlink.py)."""
    from app.commands.unlink import unlink as run_unlink

    await run_unlink(fe, name, arg)


# ---------------------------------------------------------------- the TUI's own


async def copy(fe: FrontEnd, name: str, arg: str) -> None:
    _tui(fe).copy_selected()


async def info(fe: FrontEnd, name: str, arg: str) -> None:
    await _tui(fe).show_info()


async def names(fe: FrontEnd, name: str, arg: str) -> None:
    _tui(fe).show_names()


async def mentions(fe: FrontEnd, name: str, arg: str) -> None:
    await _tui(fe).show_mentions()


async def highlight(fe: FrontEnd, name: str, arg: str) -> None:
    _tui(fe).highlight(arg.strip())


async def read(fe: FrontEnd, name: str, arg: str) -> None:
    _tui(fe).mark_all_read()


async def away(fe: FrontEnd, name: str, arg: str) -> None:
    await _tui(fe).away(arg)


async def mute(fe: FrontEnd, name: str, arg: str) -> None:
    """``/mute [mentions]`` (none by default), ``/unmute``."""
    _tui(fe).set_level(fe.current, "all" if name == "unmute" else (arg or "none"))


async def notify(fe: FrontEnd, name: str, arg: str) -> None:
    if arg.lower() not in ("", "on", "off"):
        fe.refuse("usage: /notify [on|off]")
        return
    _tui(fe).desktop_notifications(arg.lower() == "on" if arg else None)


async def search(fe: FrontEnd, name: str, arg: str) -> None:
    flag, _, rest = arg.partition(" ")
    if flag in ("-a", "--all"):
        _tui(fe).search(rest.strip(), everywhere=True)
    else:
        _tui(fe).search(arg, everywhere=False)


async def goto(fe: FrontEnd, name: str, arg: str) -> None:
    """``/goto YYYY-MM-DD``."""
    channel = _need_channel(fe)
    if channel is None:
        return
    try:
        day = date.fromisoformat(arg.strip())
    except ValueError:
        fe.refuse(f"/goto: {arg.strip()!r} is not a date (YYYY-MM-DD, e.g. 2026-11-20)")
        return
    await _tui(fe).goto(channel, day)


async def passphrase(fe: FrontEnd, name: str, arg: str) -> None:
    _tui(fe).ask_passphrase(arg)


async def theme(fe: FrontEnd, name: str, arg: str) -> None:
    _tui(fe).toggle_theme()
