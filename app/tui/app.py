"""The sdschat Textual app and its :func:`make_app` factory.

:func:`make_app` takes what the app must not decide by itself: the data
directory, the :class:`~app.node.transport.Transport` (a relay, or an in-memory
hub in tests), the channels, the passphrase, node options and a clock. The
app opens the :class:`~app.node.Node` itself (so every startup error is shown
on screen), subscribes to its events and joins the channels.

Node events arrive on the app's loop (the node runs on it) and are folded
into the :class:`~app.tui.model.ChatModel` in batches: at most one redraw
``flush_interval`` seconds after the first of them, and while they keep coming
at most one every ``redraw_interval`` seconds (a full frame of the log costs
tens of milliseconds in Textual), so typing stays responsive while hundreds of
messages a second come in.

Errors are shown, not thrown: a data directory in use, a database from a newer
sdschat (or corrupt), an unusable identity file, or a passphrase that differs
from the one this data directory joined the channel with, each open a
:class:`~app.tui.screens.dialogs.FatalScreen` that explains what to do and
exits with the same status as the headless mode. A relay that cannot be
reached is not fatal: the status bar says so, typed lines are queued durably
and sent on reconnection.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import tzinfo
from pathlib import Path
from types import EllipsisType
from typing import Any, ClassVar

from rich.text import Text
from textual import events, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input

from app.chat.lines import visible
from app.commands.channels import check_new_channel
from app.launch.exits import (
    EXIT_DATABASE,
    EXIT_DEVICE_COPY,
    EXIT_LOCKED,
    EXIT_PASSPHRASE,
    EXIT_USAGE,
)
from app.launch.invite_wait import redeem
from app.launch.joined import JoinedKeeper, load_remembered, rejoinable, remembered_order
from app.members import secrets_file as members_file
from app.members.device_copy import DataDirCopiedError
from app.names import check_new_channel_name
from app.node.events import (
    CatchUp,
    ClockSkew,
    Closed,
    Delivered,
    DeviceCopied,
    DeviceTwins,
    DiskFull,
    Ephemeral,
    Info,
    InviteMade,
    MembersEvent,
    NodeError,
    NodeEvent,
    OwnMessage,
    Rejected,
)
from app.node.runtime import IdentityMismatchError, Node, NodeClosedError, NodeOptions
from app.node.runtime import PassphraseMismatchError as NodePassphraseMismatch
from app.node.transport import Transport
from app.tui.chatlog import logger_for
from app.tui.clipboard import copy_text
from app.tui.collector import Collector
from app.tui.commanding import TuiCommands
from app.tui.config import TuiConfig
from app.tui.finding import Finder
from app.tui.model import Changes, ChatModel
from app.tui.names import roster_of
from app.tui.online import Online
from app.tui.paging import Pager
from app.tui.reasons import explain
from app.tui.render import palette, set_colours
from app.tui.saved import HISTORY_KEPT, INPUT_HISTORY_FILE, TUI_STATE_FILE, SavedState
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dialogs import FatalScreen, HelpScreen, PassphraseScreen
from app.tui.screens.invite import InviteScreen
from app.tui.standing import banner_text, counted, members_notices
from app.tui.texts import ago
from app.tui.typing import SHOW_FOR, TypingThrottle, decode_typing, encode_typing, typing_text
from app.tui.unopened import UnopenedWarnings
from app.tui.widgets.banner import Banner
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.find_bar import FindBar, FindInput
from app.tui.widgets.message_log import MessageLog
from app.tui.widgets.panels import (
    ChannelBar,
    ChannelEntry,
    ChannelList,
    PeerEntry,
    PeerList,
    StatusBar,
    StatusInfo,
    TypingLine,
)
from net.channel_key import ChannelKey
from net.identity import IdentityFileError
from net.urls import display_address
from storage import DataDirLockedError, DataDirUnusableError, NewerSchemaError, StorageError

__all__ = ["HISTORY_KEPT", "INPUT_HISTORY_FILE", "TUI_STATE_FILE", "SdsChatApp", "TuiOptions",
           "make_app"]  # fmt: skip

NARROW = 70
"""Below this many columns the channel list is hidden (Ctrl+N/P and Alt+N still switch)."""

MAX_ROUND = 16
"""At most this many inputs per node round in the app. A round opens and feeds
its envelopes without yielding (~1 ms each, more on a busy machine); the node's
default (256, for throughput) would hold keys and frames for a burst's whole
length. Each round is still one storage commit, in SQLite's thread."""


@dataclass
class TuiOptions:
    """Everything :class:`SdsChatApp` gets from outside (see :func:`make_app`)."""

    data_dir: Path
    transport: Transport
    channels: tuple[str, ...] = ("general",)
    name: str | None = None
    passphrase: bytes | str | None = None
    ask_passphrase: bool = False
    node_options: NodeOptions | None = None
    transport_label: str = "memory"
    clock: Callable[[], float] = time.time
    tz: tzinfo | None = None
    theme: str | None = None
    flush_interval: float = 0.03
    redraw_interval: float = 0.1
    tick_interval: float = 0.5
    lan: str = "off"
    """The status bar's LAN part when there is no ``lan_transport``."""
    store_peer: str = "none"
    """The status bar's store part while the node uses no store peer."""
    lan_transport: Any | None = None
    """The LAN gossip transport (``net.lan.transport.LanTransport``), if any:
    the status bar counts its connected peers."""
    typing_ttl: float = SHOW_FOR
    remember_state: bool = True
    relay_url: str | None = None
    """The relay's URL, if any: offline notices say what is wrong with it."""
    extra: dict[str, Any] = field(default_factory=dict)
    config: TuiConfig | None = None
    """The config file's ``[keys]`` and ``[colours]`` (app/tui/config.py), checked."""
    create: bool = False
    """Create the first channel as a members channel (``sdschat join NAME --create``)."""
    invite: str | None = None
    """Join by this invite code first (``sdschat join --invite CODE``)."""
    relays: tuple[str, ...] = ()
    """Relay URLs an ``/invite`` code names (the newcomer uses them)."""
    on_ready: Callable[[], None] | None = None
    """Called once the channels are joined (``sdschat join`` keeps its setup then)."""


