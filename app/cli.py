"""The ``sdschat`` command line.

Each subcommand lives in its own ``_add_<name>`` function below; the handler is
imported lazily so that ``sdschat --help`` stays fast and a subcommand's
dependencies (textual, websockets, pyspark) load only when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version


def _version() -> str:
    try:
        return version("sdschat")
    except PackageNotFoundError:  # running from a source tree without install
        return "0+unknown"


REPORT_EXTRA_HINT = "pip install 'sdschat[report]'"
"""How to get what ``report``, ``sim`` and ``export`` need (PySpark, pandas, pyarrow)."""


def _missing_extra(command: str, modules: Sequence[str]) -> int | None:
    """None if ``modules`` import; else print one line saying what to install and return 2.

    PySpark, pandas and pyarrow are the optional ``sdschat[report]`` extra: the
    chat (join, relay, store, history, demo) never imports them.
    """
    import importlib

    missing: list[str] = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if not missing:
        return None
    print(
        f"sdschat {command}: needs {', '.join(missing)} (not installed); "
        f"install them with: {REPORT_EXTRA_HINT}",
        file=sys.stderr,
    )
    return 2


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.launch.demo import add_demo_arguments  # light: stdlib only

    p = sub.add_parser(
        "demo",
        help="run the local demo: a relay and three chat TUIs in tmux (--core: the SDS core)",
        description="Start a relay on 127.0.0.1 and alice, bob and carol (carol dropping 30% "
        "of envelopes) as chat TUIs in a tmux session; prints how to attach and quit.",
    )
    add_demo_arguments(p)

    def run(args: argparse.Namespace) -> int:
        if args.core:
            from app.launch.core_demo import run_core_demo

            return run_core_demo(messages=args.messages, loss=args.loss, seed=args.seed)
        from app.launch.demo import run_demo

        return run_demo(args)

    p.set_defaults(func=run)
    core = sub.add_parser("core-demo", help="the SDS core demo (in-memory network, no TUI)")
    core.add_argument("--messages", type=int, default=20, help="messages each participant sends")
    core.add_argument("--loss", type=float, default=0.3, help="fraction of datagrams dropped")
    core.add_argument("--seed", type=int, default=1)

    def run_core(args: argparse.Namespace) -> int:
        from app.launch.core_demo import run_core_demo

        return run_core_demo(messages=args.messages, loss=args.loss, seed=args.seed)

    core.set_defaults(func=run_core)


def _add_relay(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from net.relay_config import add_relay_arguments  # light: no websockets import

    p = sub.add_parser(
        "relay",
        help="run a websocket relay that forwards encrypted envelopes by topic",
        description="Run a websocket relay. It forwards each published envelope to the other "
        "subscribers of its topic, never decrypts, and logs JSON lines on stderr. "
        "SIGINT/SIGTERM shut it down cleanly (exit 0).",
    )
    add_relay_arguments(p)

    def run(args: argparse.Namespace) -> int:
        from net.relay import run_relay
        from net.relay_config import config_from_args

        try:
            config = config_from_args(args)
        except ValueError as exc:
            print(f"sdschat relay: {exc}", file=sys.stderr)
            return 2
        return run_relay(config)

    p.set_defaults(func=run)


def _add_join(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.launch.settings import add_join_arguments  # light: no websockets import

    p = sub.add_parser(
        "join",
        help="join a channel: the chat TUI (--headless: lines on stdin, JSON on stdout)",
        description="Join a channel (through a relay with --relay, else by LAN gossip) and "
        "chat in the terminal (the TUI; F1 "
        "shows its keys). With --headless, every stdin line is a "
        "message (or a /command, see /help) and every event is printed as one JSON object per "
        "line. Without a passphrase the channel is PUBLIC: anyone who knows its name can read "
        "it. Exit status: 0 clean, 2 usage, 3 data dir in use, 4 database/identity unusable, "
        "5 passphrase problem, 6 (--headless) lines read were not all sent, 7 the data dir is a "
        "copy of one in use elsewhere (--moved when the original is gone for good), 8 (--link) "
        "the device link did not happen (nothing was changed).",
    )
    add_join_arguments(p)
    from net.lan.flags import add_join_network_arguments  # light: stdlib only

    add_join_network_arguments(p)
    p.add_argument("--theme", choices=("dark", "light"), default=None, help="TUI colours")

    def run(args: argparse.Namespace) -> int:
        from app.names import channel_arg, check_nick

        try:  # one rule for '#' and spaces in channel names (as /join applies it)
            if args.channel is not None:
                args.channel = channel_arg(args.channel)
            args.extra_channels = [channel_arg(c) for c in args.extra_channels or ()]
            if args.name is not None:  # the rule /nick applies: one word, at most 64
                args.name = check_nick(args.name)
        except ValueError as exc:
            p.error(str(exc))
        if args.moved:  # the user says the original is gone: the next open records this dir
            from pathlib import Path

            from app.launch.data_dir import default_data_dir
            from app.members.device_copy import forget_home

            forget_home(Path(args.data_dir).expanduser() if args.data_dir else default_data_dir())
        if args.link is not None:  # a new device of the person: linked, then its setup
            from app.launch.link_join import link_new_device

            status = link_new_device(args)
            if status is not None:
                return status
        if not args.headless:
            from app.tui.run import run_tui

            return run_tui(args)
        from app.headless.run import run_join

        return run_join(args)

    p.set_defaults(func=run)


def _add_link(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.launch.link_cmd import add_link_arguments  # light: no websockets import

    p = sub.add_parser(
        "link",
        help="link a new device of yours: a short code to type into it",
        description="Show a link code (and its QR code) for a new device of yours, which "
        "runs 'sdschat join --link CODE'. Once it answers, this device hands it your "
        "channels, DMs, their keys and your settings, and signs it into your device list. "
        "Works beside a running sdschat of this data directory. A code is good for 10 "
        "minutes and one try. Exit status 0 linked, 2 usage, 8 the link did not happen "
        "(nothing was changed).",
    )
    add_link_arguments(p)

    def run(args: argparse.Namespace) -> int:
        from app.launch.link_cmd import run_link

        return run_link(args)

    p.set_defaults(func=run)


def _add_history(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "history",
        help="print a channel's log in SDS order",
        description="Print the stored log of a channel in its SDS order (lamport, message id): "
        "the same order on every participant holding the same messages. Works beside a "
        "running node (reads the database read-only).",
    )
    p.add_argument("channel")
    p.add_argument(
        "--data-dir",
        default=None,
        help="the participant's data directory (default: join's, ~/.local/share/sdschat)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per message")

    def run(args: argparse.Namespace) -> int:
        from app.chat.history import print_history
        from app.launch.data_dir import default_data_dir
        from app.names import channel_arg

        try:
            channel = channel_arg(args.channel)
        except ValueError as exc:
            p.error(str(exc))
        data_dir = args.data_dir or default_data_dir()
        return print_history(data_dir, channel, as_json=args.json)

    p.set_defaults(func=run)


def _add_invite(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.launch.invite_cmd import add_invite_arguments

    p = sub.add_parser(
        "invite",
        help="a one-line invite code to a members channel (you must be its admin)",
        description="Print a one-line invite code to members channel CHANNEL of this data "
        "directory. The newcomer runs 'sdschat join --invite CODE'; the node of this data "
        "directory (running now or later) lets them in. A code is single use and expires "
        "(24 h by default). Exit status 0, or 2 with one line on stderr.",
    )
    add_invite_arguments(p)

    def run(args: argparse.Namespace) -> int:
        from app.launch.invite_cmd import run_invite

        return run_invite(args)

    p.set_defaults(func=run)


def _add_doctor(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "doctor",
        help="check a data directory's database for damage",
        description="Check a data directory's database: SQLite's structural check (quick_check) "
        "and every stored message against its digest. Reads only; works beside a running "
        "node. Exit status 0 healthy, 1 damaged, 2 no usable database.",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="the participant's data directory (default: join's, ~/.local/share/sdschat)",
    )

    def run(args: argparse.Namespace) -> int:
        from app.launch.data_dir import default_data_dir
        from storage.doctor import main_doctor

        return main_doctor(args.data_dir or str(default_data_dir()))

    p.set_defaults(func=run)


def _add_sim(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.sim.simulation import add_sim_arguments  # light: imports nothing heavy at module level

    p = sub.add_parser(
        "sim",
        help="simulate N participants (the real SDS core) and write their event logs as Parquet",
        description="A deterministic, seeded simulation of the SDS core over an in-memory "
        "network in virtual time (loss, latency, partitions, churn, store peer). Writes "
        "OUT/events/*.parquet (the schema 'sdschat export' writes) and OUT/run.json. "
        "Analyse it with 'sdschat report OUT --out REPORT'.",
    )
    add_sim_arguments(p)

    def run(args: argparse.Namespace) -> int:
        if (status := _missing_extra("sim", ("pyarrow",))) is not None:
            return status
        from app.sim.simulation import run_sim_command

        return run_sim_command(args)

    p.set_defaults(func=run)


def _add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="reliability report (PySpark; needs sdschat[report]) from event-log Parquet",
        description="Compute per channel: convergence, causal order, delivery latency, time to "
        "acknowledgement, resends, repairs, store retrievals, lost messages and protocol "
        "overhead, on Spark (local[*] by default, --master spark://HOST:PORT, or Spark Connect "
        "--remote sc://HOST:PORT). Writes OUT/summary.json, OUT/report.html, CSVs and the "
        "Parquet detail; prints a short table. Exit 2 on empty or malformed input or a "
        "Spark failure (one line, nothing written), 130 when interrupted.",
    )
    from pipeline.options import add_report_arguments

    add_report_arguments(p)

    def run(args: argparse.Namespace) -> int:
        if (status := _missing_extra("report", ("pyspark", "pandas", "pyarrow"))) is not None:
            return status
        from pipeline.report import run_report

        return run_report(args)

    p.set_defaults(func=run)


def _add_report_server(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report-server",
        help="a Spark Connect server that stays up, so reports skip the JVM start "
        "(sdschat report --remote)",
        description="Run a Spark Connect server in the foreground (the pip package's Spark, "
        "Java 17+) on 127.0.0.1:15002 by default; 'sdschat report INPUT --out DIR --remote "
        "sc://127.0.0.1:15002' then runs on it, without starting and warming a JVM of its "
        "own (100k events: about 6 s instead of 13 s). Ctrl+C stops it.",
    )
    from pipeline.options import add_server_arguments

    add_server_arguments(p)

    def run(args: argparse.Namespace) -> int:
        if (status := _missing_extra("report-server", ("pyspark",))) is not None:
            return status
        from pipeline.report import run_report_server

        return run_report_server(args)

    p.set_defaults(func=run)


def _add_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        help="export nodes' SQLite event logs as Parquet (the schema 'sdschat sim' writes)",
        description="Read the event log of each DATA_DIR (one participant each; read-only, "
        "works beside a running node) and write OUT/events/*.parquet and OUT/export.json "
        "for 'sdschat report'.",
    )
    p.add_argument("data_dirs", nargs="+", metavar="DATA_DIR")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--run", default="export", help="run label in the rows (default 'export')")
    p.add_argument("--force", action="store_true", help="replace an existing export in --out")

    def run(args: argparse.Namespace) -> int:
        if (status := _missing_extra("export", ("pyarrow",))) is not None:
            return status
        from storage.export import main_export

        return main_export(args.data_dirs, args.out, args.run, args.force)

    p.set_defaults(func=run)


def _add_store(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.launch.store_cmd import add_store_arguments  # light: stdlib only

    p = sub.add_parser(
        "store",
        help="run a store peer: archive a channel's encrypted envelopes for those who were away",
        description="Subscribe to topics (--topic HEX, or --channel NAME for a public channel) "
        "through relays, keep every envelope (ciphertext only: the store holds no key) in "
        "SQLite with its arrival time, and answer history queries on --listen. Retention by "
        "age (--max-age) and size (--max-bytes). JSON logs on stderr; SIGINT/SIGTERM exit 0. "
        "Exit status: 1 cannot listen, 2 usage, 3 data dir in use, 4 database unusable.",
    )
    add_store_arguments(p)

    def run(args: argparse.Namespace) -> int:
        from app.launch.store_cmd import run_store_command

        return run_store_command(args)

    p.set_defaults(func=run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sdschat",
        description="Reliable peer-to-peer group chat for the terminal (Scalable Data Sync).",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"sdschat {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_demo(sub)
    _add_relay(sub)
    _add_join(sub)
    _add_invite(sub)
    _add_link(sub)
    _add_history(sub)
    _add_doctor(sub)
    _add_sim(sub)
    _add_report(sub)
    _add_report_server(sub)
    _add_export(sub)
    _add_store(sub)
    for command in _subparsers(parser).values():
        command.allow_abbrev = False  # '--rel' is not '--relay': flags are typed in full
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


EXIT_INTERRUPTED = 130
"""Ctrl+C (SIGINT) before a command's own handling took over: 128 + SIGINT, as shells do."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``sdschat``; Ctrl+C at any point before a command handles it itself (loading
    modules, parsing, opening) prints one line and exits 130, never a traceback."""
    try:
        _preload_extensions()
        return _main(argv)
    except KeyboardInterrupt as exc:
        print("sdschat: interrupted", file=sys.stderr)
        if _in_import(exc):
            # Interrupted inside a module's import: a C extension (orjson, seen) may be
            # half-initialised, and the interpreter's normal shutdown then crashed
            # (SIGSEGV, about 1 run in 25). Nothing is open yet: leave at once.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED


#: Compiled (Rust, pyo3) extension modules that crashed the process (SIGSEGV, no
#: output) when Ctrl+C arrived during their import (orjson: about 1 start in 25 in
#: tests/test_cli.py). They are imported first, with SIGINT held until they are in.
_EXTENSIONS = ("orjson", "cryptography.hazmat.bindings._rust")


def _preload_extensions() -> None:
    import importlib
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        for name in _EXTENSIONS:  # someone else's handler (an embedding program): as is
            importlib.import_module(name)
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        for name in _EXTENSIONS:
            importlib.import_module(name)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if held:
        raise KeyboardInterrupt


def _in_import(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a module was being imported."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        tb = tb.tb_next
    return False


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # the command's own usage, not the top-level one, says what it accepts
        command = getattr(args, "command", None)
        chosen = _subparsers(parser).get(command or "", parser)
        chosen.error(f"unrecognized arguments: {' '.join(unknown)}")
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    return int(func(args))


if __name__ == "__main__":
    sys.exit(main())
