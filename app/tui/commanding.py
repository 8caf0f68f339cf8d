"""The TUI's side of the command table: typed lines, carried out one after the other.

A line typed (Enter) is parsed for the TUI (:func:`app.commands.table.parse`) and
queued; :class:`TuiCommands` carries the lines out in the order they were typed, each
through the table's handler (:func:`app.commands.table.run_command`), and is the
TUI's :class:`~app.commands.front.TuiFrontEnd`: its answers are notices and dialogs,
a command about a message is about the selected one (Ctrl+Up/Down; by default the
last), and a refused line goes back into the input with the reason under it, so
nothing typed is lost.

Lines typed while sdschat starts wait until the channels are joined (``/quit``,
``/help``, ``/theme`` and ``/passphrase`` run at once). It is created by the app and
asks its :class:`CommandHost` (the app) for the screens, the node and the other
parts; it never imports the app.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection, Sequence
from datetime import date, datetime, tzinfo
from pathlib import Path
from types import EllipsisType
from typing import Any, Protocol

from rich.text import Text

from app.chat.lines import encode_content, typed_text, visible
from app.commands.front import TUI, Front
from app.commands.handlers import consume
from app.commands.table import Command, parse, run_command, spec_of
from app.launch.joined import load_joined
from app.members import secrets_file as members_file
from app.node.events import Info, LinkEvent, MembersEvent, NodeError, NodeEvent
from app.node.runtime import Node, NodeClosedError
from app.tui.find import search_mentions
from app.tui.finding import Finder
from app.tui.host import AppHost
from app.tui.model import NOTIFY_LEVELS, ChatModel, Row
from app.tui.online import Online
from app.tui.paging import Pager
from app.tui.readers import who_has
from app.tui.saved import SavedState
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dialogs import AsFile, MultiLineScreen, PassphraseScreen, TextScreen
from app.tui.screens.link import LinkScreen
from app.tui.screens.verify import VerifyScreen
from app.tui.standing import counted
from app.tui.texts import (
    Holders,
    PeerLine,
    info_text,
    mentions_text,
    names_text,
    stats_text,
    who_text,
)
from app.tui.typing import TypingThrottle
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_log import MessageLog

__all__ = ["CommandHost", "TuiCommands"]

NO_CHANNEL = "no channel: /join one first"


def _reason(exc: Exception) -> str:
    """What a refusal says: the exception's message (a KeyError's without the quotes
    of its repr; a ValueError's whole, closing quote included)."""
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    return str(exc)


class CommandHost(AppHost, Protocol):
    """What the commands ask of the app (its screens, the node, the channel shown)."""

    node: Node | None
    passphrase: bytes | str | None
    """The passphrase of the next /join (``/passphrase`` sets it)."""
    fatal: tuple[str, int] | None

    @property
    def ready(self) -> asyncio.Event: ...

    @property
    def known_channels(self) -> set[str]: ...

    def save_state(self) -> None: ...

    def switch_to(self, channel: str) -> None: ...

    async def join_channel(self, channel: str, *, fatal: bool, ask_again: bool = False,
                           passphrase: bytes | str | EllipsisType | None = ...,
                           ) -> bool | None: ...  # fmt: skip

    async def action_quit(self) -> None: ...

    def action_help(self) -> None: ...

    def action_toggle_theme(self) -> None: ...

    def copy_text(self, text: str) -> list[str]: ...