def make_app(
    data_dir: str | Path,
    transport: Transport,
    *,
    channels: Sequence[str] = ("general",),
    name: str | None = None,
    passphrase: bytes | str | None = None,
    ask_passphrase: bool = False,
    options: NodeOptions | None = None,
    transport_label: str = "memory",
    clock: Callable[[], float] = time.time,
    tz: tzinfo | None = None,
    theme: str | None = None,
    flush_interval: float = 0.03,
    redraw_interval: float = 0.1,
    tick_interval: float = 0.5,
    remember_state: bool = True,
    lan_transport: Any | None = None,
    relay_url: str | None = None,
    tui_config: TuiConfig | None = None,
    create: bool = False,
    invite: str | None = None,
    relays: Sequence[str] = (),
    on_ready: Callable[[], None] | None = None,
) -> SdsChatApp:
    """Build the app.

    Args:
        data_dir: the participant's data directory (identity, SQLite).
        transport: how envelopes travel (``RelayTransport``, or a
            ``MemoryHub().transport()`` in tests).
        channels: channels to join; the first is shown.
        name: display name (default: the stored one).
        passphrase: the channels' passphrase (``None``: public channels).
        ask_passphrase: ask for it in the app first (interactive start).
        options: node options (protocol timings, KDF, clock for the node).
        transport_label: how the status bar names the transport.
        clock: wall-clock seconds for the times shown and typing expiry
            (fix it for deterministic screenshots).
        tz: time zone of the times shown (default: local).
        theme: ``"dark"`` or ``"light"`` (default: the last one used, else dark).
        flush_interval: seconds between a node event and its redraw (batching).
        redraw_interval: least seconds between two redraws caused by node events.
        tick_interval: seconds between refreshes of time-based things (typing,
            last seen, sync state).
        remember_state: keep where you left off and the theme in ``tui.json``.
        lan_transport: the LAN gossip transport inside ``transport``, if any
            (the status bar shows its peer count).
        relay_url: the relay's ws:// or wss:// URL, if any (offline notices say
            what is wrong with it: :func:`app.tui.reasons.explain`).
        tui_config: the keymap and colours of the config file
            (:func:`app.tui.config.tui_config`, checked before).
        create: create the first channel as a members channel, with us as admin.
        invite: join by this invite code first (the channel is the code's).
        relays: the relay URLs an ``/invite`` code names.
        on_ready: called once the channels are joined and shown.
    """
    return SdsChatApp(
        TuiOptions(
            data_dir=Path(data_dir),
            transport=transport,
            channels=tuple(channels) or ("general",),
            name=name,
            passphrase=passphrase,
            ask_passphrase=ask_passphrase,
            node_options=options,
            transport_label=transport_label,
            clock=clock,
            tz=tz,
            theme=theme,
            flush_interval=flush_interval,
            redraw_interval=redraw_interval,
            tick_interval=tick_interval,
            remember_state=remember_state,
            lan_transport=lan_transport,
            relay_url=relay_url,
            config=tui_config,
            create=create,
            invite=invite,
            relays=tuple(relays),
            on_ready=on_ready,
        )
    )


