"""``sdschat join <channel>`` without ``--headless``: the Textual TUI.

Same flags, settings and exit statuses as the headless mode
(:mod:`app.headless.run`): 0 clean exit; 2 bad usage or settings; 3 the data
directory is in use; 4 the database or identity file is unusable; 5 a
passphrase problem. Problems found before the screen opens (bad flags, an
unreadable passphrase file) are printed on stderr; the others are shown in
the app, which then exits with their status.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import sds
from app.launch.data_dir import default_data_dir, prepare_data_dir
from app.launch.exits import EXIT_DATABASE, EXIT_PASSPHRASE, EXIT_USAGE
from app.launch.joined import load_joined
from app.launch.last_setup import record_start
from app.launch.passphrase import PassphraseFileError, read_passphrase_file
from app.launch.settings import load_config_file, settings_from_args
from app.launch.wiring import node_options, relay_label, wire_transport
from storage import StorageError

__all__ = ["TUI_LOG_WINDOW", "default_data_dir", "relay_label", "run_tui", "tui_protocol"]

TUI_LOG_WINDOW = 2_000
"""The SDS core's log window in the TUI (sdschat's default is 10,000 ids): ids older
than it are checked in SQLite (``MessagesMissing`` -> ``has_ids``) and a copy of an
older message is recognised there (``Node._settle_copies``). The core's window was
the largest part of a TUI's memory after 20,000 messages (docs/chat.md, "Memory")."""


def tui_protocol(config: sds.Config, protocol: dict[str, Any]) -> sds.Config:
    """The TUI's protocol settings: ``config`` with the log window at most
    :data:`TUI_LOG_WINDOW`, unless the config file's ``[protocol]`` sets ``log_window``."""
    if "log_window" in protocol or config.log_window <= TUI_LOG_WINDOW:
        return config
    return config.with_changes(log_window=max(TUI_LOG_WINDOW, config.causal_history_size))


def run_tui(args: argparse.Namespace) -> int:
    """Run the TUI for parsed ``sdschat join`` arguments; returns the exit status."""
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        print(f"sdschat join: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from app.tui.config import tui_config

    try:  # the keymap and colours: a bad entry stops here, before anything is opened
        keys_and_colours = tui_config(
            load_config_file(args.config) if args.config else {}, args.config or ""
        )
    except ValueError as exc:
        print(f"sdschat join: {exc}", file=sys.stderr)
        return EXIT_USAGE
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    try:  # before a passphrase is asked: a --data-dir that cannot work is said first
        prepare_data_dir(data_dir)
    except StorageError as exc:
        print(f"sdschat join: {exc}", file=sys.stderr)
        return EXIT_DATABASE
    passphrase: bytes | None = None
    if args.passphrase_file:
        try:
            passphrase = read_passphrase_file(args.passphrase_file)
        except PassphraseFileError as exc:
            print(f"sdschat join: {exc}", file=sys.stderr)
            return EXIT_PASSPHRASE
    from app.members import secrets_file as members_file

    members = bool(getattr(args, "create", False) or getattr(args, "invite", None)
                   or members_file.members_file(data_dir, args.channel).exists())  # fmt: skip
    kept = any(k.channel == args.channel for k in load_joined(data_dir))  # its key is here
    ask = not args.passphrase_file and sys.stdin.isatty() and not members and not kept
    # A store peer announced on the LAN is used when no --store was given (as headless does).
    store_url = getattr(args, "store", None)
    app_box: list[Any] = []

    def on_lan_store(url: str, present: bool) -> None:
        if present and store_url is None and app_box:
            app_box[0].use_lan_store(url)

    # LAN gossip unless a relay was chosen; both with --relay --lan (app/launch/wiring.py)
    try:
        config_file = load_config_file(args.config) if args.config else {}
        wired = wire_transport(args, settings, config=config_file, on_store=on_lan_store)
    except ValueError as exc:
        print(f"sdschat join: {exc}", file=sys.stderr)
        return EXIT_USAGE
    options = node_options(
        settings,
        store_url=store_url,
        config=tui_protocol(settings.config, dict(config_file.get("protocol", {}))),
    )
    channels = [args.channel, *[c for c in args.extra_channels if c != args.channel]]

    from app.tui.app import make_app  # Textual loads only for the TUI
    from app.tui.config import ACTIONS
    from app.tui.keys import use_alt_digits, use_alt_enter, use_alt_letters

    use_alt_digits()  # Alt+1..9 switch channels in xterm and tmux (ESC+digit)
    # Alt+F (and any Alt+letter of the keymap) from xterm and tmux (ESC+letter)
    use_alt_letters(k for a in ACTIONS for k in keys_and_colours.keys(a).split(","))
    use_alt_enter()  # Alt+Enter (ESC CR) starts a second line instead of sending

    app = make_app(
        data_dir,
        wired.transport,
        channels=channels,
        name=settings.name,
        passphrase=passphrase,
        ask_passphrase=ask,
        options=options,
        transport_label=wired.label,
        theme=getattr(args, "theme", None),
        lan_transport=wired.lan,
        relay_url=wired.relay_url,
        tui_config=keys_and_colours,
        create=bool(getattr(args, "create", False)),
        invite=getattr(args, "invite", None),
        relays=wired.invite_relays,
        on_ready=lambda: record_start(settings.start) if settings.start is not None else None,
    )
    app_box.append(app)
    from app.tui.hangup import EXIT_HANGUP, watch_terminal

    hung_up = False

    def request_exit() -> None:
        nonlocal hung_up
        hung_up = True
        app.call_from_thread(app.exit, EXIT_HANGUP)

    watching = watch_terminal(request_exit)
    try:
        app.run()
    finally:
        watching.set()
    return EXIT_HANGUP if hung_up else int(app.return_code or 0)