class TuiCommands:
    """Typed lines and their commands (see the module docstring)."""

    def __init__(
        self,
        host: CommandHost,
        *,
        pager: Pager,
        finder: Finder,
        online: Online,
        saved: SavedState,
        throttle: TypingThrottle,
        clock: Any,
        tz: tzinfo | None,
        data_dir: Path,
        remember: bool,
        relays: Sequence[str],
        refresh_panels: Callable[[], None],
        flush_events: Callable[[], None],
    ) -> None:
        self.host = host
        self._link_screen: LinkScreen | None = None  # the /link dialog, while one runs
        self._refresh_panels = refresh_panels
        """Redraw the channel list, status and channel bars (after a command changed them)."""
        self._flush_events = flush_events
        """Fold the node events received so far into the model now (before a switch)."""
        self.pager = pager
        self.finder = finder
        self.online = online
        self.saved = saved
        self._throttle = throttle
        self._clock = clock
        self._tz = tz
        self._data_dir = data_dir
        self._remember = remember
        self._relays = tuple(relays)
        self._queue: asyncio.Queue[tuple[Command, str | None]] = asyncio.Queue()
        self._line: str | None = None
        """The typed line being carried out (put back in the input if refused)."""
        self.pending = 0
        """Typed lines not yet carried out (tests wait for 0)."""

    @property
    def model(self) -> ChatModel:
        return self.host.model

    @property
    def chat(self) -> ChatScreen:
        return self.host.chat

    def _log(self) -> MessageLog:
        return self.chat.query_one(MessageLog)

    # ------------------------------------------------------------------ the queue

    def typed(self, line: str) -> None:
        """Enter in the input line: parse it, and carry it out after those before it."""
        cmd = parse(line)
        if cmd is not None:
            self._put(cmd, line)

    def _put(self, cmd: Command, line: str | None) -> None:
        self.pending += 1
        self._queue.put_nowait((cmd, line))

    def pasted(self, text: str) -> None:
        """A paste of several lines: shown in a dialog to edit and send as one message."""
        node, channel = self.host.node, self.model.current
        if node is None or channel is None:
            self.host.notify(NO_CHANNEL, severity="error")
            return
        kind = "msg"
        if text.startswith("/me "):  # typed '/me ', then pasted the action's lines
            text, kind = text[4:], "me"
        elif text.startswith("//"):
            text = text[1:]

        def check(body: str) -> str | None:
            size = len(encode_content(body, node.name, kind))
            limit = node.options.config.max_content_bytes
            if size > limit:
                return f"too long to send: {size:,} bytes encoded, the limit is {limit:,}"
            return None

        def done(body: str | AsFile | None) -> None:
            if body is None:
                return
            self.chat.query_one(ChatInput).value = ""
            if isinstance(body, AsFile):  # Ctrl+F: a text file (app/chat/files.py)
                self._put(Command("paste", body.text), None)
                return
            self._put(Command(kind if kind == "me" else "say", body), None)

        self.host.push_screen(MultiLineScreen(channel, text, check), done)

    async def loop(self) -> None:
        """Carry out typed lines one after the other, in the order they were typed."""
        while True:  # ends when the app's workers are cancelled at exit
            cmd, line = await self._queue.get()
            self._line = line
            try:
                await self.run(cmd)
            except Exception as exc:  # a bug in one command must not stop the others
                self.refuse(f"{type(exc).__name__}: {exc}")
            finally:
                self._line = None
                self.pending -= 1

    async def run(self, cmd: Command) -> None:
        """Carry out one parsed input line (once the channels are joined, unless the
        table says it runs at once)."""
        spec = spec_of(cmd.name)
        host = self.host
        if spec is None or spec.at_start:  # an "error" line is refused at once
            await run_command(self, cmd)
            return
        if not host.ready.is_set():
            if host.fatal is not None:
                return
            await host.ready.wait()  # typed during startup: carried out once joined
        if host.node is None:
            return
        try:
            await run_command(self, cmd)
        except NodeClosedError:
            return
        except (KeyError, ValueError) as exc:
            self.refuse(_reason(exc))

    def refuse(self, reason: str, **notify: Any) -> None:
        """A typed line cannot be carried out: say why, and put the line back in the
        input (unless something new was typed, or another line submitted, meanwhile)
        with the reason under it, so nothing typed is lost and it can be fixed and
        sent again."""
        self.host.notify(reason, severity="error", **notify)
        line = self._line
        if line is None or not self.host.chat_ready() or self.pending > 1:
            return  # a line submitted after this one owns the input now
        box = self.chat.query_one(ChatInput)
        if not box.value:
            box.value = line
            box.cursor_position = len(line)
            box.refused(reason)

    async def retry_failed(self) -> None:
        """Ctrl+R: send again the messages that failed."""
        node = self.host.node
        if node is None:
            return
        try:
            n = await node.retry()
        except NodeClosedError:
            return
        self.retried(n)

    # ------------------------------------------------------------------ FrontEnd

    @property
    def front(self) -> Front:
        return TUI

    @property
    def node(self) -> Node:
        node = self.host.node
        assert node is not None  # run() carries out a command only once the node is open
        return node

    @property
    def current(self) -> str | None:
        return self.model.current

    @property
    def shortcodes(self) -> bool:
        return True

    @property
    def no_channel(self) -> str:
        return NO_CHANNEL

    @property
    def relays(self) -> Sequence[str]:
        return self._relays

    def joined(self) -> Collection[str]:
        return self.model.channels

    def channel_ref(self, channel: str | None) -> str:
        return f"#{channel or ''}"

    def report(self, event: NodeEvent) -> None:
        """A members or file command's answer: a dialog for ``/members``, else a notice."""
        host = self.host
        if isinstance(event, MembersEvent) and event.what == "members":
            host.push_screen(TextScreen(f"Members of #{event.channel}", event.text,
                                        id="members"))  # fmt: skip
        elif isinstance(event, MembersEvent) and event.what == "verify":
            self._verify(event)
        elif isinstance(event, MembersEvent):
            host.notify(event.text, timeout=8)
        elif isinstance(event, NodeError):
            self.refuse(event.message)
        elif isinstance(event, Info):
            host.notify(event.text, timeout=8)
        elif isinstance(event, LinkEvent):
            self._link(event)

    def _link(self, event: LinkEvent) -> None:
        """``/link``: the dialog with the code and its QR code, updated as the link goes."""
        host = self.host
        if event.state == "offered":
            self._link_screen = LinkScreen(event.code, host.copy_text)
            host.push_screen(self._link_screen)
            return
        screen = self._link_screen
        if screen is not None and screen.is_attached:
            screen.progress(event.text)
        if event.state == "linked" and event.recovery_words:
            host.push_screen(TextScreen("Linked: your recovery words", event.text,
                                        id="recovery"))  # fmt: skip
        elif event.state != "sas":
            host.notify(event.text, timeout=15,
                        severity="error" if event.state == "failed" else "information")

    def _verify(self, event: MembersEvent) -> None:
        """``/verify NAME``: the dialog (app/tui/screens/verify.py); "they match" marks
        the member verified, as ``/verify NAME yes`` does."""
        data = event.data
        member, name = str(data.get("member", "")), str(data.get("name", ""))
        emoji = str(data.get("emoji", "")).split()
        names = data.get("emoji_names")
        pairs = list(zip(emoji, names if isinstance(names, list) else [""] * len(emoji),
                         strict=False))  # fmt: skip
        who = str(data.get("label") or name)
        host = self.host

        def decided(match: bool | None) -> None:
            if match:
                self.node.verified.mark(member, name)
                host.notify(f"{who} is verified (✓ in /members)", timeout=8)
            else:
                host.notify(f"{who} not verified: nothing was marked", timeout=4)

        screen = VerifyScreen(who, str(data.get("number", "")), pairs,
                              lambda text: " and ".join(host.copy_text(text)))
        host.push_screen(screen, decided)

    async def say(self, channel: str, text: str, kind: str) -> None:
        self.node.post(channel, text, kind).add_done_callback(consume)
        self._throttle.reset(channel)
        self._log().follow = True

    async def join(self, channel: str) -> None:
        host, node = self.host, self.node
        if channel in self.model.channels:
            host.leave_current()
            host.switch_to(channel)
            return
        known = await node.store.get_channel(channel)
        joined = await self._join_asking(channel)
        if joined:
            if known is None or known.left_at is not None:  # joined, not resumed
                line = f"{node.name} joined #{channel}"
                node.post(channel, line, "join").add_done_callback(consume)
            self._flush_events()
            await self.pager.load_tail(channel)
            host.leave_current()
            host.switch_to(channel)

    def _needs_passphrase(self, channel: str) -> bool:
        """Whether ``/join channel`` asks for a passphrase: no passphrase was set
        (``/passphrase``, or the one sdschat started with) and its key is not kept here
        (a members channel's keys, a channel remembered in channels.json)."""
        if self.host.passphrase is not None:
            return False
        if members_file.members_file(self._data_dir, channel).exists():
            return False
        return not any(k.channel == channel for k in load_joined(self._data_dir))

    async def _ask(self, screen: PassphraseScreen) -> str | None:
        """What the dialog ``screen`` was dismissed with (None: cancelled)."""
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

        def done(value: str | None) -> None:
            if not answer.done():
                answer.set_result(value)

        self.host.push_screen(screen, done)
        return await answer

    async def _join_asking(self, channel: str) -> bool:
        """``/join``: the channel's passphrase asked in the dialog when none is set (empty:
        PUBLIC, as the dialog says; Esc: nothing joined), again after a wrong one."""
        if not self._needs_passphrase(channel):
            return bool(await self.host.join_channel(channel, fatal=False))
        error = ""
        for _ in range(100):  # bounded: each round is a person's answer
            entered = await self._ask(PassphraseScreen(channel, error=error, purpose=(
                f"Everyone in #{channel} types the same passphrase. Leave it empty for a "
                "PUBLIC channel: anyone who knows its name can read it.")))  # fmt: skip
            if entered is None:
                self.host.notify(f"#{channel} not joined", timeout=3)
                return False
            result = await self.host.join_channel(channel, fatal=False, ask_again=True,
                                                  passphrase=entered or None)  # fmt: skip
            if result is not None:
                return result
            error = f"Wrong passphrase: this data directory joined #{channel} with another one."
        return False

    async def leaving(self, channel: str) -> None:
        node = self.node
        if channel in node.channels:  # said before leaving: the line still goes out
            await node.send(channel, f"{node.name} left #{channel}", "leave")

    async def left(self, channel: str) -> None:
        host = self.host  # not rejoined at the next start: the JoinedKeeper forgot it
        self._flush_events()
        self.model.remove_channel(channel)
        if self.model.current is not None:
            host.switch_to(self.model.current)
        else:
            self._log().show(None)
            self._refresh_panels()
        host.notify(f"left #{channel} (its history stays on disk)")

    async def switch(self, channel: str) -> None:
        self.host.leave_current()
        self.host.switch_to(channel)

    async def entered(self, channel: str) -> None:
        info = self.node.channels.get(channel)
        if info is not None:
            self._flush_events()  # its "joined" event: the view exists before it is read
            self.model.add_channel(channel, info.public)
            await self.pager.load_tail(channel)  # its history ("/query bob" after a restart)
            self.host.leave_current()
            self.host.switch_to(channel)

    def named(self, old: str, new: str) -> None:
        if new == old:
            self.host.notify(f"you are already {new}")
            return
        self.model.name = new
        self.host.notify(f"you are now {new}")
        self._refresh_panels()

    def forgot(self, channel: str) -> None:
        """Nothing of ``channel`` kept here either: where you left off, what you typed
        there, its name among the channels /join completes."""
        self.saved.forget(channel)
        self.host.known_channels.discard(channel)
        self.host.save_state()

    def _peer_lines(self, channel: str | None) -> list[PeerLine]:
        """The peers heard from in ``channel`` as ``/who`` and ``/names`` show them."""
        m, online = self.model, self.online
        roster = m.roster_of(channel) if channel is not None else None  # members: its names
        named = (lambda p: roster.name_of(p.sender_id)) if roster is not None else (
            lambda p: p.name)  # fmt: skip
        return [
            PeerLine(p.sender_id, str(named(p) or m.names.get(p.sender_id) or p.sender_id[:8]),
                     m.label(p.sender_id, p.name, channel),
                     online.is_online(p.last_seen_ms, p.sender_id),
                     online.away_text(p.sender_id), p.last_seen_ms, p.messages)
            for p in counted(self.node, channel, self.node.peers(channel))  # members only
        ]  # fmt: skip

    def show_peers(self, channel: str | None) -> None:
        # a dialog only: the peer list (F2) stays as it was
        node = self.node
        text = who_text(node.name, node.sender_id, self._peer_lines(channel),
                        int(self._clock() * 1000))  # fmt: skip
        self.host.push_screen(TextScreen(f"Who is in #{channel}", text))

    def show_stats(self, stats: dict[str, Any]) -> None:
        self.host.push_screen(TextScreen("Stats", stats_text(stats), id="stats"))

    def retried(self, n: int) -> None:
        for view in self.model.channels.values() if n else ():
            for row in view.rows:
                if row.own_state == "failed" and not row.retried:
                    row.retried = True
                    row.touch()
        self._log().sync()
        self.host.notify(
            f"sending {n} failed message{'s' if n != 1 else ''} again"
            if n
            else "no failed messages to retry"
        )

    def show_help(self) -> None:
        self.host.action_help()

    async def quit(self) -> None:
        await self.host.action_quit()

    async def about_message(self, name: str, channel: str, arg: str) -> None:
        """/reply, /react, /edit, /delete: a typed message about the selected message
        (Ctrl+Up/Down; by default the last one, for /edit your last one; /delete only
        the selected one)."""
        log = self._log()
        row = log.selected_row()
        view = self.model.channels.get(channel)
        if name == "delete" and log.selected is None:
            # never a guess: a deletion cannot be taken back
            self.refuse("/delete: select the message first (Ctrl+Up, or a click), then /delete")
            return
        if name == "edit" and log.selected is None and view is not None:
            row = next((r for r in reversed(view.rows) if r.own and not r.hidden), None)
        if row is None:
            self.refuse(f"/{name}: no message to {name} (select one with Ctrl+Up)")
            return
        if row.message_id is None:
            self.refuse(f"/{name}: that message is not sent yet; try again in a moment")
            return
        if name in ("edit", "delete") and not row.own:
            self.refuse(f"/{name}: you can only {name} your own messages")
            return
        if row.deleted:
            self.refuse(f"/{name}: that message was deleted")
            return
        node = self.node
        kind = name
        if name == "react" and node.sender_id in row.reactions.get(arg, []):
            kind = "unreact"  # the same reaction again takes it back
        fut = node.post(channel, typed_text(row.message_id, arg), kind)
        fut.add_done_callback(consume)
        log.select(None)  # done with it: the next /edit is about your last line again
        if name == "reply":
            log.follow = True

    async def topic(self, channel: str, arg: str) -> None:
        here = self.model.channels.get(channel)
        if here is None:
            self.refuse(NO_CHANNEL)
            return
        if not arg:
            self.host.notify(
                f"topic of #{channel}: {visible(here.topic)} (set by {here.topic_by})"
                if here.topic
                else f"#{channel} has no topic yet (/topic TEXT sets one)",
                timeout=6,
            )
            return
        self.node.post(channel, arg, "topic").add_done_callback(consume)

    def file_to_save(self, arg: str) -> str | None:
        """``/save [PATH]``: the selected file line, or the newest one."""
        log = self._log()
        row = log.selected_row()
        if row is None or row.kind != "file":
            view = log.view
            rows = view.rows if view is not None else []
            row = next((r for r in reversed(rows) if r.kind == "file"), None)
        if row is None or row.message_id is None:
            self.refuse("no file here to save: select a file line (Ctrl+Up) first")
            return None
        return f"{row.message_id} {arg}".strip()

    # ------------------------------------------------------------------ TuiFrontEnd

    def copy_selected(self) -> None:
        row = self._log().selected_row()
        if row is None or row.deleted:
            self.refuse("/copy: no message to copy (select one with Ctrl+Up)")
            return
        where = self.host.copy_text(row.text)
        self.host.notify(f"copied {len(row.text)} characters to {' and '.join(where)}",
                         timeout=2)

    async def show_info(self) -> None:
        row = self._log().selected_row()
        if row is None:
            self.host.notify("no message to show", severity="warning")
            return
        body = await self._info_text(self.model.current or "", row)
        self.host.push_screen(TextScreen("Message", body, id="info"))

    async def _info_text(self, channel: str, row: Row) -> Text:
        """``/info`` of ``row``: its stored copy, the dependencies held, who has it."""
        node = self.node
        stored = None
        have: set[str] = set()
        holders = None
        if row.message_id:
            with contextlib.suppress(Exception):
                stored = (await node.store.get_messages(channel, [row.message_id])).get(
                    row.message_id
                )
            if stored is not None and stored.causal_history:
                with contextlib.suppress(Exception):
                    have = await node.store.has_ids(channel, stored.causal_history)
            if not row.deleted:
                holders = await self._holders(channel, row)
        return info_text(row, tz=self._tz, me=node.sender_id,
                         label=lambda sid: self.model.label(sid, None, channel), stored=stored,
                         have=have, holders=holders)  # fmt: skip

    async def _holders(self, channel: str, row: Row) -> Holders:
        """``/info``'s "who has it": the members heard from, and which of them showed
        (causal histories of the messages after it, bloom filters) they have it."""
        node = self.node
        assert row.message_id is not None
        me = node.sender_id
        members = [p.sender_id for p in counted(node, channel, node.peers(channel))
                   if p.sender_id != me]  # a removed member is not counted any more
        if row.sender_id and row.sender_id != me and row.sender_id not in members:
            members.append(row.sender_id)
        try:
            found = await who_has(
                node.store, channel, row.message_id, row.key[0],
                members=[m for m in members if m != row.sender_id],
                filters=row.filter_hits,
            )  # fmt: skip
        except Exception as e:  # a read error must not lose the rest of /info
            return Holders(members, None, str(e))
        return Holders(members, found)

    def show_names(self) -> None:
        channel = self.model.current
        text = names_text(self.node.name, self._peer_lines(channel))
        self.host.push_screen(TextScreen(f"Names in #{channel}", text))

    async def show_mentions(self, limit: int = 50) -> None:
        """``/mentions``: the newest lines for you (@name, a highlight word, a reply to
        one of yours) in every joined channel, from the stored logs."""
        node = self.node
        words = [f"@{node.name}", *self.model.highlights]
        found = await search_mentions(node.store, list(self.model.order), words,
                                      me=node.sender_id, mentions=self.model.mentions,
                                      limit=limit)  # fmt: skip
        text = mentions_text(found, node.name, self._tz)
        self.host.push_screen(TextScreen("Mentions of you", text, id="mentions"))

    def highlight(self, word: str) -> None:
        words = set(self.model.highlights)
        if word:
            words.symmetric_difference_update({word})
            self.model.set_highlights(words)
            self.host.save_state()
        shown = ", ".join(self.model.highlights) or "none (only @" + self.node.name + ")"
        self.host.notify(f"highlight words: {shown}", timeout=5)

    def mark_all_read(self) -> None:
        for view in self.model.channels.values():
            view.unread, view.mentioned, view.new_after = 0, False, None
            self.model.mark_read(view.name)
        self.host.save_state()
        self._refresh_panels()
        self._log().sync(force=True)
        self.host.notify("every channel marked read", timeout=2)

    async def away(self, text: str) -> None:
        self.online.away = text or None
        await self.online.say("away" if text else "back", text)
        self.host.notify(f"away: {text}" if text else "back (not away)", timeout=3)

    def set_level(self, channel: str | None, level: str) -> None:
        """/mute [mentions], /unmute: this channel's notification level, kept in tui.json."""
        if channel is None:
            self.refuse(NO_CHANNEL)
            return
        level = level.strip().lower()
        if level not in NOTIFY_LEVELS:
            self.refuse("usage: /mute [mentions] (none by default), /unmute")
            return
        if level == "all":
            self.model.levels.pop(channel, None)
        else:
            self.model.levels[channel] = level
        view = self.model.channels.get(channel)
        if view is not None and level == "none":
            view.unread, view.mentioned = 0, False
        self.host.save_state()
        self._refresh_panels()
        self.host.notify(f"#{channel}: {NOTIFY_LEVELS[level]}", timeout=4)

    def desktop_notifications(self, on: bool | None) -> None:
        if on is not None:
            self.saved.desktop_notify = on
            self.host.save_state()
        self.host.notify(
            f"desktop notifications {'on' if self.saved.desktop_notify else 'off'} (mentions "
            "and replies to you in channels not in view)",
            timeout=4,
        )

    def search(self, text: str, *, everywhere: bool) -> None:
        if everywhere:
            self.finder.search_all(text)
        else:
            self.finder.open(text)

    async def goto(self, channel: str, day: date) -> None:
        """/goto YYYY-MM-DD: the first message sent that day or later (author's clock,
        this screen's time zone), selected in the middle of its context."""
        start = datetime(day.year, day.month, day.day, tzinfo=self._tz)
        if self._tz is None:
            start = start.astimezone()  # this machine's zone
        entry = await self.pager.first_of_day(channel, int(start.timestamp() * 1000))
        if entry is None:
            self.refuse(f"/goto: no message in #{channel} on {day.isoformat()} or later")
            return
        await self.pager.jump_to(channel, entry)

    def ask_passphrase(self, channel: str) -> None:
        self.host.push_screen(
            PassphraseScreen(
                channel or "",
                purpose="Used by the next /join. Leave empty for PUBLIC channels "
                "(anyone who knows the name can read them).",
            ),
            self._passphrase_set,
        )

    def _passphrase_set(self, value: str | None) -> None:
        if value is None:
            return
        self.host.passphrase = value or None
        self.host.notify(
            "passphrase set for the next /join"
            if value
            else "no passphrase: the next /join makes a PUBLIC channel"
        )

    def toggle_theme(self) -> None:
        self.host.action_toggle_theme()