class SdsChatApp(App[None]):
    """sdschat in the terminal (build it with :func:`make_app`)."""

    CSS_PATH = "sdschat.tcss"
    TITLE = "sdschat"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "quit", priority=True, show=False),
    ]

    def __init__(self, opts: TuiOptions) -> None:
        super().__init__()
        self.opts = opts
        self.clock = opts.clock
        self.tui_config = opts.config or TuiConfig()
        self.chatlog = logger_for(self.tui_config.log, opts.data_dir, opts.tz)
        """Continuous logging to files (``[log]``, app/tui/chatlog.py), or None."""
        set_colours(self.tui_config.colours)  # the log's colours: the config file's
        if self.tui_config.keymap:
            self.set_keymap(self.tui_config.textual_keymap())
        self.node: Node | None = None
        self.model = ChatModel()
        self.passphrase: bytes | str | None = opts.passphrase
        self.ready = asyncio.Event()
        """Set once the node runs and the channels are joined and loaded."""
        self.fatal: tuple[str, int] | None = None
        """(message, exit status) of the error that stopped the app."""
        self.chat = ChatScreen(self._completion_source, opts.tz)
        self._pending: list[NodeEvent] = []
        self._flush_scheduled = False
        self._last_flush = 0.0
        self._shutting_down = False
        self._throttle = TypingThrottle()
        self.unopened = UnopenedWarnings()
        """Which refused envelopes are worth a notice, and when (app/tui/unopened.py)."""
        self._connection_noted = False
        self.known_channels: set[str] = set()
        self.saved = SavedState(opts.data_dir, remember=opts.remember_state,
                                set_timer=self.set_timer)  # fmt: skip
        """tui.json and the input history (app/tui/saved.py)."""
        self.saved.restore(self.model)
        self.events_seen = 0
        self._catch_up: dict[str, CatchUp] = {}
        """The latest catch-up progress per channel, while one runs."""
        self._store_later: str | None = None
        """A store peer found on the LAN before the node was open."""
        self.online = Online(self.clock, lambda: self.node, self.ready,
                             lambda work: self.run_worker(work, group="presence"))  # fmt: skip
        """Who is online, away or gone; our heartbeat and /away (app/tui/online.py)."""
        self.pager = Pager(node=lambda: self.node, model=self.model, chat=self.chat,
                           chat_ready=self.chat_ready, run_worker=self.run_worker,
                           switch=self.switch_to, last_read=self.saved.last_read)  # fmt: skip
        """The windows' reads from the stored log (app/tui/paging.py)."""
        self.finder = Finder(self, jump_to=self.pager.jump_to, push_search=self.push_screen,
                             cancel_workers=self._cancel_find,
                             tz=opts.tz)  # fmt: skip
        """Ctrl+F and Alt+F (app/tui/finding.py)."""
        self.commands = TuiCommands(
            self, pager=self.pager, finder=self.finder, online=self.online, saved=self.saved,
            throttle=self._throttle, clock=self.clock, tz=opts.tz, data_dir=opts.data_dir,
            remember=opts.remember_state, relays=opts.relays,
            refresh_panels=self._refresh_panels, flush_events=self._flush_events,
        )
        """Typed lines and their commands: the TUI's side of the command table
        (app/tui/commanding.py)."""
        self.collector = Collector()
        """When the cyclic GC may run (see :mod:`app.tui.collector`)."""

    # ------------------------------------------------------------------ startup

    def get_default_screen(self) -> Screen[Any]:
        return self.chat

    def on_mount(self) -> None:
        theme = self.opts.theme or self.saved.theme or "dark"
        self.theme = "textual-light" if theme == "light" else "textual-dark"
        self.set_interval(self.opts.tick_interval, self._tick)
        self._refresh_panels()
        self.run_worker(self.commands.loop(), group="commands")
        self._install_signal_handlers()
        self._boot()

    def _install_signal_handlers(self) -> None:
        """SIGTERM and SIGHUP (``kill``, a closed terminal) quit like Ctrl+Q: the node
        closes, where you left off is saved, the terminal is restored (exit 0)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                # exit() only posts a message (safe from a signal callback, which has no
                # active-app context); on_unmount then closes the node and saves state
                loop.add_signal_handler(sig, self.exit)

    @work(exclusive=True, group="boot")
    async def _boot(self) -> None:
        opts = self.opts
        if opts.ask_passphrase:
            entered = await self.push_screen_wait(
                PassphraseScreen(opts.channels[0], startup=True)
            )
            if entered is None:
                self.exit(return_code=EXIT_PASSPHRASE, message="sdschat: no passphrase entered")
                return
            self.passphrase = entered or None
        try:
            options = opts.node_options or NodeOptions()
            if options.max_round > MAX_ROUND:
                options = replace(options, max_round=MAX_ROUND)
            node = await Node.open(opts.data_dir, opts.transport, name=opts.name, options=options)
        except DataDirLockedError as exc:
            self._fatal_screen(
                "Data directory in use",
                str(exc),
                "Another sdschat is running with this --data-dir. Quit it first, or start "
                "this one with another --data-dir.",
                EXIT_LOCKED,
            )
            return
        except DataDirCopiedError as exc:
            self._fatal_screen(
                "Data directory is a copy",
                str(exc),
                "Nothing was changed. Keep one copy of a data directory per device.",
                EXIT_DEVICE_COPY,
            )
            return
        except NewerSchemaError as exc:
            self._fatal_screen(
                "Database from a newer sdschat",
                str(exc),
                "Upgrade sdschat to open it. Nothing in the file was changed.",
                EXIT_DATABASE,
            )
            return
        except DataDirUnusableError as exc:  # a path that cannot be a data directory
            self._fatal_screen("Data directory unusable", str(exc),
                               "Nothing was changed. Start again with another --data-dir.",
                               EXIT_DATABASE)  # fmt: skip
            return
        except (StorageError, IdentityFileError, IdentityMismatchError) as exc:
            self._fatal_screen(
                "Data directory unusable",
                str(exc),
                "Nothing was changed. Restore the file from a backup, or use another --data-dir.",
                EXIT_DATABASE,
            )
            return
        self.node = node
        self.model.sender_id = node.sender_id
        self.model.name = node.name
        self.model.roster_of = roster_of(node)  # members channels: the roster's names
        self.model.devices = node.devices.book  # a person's devices (app/node/device_glue.py)
        node.subscribe(self._on_node_event)
        if opts.remember_state:  # every channel joined is rejoined at the next start
            node.subscribe(JoinedKeeper(node, opts.data_dir, lambda why: self.notify(
                why, severity="warning")).on_event)  # fmt: skip
        await node.start()
        if self._store_later is not None:
            self.use_lan_store(self._store_later)
        if (opts.create or opts.invite) and not await self._members_first(node):
            return
        remembered = load_remembered(opts.data_dir) if opts.remember_state else []
        keys = {e.name: e.key for e in remembered if e.key is not None}
        for channel in opts.channels:
            # a channel kept from an earlier run: its key (nothing to ask), unless a
            # passphrase was given (then it is checked against the one it joined with)
            key = keys.get(channel) if self.passphrase is None else None
            joined_ok = await self.join_channel(channel, fatal=True, key=key,
                                                ask_again=opts.ask_passphrase)  # fmt: skip
            while joined_ok is None:  # a wrong passphrase typed at the prompt: ask again
                entered = await self.push_screen_wait(
                    PassphraseScreen(
                        channel,
                        startup=True,
                        error="Wrong passphrase: this data directory joined "
                        f"#{channel} with another one. Try again.",
                    )
                )
                if entered is None:
                    self.exit(return_code=EXIT_PASSPHRASE, message="sdschat: no passphrase entered")
                    return
                self.passphrase = entered or None
                joined_ok = await self.join_channel(channel, fatal=True, ask_again=True)
            if not joined_ok:
                return
        joined = list(opts.channels)
        for entry in rejoinable(opts.data_dir, remembered, joined):
            # every channel and direct conversation of the last run, with its key
            if await self.join_channel(entry.name, fatal=False, key=entry.key):
                joined.append(entry.name)
        self.model.order[:] = remembered_order(self.model.order, remembered)
        for channel in joined:
            await self.pager.load_tail(channel)
        await self.pager.count_unread()
        if opts.channels:
            self.switch_to(opts.channels[0])
        # Everything built so far (modules, the node, its protocol state, the
        # first pages) lives as long as the app: keep it out of the cyclic
        # collector, whose full passes over it otherwise stall a keystroke or a
        # frame for 100-300 ms now and then (freed objects are still freed by
        # their reference counts).
        gc.freeze()
        self.ready.set()
        self._refresh_panels()
        if opts.on_ready is not None:
            opts.on_ready()  # the last setup is kept (app/launch/last_setup.py)

    async def _members_first(self, node: Node) -> bool:
        """``--create`` or ``--invite``: make the members channel, or redeem the code,
        before the channels are joined; False (said on screen) when that failed."""
        opts = self.opts
        first = opts.channels[0]
        if node.members_channel(first) is not None or members_file.members_file(
                opts.data_dir, first).exists():  # fmt: skip
            return True  # made or redeemed in an earlier run: joined below, as any channel
        try:
            if opts.create:
                await node.create_channel(check_new_channel_name(first))
            elif opts.invite:  # bounded: "nobody answered" (app/launch/invite_wait.py)
                self.notify(f"asking an admin of #{first} to let you in…", timeout=10)
                await redeem(node, opts.invite, lambda text: self.notify(
                    text, title="still asking", severity="warning", timeout=60))  # fmt: skip
        except (ValueError, KeyError) as exc:
            title, hint = (
                ("Invite not accepted", "Nothing was joined. Ask an admin for a new code.")
                if opts.invite
                else ("Channel not created", "Nothing was made. Pick another name.")
            )
            self._fatal_screen(title, str(exc), hint, EXIT_USAGE)
            return False
        return True

    async def join_channel(
        self, channel: str, *, fatal: bool, key: ChannelKey | None = None, ask_again: bool = False,
        passphrase: bytes | str | EllipsisType | None = ...,
    ) -> bool | None:
        """Join ``channel`` (with ``passphrase``, by default the app's); False if that
        failed (said on screen, or fatal), None for a wrong passphrase when ``ask_again``
        (the caller asks for it again)."""
        node = self.node
        assert node is not None
        try:
            await check_new_channel(node, channel)  # a new channel's name: one word, no '/'
            chosen = self.passphrase if isinstance(passphrase, EllipsisType) else passphrase
            info = await node.join(channel, chosen, key=key)
        except NodePassphraseMismatch as exc:
            if ask_again:
                return None
            if fatal:
                self._fatal_screen(
                    "Wrong passphrase",
                    str(exc),
                    "Start again with the passphrase you used before for this channel.",
                    EXIT_PASSPHRASE,
                )
            else:
                self.commands.refuse(str(exc), title="wrong passphrase", timeout=10)
            return False
        except ValueError as exc:
            if fatal:
                self._fatal_screen("Cannot join", str(exc), "", EXIT_USAGE)
            else:
                self.commands.refuse(str(exc))
            return False
        except StorageError as exc:  # e.g. a damaged page found only now
            self._fatal_screen(
                "Data directory unusable",
                str(exc),
                "Restore the file from a backup, or use another --data-dir.",
                EXIT_DATABASE,
            )
            return False
        self.known_channels.add(channel)
        self.model.add_channel(info.name, info.public)
        return True  # kept for the next start by the JoinedKeeper (app/launch/joined.py)

    def _fatal_screen(self, title: str, message: str, hint: str, code: int) -> None:
        self.fatal = (message, code)
        self._refresh_panels()
        self.push_screen(FatalScreen(title, message, hint, code))
        self.run_worker(self._close_node(), group="close")

    # ------------------------------------------------------------------ shutdown

    async def _close_node(self) -> None:
        node = self.node
        if node is None:
            return
        self._shutting_down = True
        self.save_state()
        with contextlib.suppress(Exception):
            await node.close()

    async def action_quit(self) -> None:
        await self.online.say("offline")  # the others show us offline at once
        await self._close_node()
        self.exit(return_code=self.fatal[1] if self.fatal is not None else 0)

    async def action_interrupt(self) -> None:
        """Ctrl+C quits, as in any terminal program: like Ctrl+Q once the chat runs
        (everything saved, status 0); while starting (the passphrase prompt) with one
        line and status 130, as Ctrl+C before the screen opened."""
        if self.ready.is_set() or self.fatal is not None:
            await self.action_quit()
            return
        await self._close_node()
        self.exit(return_code=130, message="sdschat: interrupted")

    async def on_unmount(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
        await self._close_node()

    def save_state(self) -> None:
        """Keep where you left off, the theme and display choices (app/tui/saved.py)."""
        if self.node is not None:
            self.saved.save(self.model, dark=self.current_theme.dark)

    # ------------------------------------------------------------------ paging

    def on_message_log_need_older(self, message: MessageLog.NeedOlder) -> None:
        self.pager.older(message.channel)

    def on_message_log_need_newer(self, message: MessageLog.NeedNewer) -> None:
        self.pager.newer(message.channel)

    # ------------------------------------------------------------------ node events

    def _on_node_event(self, event: NodeEvent) -> None:
        if self._shutting_down or isinstance(event, Closed):
            return
        self._pending.append(event)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            since = time.monotonic() - self._last_flush
            delay = max(self.opts.flush_interval, self.opts.redraw_interval - since)
            self.set_timer(delay, self._flush_events)

    def _flush_events(self) -> None:
        self._flush_scheduled = False
        self._last_flush = time.monotonic()
        if self._shutting_down:
            return
        if not self.chat_ready():  # still composing: keep the batch, look again soon
            self._flush_scheduled = True
            self.set_timer(self.opts.flush_interval or 0.05, self._flush_events)
            return
        batch, self._pending = self._pending, []
        if not batch:
            return
        self.events_seen += len(batch)
        now_ms = int(self.clock() * 1000)
        changes = Changes()
        log = self.chat.query_one(MessageLog)
        current = self.model.channels.get(self.model.current or "")
        if current is not None:
            current.following = log.follow
        if self.chatlog is not None:
            self._log_to_files(batch)
        for ev in batch:
            if isinstance(ev, Ephemeral):
                self._ephemeral(ev, changes)
            elif isinstance(ev, NodeError):
                changes.notices.append(("error", ev.message))
            elif isinstance(ev, Rejected):
                changes.notices += self.unopened.rejected(self.node, ev, self.clock())
            elif isinstance(ev, Info):
                changes.notices.append(("information", ev.text))
            elif isinstance(ev, InviteMade):  # the code on one line, to copy and pass on
                self.push_screen(InviteScreen(ev.channel, ev.code, ev.expires_ms,
                                              self.copy_text, tz=self.opts.tz))  # fmt: skip
            elif isinstance(ev, MembersEvent):
                said = members_notices(self.node, ev, self.opts.tz)  # removals, with names
                changes.notices.extend(said)
                if ev.what not in ("members", "verify") and not said:  # answers: the command's
                    loud = ev.what in ("key_changed", "join_request", "rejected", "refused",
                                       "diverged")  # fmt: skip
                    changes.notices.append(("warning" if loud else "information", ev.text))
                if self.model.relabel(ev.channel):  # a name came or changed: every line
                    changes.channels.add(ev.channel)
                if ev.what in ("changed", "created", "joined", "admitted"):
                    self._refresh_panels()
            elif isinstance(ev, ClockSkew):  # issue 26 §3: told plainly
                changes.notices.append(("warning" if ev.offset_ms else "information", ev.text))
            elif isinstance(ev, DeviceCopied):  # another process holds our key: stop
                self._fatal_screen("Data directory is a copy", ev.text, "Keep one copy of a "
                                   "data directory per device.", EXIT_DEVICE_COPY)  # fmt: skip
                return
            elif isinstance(ev, DeviceTwins):  # two processes sign as one member
                changes.notices.append(("warning", ev.text))
            elif isinstance(ev, DiskFull):  # issue 26 §2
                changes.notices.append(("warning" if ev.state == "full" else "information",
                                        ev.detail))  # fmt: skip
            elif isinstance(ev, CatchUp):
                self._caught_up(ev, changes)
            else:
                changes.merge(self.model.apply(ev, now_ms))
        self._apply(changes)

    def _log_to_files(self, batch: Sequence[NodeEvent]) -> None:
        """Messages delivered and own lines made, to the channels' log files."""
        log, node = self.chatlog, self.node
        if log is None or node is None:
            return
        for ev in batch:
            if isinstance(ev, Delivered) and ev.kind != "segment":  # as the screen labels it
                who = self.model.label(ev.sender_id, ev.name, ev.channel)
                log.write(ev.channel, ev.lamport, ev.sender_id, ev.kind, who, ev.text)
            elif (isinstance(ev, OwnMessage) and ev.state == "logged" and ev.lamport is not None
                  and ev.kind != "segment"):  # fmt: skip
                log.write(ev.channel, ev.lamport, node.sender_id, ev.kind or "msg",
                          self.model.own_name(ev.channel), ev.text or "")  # fmt: skip
        if log.failed is not None:
            self.chatlog = None
            self.notify(f"logging to {log.dir} stopped: {log.failed}", severity="error")

    def _caught_up(self, ev: CatchUp, changes: Changes) -> None:
        if ev.state in ("started", "running"):
            self._catch_up[ev.channel] = ev
            return
        self._catch_up.pop(ev.channel, None)
        if ev.state == "failed":
            changes.notices.append(
                ("warning", f"catching #{ev.channel} up from the store failed: {ev.detail}")
            )

    def use_lan_store(self, url: str) -> None:
        """Use a store peer announced on the LAN (no ``--store`` was given)."""
        node = self.node
        if node is None:
            self._store_later = url
            return
        self._store_later = None
        if node.store_sync is None and not node.closed:
            with contextlib.suppress(RuntimeError, NodeClosedError):
                node.use_store(url)

    def _lan_text(self) -> str:
        lan = self.opts.lan_transport
        if lan is None:
            return self.opts.lan
        n = len(lan.peers())
        return f"{n} peer{'s' if n != 1 else ''}"

    def _store_text(self) -> str:
        node = self.node
        sync = node.store_sync if node is not None else None
        if sync is None:
            return self.opts.store_peer
        text = display_address(sync.url)
        running = self._catch_up.get(self.model.current or "") or next(
            iter(self._catch_up.values()), None
        )
        if running is not None:
            text += f" · {running.text}"
        return text

    def _ephemeral(self, ev: Ephemeral, changes: Changes) -> None:
        if self.online.heard(ev):  # /away, /away again, or quit (app/tui/online.py)
            changes.peers = True
            changes.channels.add(ev.channel)
            return
        name = decode_typing(ev.content)
        if name is None:
            return
        name = name or self.model.names.get(ev.sender_id) or ev.sender_id[:8]
        if self.model.typing(ev.channel, ev.sender_id, name, self.clock() + self.opts.typing_ttl):
            changes.channels.add(ev.channel)
            changes.peers = True

    def _apply(self, changes: Changes) -> None:
        if changes.status:
            self._note_connection()
        for name in changes.channels:
            self.pager.fill(name)  # quotes and files from the store (app/tui/paging.py)
        current = self.model.current
        log = self.chat.query_one(MessageLog)
        if current in changes.channels or log.view is not self.model.channels.get(current or ""):
            log.view = self.model.channels.get(current or "")
            log.sync()
        if log.follow and current is not None:
            self.model.mark_read(current)
        if changes.bell:
            self.bell()
        for channel, who, text in changes.alerts[-3:]:  # a burst: the newest few
            self.desktop_notify(f"{who} in #{channel}", text)
        for severity, text in changes.notices:
            self.notify(text, severity=severity, timeout=8)  # type: ignore[arg-type]
        self._refresh_panels()

    def _note_connection(self) -> None:
        m = self.model
        if m.connection == "disconnected" and not self._connection_noted:
            self._connection_noted = True
            self.notify(
                f"cannot reach {self.opts.transport_label}: "
                f"{explain(m.connection_reason, self.opts.relay_url)}. Retrying; what you "
                "type is kept and sent when it is back.",
                title="offline",
                severity="warning",
                timeout=10,
            )
        elif m.connection == "connected" and self._connection_noted:
            self._connection_noted = False
            self.notify(f"{self.opts.transport_label} connected", timeout=4)

    # ------------------------------------------------------------------ panels

    def chat_ready(self) -> bool:
        """Whether the chat screen's widgets exist (not yet while it is composed)."""
        chat = self.chat
        return chat.is_mounted and bool(chat.query(MessageLog)) and bool(chat.query(ChannelList))

    def _tick(self) -> None:
        if self._shutting_down or not self.chat_ready():
            return
        if self.ready.is_set():
            self.collector.tick()
            self.online.heartbeat()
        changed = self.model.expire_typing(self.clock())
        notices = self.unopened.due(self.node, self.clock())
        if changed or notices:
            self._apply(Changes(channels=changed, peers=bool(changed), notices=notices))
        if not changed:
            self._refresh_panels()

    def _sync_text(self, channel: str | None) -> tuple[str, int, int]:
        """("synced" | "syncing · N missing", unacknowledged own, waiting) for ``channel``."""
        node = self.node
        if node is None or channel is None or channel not in node.channels:
            return "—", 0, 0
        try:
            core = node.core(channel)
        except KeyError:
            return "—", 0, 0
        missing = len(core.missing_ids())
        waiting = len(core.incoming_ids())
        unacked = len(core.outgoing_ids())
        if missing:
            return f"syncing · {missing} missing", unacked, waiting
        if waiting:
            return f"syncing · {waiting} waiting", unacked, waiting
        return "synced", unacked, waiting

    def _refresh_panels(self) -> None:
        if not self.chat_ready():
            return
        m = self.model
        chat = self.chat
        self._fit_width(self.size.width)
        chat.query_one(ChannelList).update_entries(
            [
                ChannelEntry(
                    name, v.unread, v.mentioned, name == m.current, v.public,
                    m.levels.get(name, "all"), self._direct_label(name),
                )
                for name, v in ((n, m.channels[n]) for n in m.order)
            ]
        )
        sync, unacked, _waiting = self._sync_text(m.current)
        node = self.node
        me = f"{node.name} ({node.sender_id[:8]})" if node is not None else "…"
        me_short = node.name if node is not None else "…"
        state = m.connection if node is not None else "connecting"
        if self.fatal is not None:
            state = "stopped"
        chat.query_one(StatusBar).update_info(
            StatusInfo(
                transport=self.opts.transport_label,
                state=state,
                reason=m.connection_reason,
                retry_in=(
                    max(0.0, (m.retry_at_ms - self.clock() * 1000) / 1000)
                    if m.retry_at_ms is not None
                    else None
                ),  # counts down: the status bar is refreshed every tick
                lan=self._lan_text(),
                sync=sync,
                store=self._store_text(),
                me=me,
                me_short=me_short,
            )
        )
        view = m.channels.get(m.current or "")
        bar = Text()
        if view is not None:
            bar.append(self._direct_label(view.name) or f"#{view.name}", "bold")
            if not chat.query_one(ChannelList).display:
                bar.append_text(self._unread_elsewhere(view.name))
            mc = node.members_channel(view.name) if node is not None else None
            direct = self._direct_label(view.name)
            if direct:  # a direct conversation: whom with, not its channel id
                bar.append(" · direct conversation", "dim")
            elif mc is not None and node is not None:  # members channel: who is in, your role
                role = ("admin" if mc.roster.is_admin(node.sender_id) else
                        "member" if mc.roster.is_member(node.sender_id) else "read-only")
                bar.append(f" · members ({len(mc.roster)}, you: {role})", "dim")
            else:
                bar.append(" · public" if view.public else " · passphrase", "dim")
            peers = counted(node, view.name, node.peers(view.name)) if node is not None else []
            here = sum(1 for p in peers if self.online.is_online(p.last_seen_ms, p.sender_id))
            # online now (heard within a few sync periods), and all ever heard from
            bar.append(f" · {here} online", "dim")
            if here != len(peers):
                bar.append(f" · {len(peers)} heard from", "dim")
            if unacked:
                bar.append(f" · {unacked} not acknowledged yet", "dim")
            if view.topic:
                first = view.topic.split("\n", 1)[0]
                bar.append(" · ", "dim")
                bar.append(visible(first[:200]), "italic")
        elif node is None:
            bar.append("starting…", "dim")
        chat.query_one(ChannelBar).update_text(bar)
        chat.query_one(Banner).say(banner_text(node, m.current, self.opts.tz))
        typing = ""
        if view is not None:
            names = [n for n, until in view.typing.values() if until > self.clock()]
            typing = typing_text(names)
            log = chat.query_one(MessageLog)
            if view.new_below and view.at_tail and log.follow and log.view is view:
                view.new_below = 0  # the reader is back at the newest message
            if not typing and view.new_below:
                typing = f"↓ {view.new_below} new below · Ctrl+End"
        chat.query_one(TypingLine).update_text(typing)
        peer_list = chat.query_one(PeerList)
        if peer_list.display and node is not None and view is not None:
            now_ms = int(self.clock() * 1000)
            mc = node.members_channel(view.name)

            def role_of(sender_id: str) -> str:
                if mc is None:
                    return ""
                member = mc.roster.member(sender_id)
                if member is None:
                    return "not a member"
                return member.role + (" ✓" if sender_id in node.verified else "")

            entries = [PeerEntry(node.sender_id, node.name, "now", you=True,
                                 role=role_of(node.sender_id))]  # fmt: skip
            for p in counted(node, view.name, node.peers(view.name)):  # members only
                entries.append(
                    PeerEntry(
                        p.sender_id,
                        # the name from the history when it has not spoken since a restart;
                        # a name another member uses too: with its fingerprint
                        m.label(p.sender_id, p.name),
                        self.online.away_text(p.sender_id)
                        or "online" if self.online.is_online(p.last_seen_ms, p.sender_id)
                        else f"heard from {ago((now_ms - p.last_seen_ms) / 1000.0)}",
                        typing=p.sender_id in view.typing,
                        online=self.online.is_online(p.last_seen_ms, p.sender_id),
                        role=role_of(p.sender_id),
                    )
                )
            peer_list.update_entries(entries)

    def _direct_label(self, channel: str) -> str:
        """``@bob`` for the direct conversation with bob (app/members/direct.py), else ""."""
        node = self.node
        mc = node.members_channel(channel) if node is not None else None
        if node is None or mc is None or not channel.startswith("dm-"):
            return ""
        others = [mid for mid in mc.roster.members if mid != node.sender_id]
        if len(others) != 1:
            return ""
        return "@" + self.model.label(others[0], None, channel)  # the roster's name

    # ------------------------------------------------------------------ channels

    def switch_to(self, channel: str) -> None:
        if not self.model.switch(channel):
            return
        log = self.chat.query_one(MessageLog)
        log.show(self.model.channels[channel])
        self.chat.query_one(ChatInput).use_history(self.saved.history(channel))
        self._refresh_panels()

    def action_cycle(self, step: int) -> None:
        self.leave_current()
        target = self.model.cycle(step)
        if target is not None:
            self.switch_to(target)

    def action_goto(self, number: int) -> None:
        if 1 <= number <= len(self.model.order):
            self.leave_current()
            self.switch_to(self.model.order[number - 1])

    def leave_current(self) -> None:
        current = self.model.current
        if current is not None:
            self.model.mark_read(current)
            self.save_state()

    def on_channel_list_clicked(self, message: ChannelList.Clicked) -> None:
        self.leave_current()
        self.switch_to(message.channel)

    # ------------------------------------------------------------------ log keys

    def action_page(self, direction: int) -> None:
        self.chat.query_one(MessageLog).page(direction)

    def action_log_end(self, direction: int) -> None:
        log = self.chat.query_one(MessageLog)
        view = self.model.channels.get(self.model.current or "")
        if direction < 0:
            if view is not None and view.more_before:
                self.pager.to_oldest(view.name)  # the very first message, read at once
            else:
                log.to_top()
            return
        if view is not None and not view.at_tail:
            # the window ends before the newest message (a search result, a long read
            # back): load the newest page at once, not one page per press
            self.pager.to_newest(view.name)
        else:
            log.to_bottom()

    def action_select(self, step: int) -> None:
        self.chat.query_one(MessageLog).select_step(step)

    def action_unselect(self) -> None:
        log = self.chat.query_one(MessageLog)
        log.select(None)
        log.to_bottom()
        box = self.chat.query_one(ChatInput)
        if not box.has_focus and not self.chat.query_one(FindBar).display:
            box.focus()  # typing always lands in the input line

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.tui_config))

    def action_toggle_peers(self) -> None:
        peers = self.chat.query_one(PeerList)
        peers.display = not peers.display
        self._refresh_panels()

    def desktop_notify(self, title: str, body: str) -> None:
        """A desktop notification for a mention or a reply to you in a channel not in
        view: OSC 777 (foot, urxvt, VTE terminals) and OSC 9 (iTerm2, Windows Terminal,
        kitty, WezTerm); terminals that know neither ignore both. ``/notify off`` turns
        it off (kept in tui.json). Peers' text is made visible and has no ESC or BEL
        left to end the sequence early; it is cut to 200 characters."""
        if not self.saved.desktop_notify:
            return
        clean = [
            visible(t).replace(";", ",")[:200] for t in (title, body)
        ]
        data = f"\x1b]777;notify;{clean[0]};{clean[1]}\x07\x1b]9;{clean[0]}: {clean[1]}\x07"
        if os.environ.get("TMUX"):  # through to the outer terminal (allow-passthrough on)
            data = "\x1bPtmux;" + data.replace("\x1b", "\x1b\x1b") + "\x1b\\"
        self.write_terminal(data)

    def write_terminal(self, data: str) -> None:
        """Write control sequences to the terminal (nothing in tests without one)."""
        driver = self._driver
        if driver is not None and not self.is_headless:
            driver.write(data)
            driver.flush()

    def copy_to_clipboard_osc52(self, text: str) -> None:
        """Put ``text`` on the terminal's clipboard: OSC 52, which xterm, kitty, WezTerm,
        iTerm2, Windows Terminal and tmux (``set -g set-clipboard on``) take, also over
        ssh. Textual's own copy does the same; it is written here so tests see it."""
        data = base64.b64encode(text.encode("utf-8")).decode("ascii")
        self.write_terminal(f"\x1b]52;c;{data}\x07")

    def copy_text(self, text: str) -> list[str]:
        """Put ``text`` on the terminal's clipboard (:meth:`copy_to_clipboard_osc52`) and,
        inside tmux, in tmux's paste buffer (app/tui/clipboard.py); returns where it went."""
        return copy_text(text, self.copy_to_clipboard_osc52)

    def action_hotlist(self) -> None:
        """Alt+A: the next channel with news, as WeeChat's hotlist: mentions first, then
        the most unread, then the next in the list."""
        current = self.model.current
        views = [self.model.channels[n] for n in self.model.order if n != current]
        news = [v for v in views if v.unread or v.mentioned]
        if not news:
            self.notify("no news in other channels", timeout=2)
            return
        best = min(news, key=lambda v: (not v.mentioned, -v.unread))
        self.leave_current()
        self.switch_to(best.name)

    def action_toggle_events(self) -> None:
        """F4: hide or show join, leave and nick lines (remembered in tui.json)."""
        self.model.set_hide_events(not self.model.hide_events)
        self.chat.query_one(MessageLog).sync(force=True)
        self.notify(
            "join, leave and nick lines hidden (F4 shows them)"
            if self.model.hide_events
            else "join, leave and nick lines shown",
            timeout=3,
        )
        self.save_state()

    def action_toggle_theme(self) -> None:
        dark = self.current_theme.dark
        self.theme = "textual-light" if dark else "textual-dark"

    def on_resize(self, event: events.Resize) -> None:
        """Narrow terminals (a tmux pane): the channel list gives its columns to the log."""
        self._fit_width(event.size.width)
        if self.chat_ready():
            self.call_later(self._refresh_panels)  # the channel bar's "new in" follows

    def _unread_elsewhere(self, current: str) -> Text:
        """For a narrow terminal, where the channel list is hidden: news in the other
        channels, first in the channel bar (``· 3 new in #random @``)."""
        others = [v for n, v in self.model.channels.items() if n != current and v.unread]
        out = Text()
        if not others:
            return out
        total = sum(v.unread for v in others)
        where = f"#{others[0].name}" if len(others) == 1 else f"{len(others)} channels"
        pal = palette(self.current_theme.dark)
        out.append(f" · {total} new in {where}", "bold")
        if any(v.mentioned for v in others):
            out.append(" @", pal.mention_word + pal.mention_bg)
        out.append(" (Ctrl+N)", "dim")
        return out

    def _fit_width(self, width: int) -> None:
        if self.chat.is_mounted:
            channels = self.chat.query_one(ChannelList)
            wide = width >= NARROW
            if channels.display != wide:
                channels.display = wide

    def watch_theme(self, theme: str) -> None:
        if self.chat.is_mounted:
            self.chat.query_one(MessageLog).set_dark(self.current_theme.dark)
            for w in (ChannelList, PeerList, StatusBar, TypingLine):
                self.chat.query_one(w).refresh()

    def action_search(self, query: str = "", at: str | None = None) -> None:
        """Ctrl+F: the find bar (app/tui/finding.py)."""
        self.finder.open(query, at)

    def action_search_all(self, query: str = "") -> None:
        """Alt+F: search every joined channel (app/tui/finding.py)."""
        self.finder.search_all(query)

    def _cancel_find(self) -> None:
        self.workers.cancel_group(self, "find")

    def on_find_bar_step(self, message: FindBar.Step) -> None:
        self.finder.step(message.step)

    def on_find_bar_close(self, message: FindBar.Close) -> None:
        """Enter: stay at the match (selected, for /reply, /info...); Esc: the newest."""
        self.finder.close(message.keep)

    def on_find_bar_everywhere(self, message: FindBar.Everywhere) -> None:
        self.action_search_all(message.text)

    def action_retry(self) -> None:
        self.run_worker(self.commands.retry_failed(), group="retry")

    # ------------------------------------------------------------------ input

    def _completion_source(self) -> tuple[list[str], list[str], list[str]]:
        heard = dict(self.model.names)
        if self.node is not None:
            heard.update((p.sender_id, p.name) for p in self.node.peers() if p.name)
        for sid, name in heard.items():
            self.model.book.note(sid, name)
        # a name two members share: each with its fingerprint (issue 25: told apart)
        names = {self.model.book.label(name, sid) for sid, name in heard.items() if name}
        joined = list(self.model.order)
        known = sorted(self.known_channels | self.saved.channels_read())
        return sorted(names), joined, known

    def on_input_changed(self, event: Input.Changed) -> None:
        if isinstance(event.input, FindInput):
            self.finder.text_changed(event.value)
            return
        if not isinstance(event.input, ChatInput):
            return
        self.collector.typed()
        value = event.value
        channel = self.model.current
        node = self.node
        if not value or value.startswith("/") or node is None or channel is None:
            return
        if self._throttle.should_send(channel, self.clock()):
            self.run_worker(self._send_typing(node, channel), group="typing")

    async def _send_typing(self, node: Node, channel: str) -> None:
        with contextlib.suppress(Exception):
            await node.send_ephemeral(channel, encode_typing(node.name))

    def on_chat_input_line(self, event: ChatInput.Line) -> None:
        event.stop()
        self.saved.history_changed(self.model.current)
        self.commands.typed(event.line)

    def on_chat_input_multi_line(self, event: ChatInput.MultiLine) -> None:
        """A paste of several lines: shown in a dialog to edit and send as one message."""
        event.stop()
        self.commands.pasted(event.text)
