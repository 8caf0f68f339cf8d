"""``sdschat join … --headless``: a node driven by stdin, reporting JSON lines on stdout.

Input: one line per message (UTF-8); slash commands as in :mod:`app.commands`.
End of input or ``/quit`` (or SIGTERM/SIGINT) shuts the node down cleanly:
queued work finishes, the protocol state is saved, exit status 0.

Output: one JSON object per line for every node event (:mod:`app.node_events`
documents them: ``ready``, ``channel`` (with ``"public": true`` for a channel
without passphrase), ``delivered``, ``own`` (``queued``/``logged``/``sent``/
``possibly_acknowledged``/``acknowledged``/``failed``), ``missing``, ``lost``,
``peer``, ``connection``, ``rejected``, ``peers``, ``info``, ``error``,
``catchup`` (progress of catching up from a store peer), ``lan_peer`` (LAN
gossip peers coming and going), ``closed``). Every object has ``ts``
(wall-clock seconds, taken when the node made the event) and ``emitted_ns``
(wall-clock nanoseconds when the line was written: for a ``delivered`` event,
after the message was committed to the log).

Network: LAN gossip when no relay is chosen, the relay with ``--relay``, both
(bridged) with ``--relay … --lan`` (:mod:`net.lan.flags`); ``--store URL`` (or a
store announced on the LAN) to catch up after being away.

Exit status: 0 clean exit; 2 bad usage or settings; 3 the data directory is
in use by another instance; 4 the database or identity file is unusable
(written by a newer sdschat, corrupt, key file of another identity);
5 passphrase problem (unreadable or empty passphrase file, or a passphrase
that differs from the one this data directory joined the channel with).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import os
import random
import signal
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import orjson

from app.chat_content import channel_arg, check_nick, json_visible, nick_text
from app.commands import HELP, parse_line
from app.content_commands import CONTENT_COMMANDS, run_content_command
from app.joined import forget_channel, load_joined, remember_channel
from app.node import (
    IdentityMismatchError,
    Node,
    NodeClosedError,
    NodeOptions,
    PassphraseMismatchError,
    peer_lines,
    wall_ms,
)
from app.node_events import Info, LanPeer, NodeError, NodeEvent, Peers, event_to_json
from app.node_settings import NodeSettings, load_config_file, settings_from_args
from app.transport import LossyTransport, RelayTransport, Transport
from net import runner
from net.identity import IdentityFileError
from net.lan.flags import build_transport
from storage import DataDirLockedError, StorageError

__all__ = [
    "EXIT_DATABASE",
    "EXIT_LOCKED",
    "EXIT_PASSPHRASE",
    "EXIT_USAGE",
    "PassphraseFileError",
    "read_passphrase_file",
    "run_join",
]

EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_DATABASE = 4
EXIT_PASSPHRASE = 5

MAX_PASSPHRASE_FILE = 64 * 1024


class PassphraseFileError(ValueError):
    """The passphrase file cannot be used."""


def read_passphrase_file(path: str | Path) -> bytes:
    """The passphrase: the file's first line, without its line ending.

    Raises:
        PassphraseFileError: unreadable, too large, or an empty first line.
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_PASSPHRASE_FILE + 1)
    except OSError as exc:
        raise PassphraseFileError(
            f"cannot read passphrase file {p}: {exc.strerror or exc}"
        ) from None
    if len(data) > MAX_PASSPHRASE_FILE:
        raise PassphraseFileError(f"passphrase file {p} is larger than 64 KiB")
    first = data.split(b"\n", 1)[0].rstrip(b"\r")
    if not first:
        raise PassphraseFileError(
            f"passphrase file {p} is empty (omit --passphrase-file for a PUBLIC channel)"
        )
    return first


class JsonLines:
    """Writes node events as JSON lines (flushed per event: scripts read them live)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.broken = False

    def write(self, obj: dict[str, object]) -> None:
        if self.broken:
            return
        try:
            try:
                line = orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE).decode()
            except (orjson.JSONEncodeError, TypeError):  # e.g. an int beyond 64 bits
                line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
            self.out.write(json_visible(line))
            self.out.flush()
        except (BrokenPipeError, ValueError):
            self.broken = True  # the reader went away; keep running until stdin ends

    def event(self, ev: NodeEvent) -> None:
        obj = event_to_json(ev)
        obj["emitted_ns"] = time.time_ns()
        self.write(obj)


def _fatal(out: JsonLines, message: str, code: int) -> int:
    print(f"sdschat join: {message}", file=sys.stderr)
    out.write({"event": "error", "message": message, "fatal": True, "exit": code})
    return code


class _PipeLines(asyncio.Protocol):
    """Stdin lines read by the event loop itself (stdin a pipe): no thread, so a line
    reaches the node without a thread waiting for the GIL while the loop is busy (up
    to ``sys.getswitchinterval()``, 5 ms, on a node receiving at 100 msg/s)."""

    def __init__(self, queue: asyncio.Queue[str | None]) -> None:
        self.queue = queue
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if b"\n" not in data:
            return
        *lines, self.buf = self.buf.split(b"\n")
        for raw in lines:
            self.queue.put_nowait((raw + b"\n").decode("utf-8", errors="replace"))

    def connection_lost(self, exc: Exception | None) -> None:  # EOF or a read error
        if self.buf:
            self.queue.put_nowait(self.buf.decode("utf-8", errors="replace"))
            self.buf = b""
        self.queue.put_nowait(None)


async def _stdin_lines(
    loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]
) -> asyncio.BaseTransport | None:
    """Feed stdin lines (then ``None`` at EOF) into ``queue``: read by the loop when stdin
    is a pipe (:class:`_PipeLines`; its transport is returned, to close at the end),
    else (a terminal, a file) by a daemon thread."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = sys.stdin.fileno()
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            pipe = os.fdopen(os.dup(fd), "rb", buffering=0)  # the transport closes its copy
            try:
                transport, _ = await loop.connect_read_pipe(lambda: _PipeLines(queue), pipe)
                return transport
            except (OSError, ValueError, NotImplementedError):
                pipe.close()

    def pump() -> None:
        stream = sys.stdin.buffer
        while True:  # ends at EOF
            try:
                raw = stream.readline()
            except (OSError, ValueError):
                raw = b""
            item = raw.decode("utf-8", errors="replace") if raw else None
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:
                return  # the loop is gone
            if item is None:
                return

    threading.Thread(target=pump, name="stdin", daemon=True).start()
    return None


async def _serve(
    args: argparse.Namespace, settings: NodeSettings, passphrase: bytes | None, out: JsonLines
) -> int:
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else _default_data_dir()
    # LAN gossip unless a relay was chosen (net/lan/flags.py); --store or a LAN store.
    store_url: str | None = getattr(args, "store", None)
    lan_stores: list[str] = []
    node_box: list[Node] = []

    def on_lan_store(url: str, present: bool) -> None:
        if present and store_url is None and not lan_stores:
            lan_stores.append(url)
            if node_box:
                with contextlib.suppress(RuntimeError, NodeClosedError):
                    node_box[0].use_store(url)

    def on_lan_peer(ev: Any) -> None:
        out.event(LanPeer(ev.state, ev.peer, ev.address, ev.role, ev.reason, ev.connected))

    try:
        config_file = load_config_file(args.config) if args.config else {}
        transport: Transport
        transport, _lan = build_transport(
            args,
            settings.relay,
            lambda _url: RelayTransport(settings.relays or settings.relay),
            config=config_file,
            on_peer=on_lan_peer,
            on_store=on_lan_store,
        )
    except ValueError as exc:
        return _fatal(out, str(exc), EXIT_USAGE)
    if settings.drop_rate > 0:
        rng = random.Random(settings.drop_seed)
        transport = LossyTransport(transport, settings.drop_rate, rng)
    options = NodeOptions(
        config=settings.config,
        state_save_interval_ms=settings.state_save_ms,
        store_url=store_url,
        recent_window=settings.recent_window,
        new_history=settings.new_history,
    )
    try:
        node = await Node.open(data_dir, transport, name=settings.name, options=options)
    except DataDirLockedError as exc:
        return _fatal(out, str(exc), EXIT_LOCKED)
    except (StorageError, IdentityFileError, IdentityMismatchError) as exc:
        # newer schema, damaged file, unusable directory: every storage refusal but the lock
        return _fatal(out, str(exc), EXIT_DATABASE)
    node.subscribe(out.event)
    node_box.append(node)
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, lines.put_nowait, None)
    status = 0
    stdin_pipe: asyncio.BaseTransport | None = None
    try:
        await node.start()
        channels = [args.channel, *[c for c in args.extra_channels if c != args.channel]]
        try:
            for ch in channels:
                await node.join(ch, passphrase)
        except PassphraseMismatchError as exc:
            return _fatal(out, str(exc), EXIT_PASSPHRASE)
        except ValueError as exc:
            return _fatal(out, str(exc), EXIT_USAGE)
        except StorageError as exc:  # e.g. a damaged page found only now
            return _fatal(out, str(exc), EXIT_DATABASE)
        await _rejoin(node, data_dir, out)  # channels /join'ed in an earlier run, as the TUI
        stdin_pipe = await _stdin_lines(loop, lines)
        current: str | None = args.channel
        for _ in iter(int, 1):  # until EOF, /quit or a signal
            line = await lines.get()
            if line is None:
                break
            cmd = parse_line(line)
            if cmd is None:
                continue
            if cmd.name == "quit":
                break
            current = await _command(node, cmd.name, cmd.arg, current, passphrase, out,
                                     data_dir)  # fmt: skip
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        if stdin_pipe is not None:
            stdin_pipe.close()
        await node.close()
    return status


async def _command(
    node: Node,
    name: str,
    arg: str,
    current: str | None,
    passphrase: bytes | None,
    out: JsonLines,
    data_dir: Path | None = None,
) -> str | None:
    """Run one parsed command; returns the (possibly new) current channel."""
    try:
        if name in ("say", "me"):
            if current is None:
                out.event(NodeError("no current channel: /join one first"))
            else:
                fut = node.post(current, arg, "me" if name == "me" else "msg")
                fut.add_done_callback(_consume)
        elif name == "error":
            out.event(NodeError(arg))
        elif name in CONTENT_COMMANDS:
            if current is None:
                out.event(NodeError("no current channel: /join one first"))
            else:
                await run_content_command(node, name, arg, current, out.event)
        elif name == "join":
            target = channel_arg(arg)
            info = await node.join(target, passphrase)
            if data_dir is not None:
                remember(data_dir, info)  # rejoined at the next start (issue 27 item 9)
            return target
        elif name == "leave":
            gone = channel_arg(arg) if arg else current
            if gone is None or not await node.leave(gone):
                out.event(NodeError(f"not in channel {gone!r}"))
            elif data_dir is not None:
                with contextlib.suppress(OSError):
                    forget_channel(data_dir, gone)  # not rejoined at the next start
            elif gone == current:
                remaining = sorted(node.channels)
                return remaining[0] if remaining else None
        elif name == "switch":
            arg = channel_arg(arg)
            if arg not in node.channels:
                out.event(NodeError(f"not in channel {arg!r} (/join it first)"))
            else:
                out.event(Info(f"current channel: {arg}", {"channel": arg}))
                return arg
        elif name == "nick":
            new, old = check_nick(arg), node.name
            await node.set_name(new)
            if new != old:  # announced in every channel joined, as a line
                for joined in list(node.channels):
                    node.post(joined, nick_text(old, new), "nick").add_done_callback(_consume)
            out.event(Info(f"your name is now {node.name}", {"name": node.name}))
        elif name == "who":
            peers = tuple(node.peers(current))
            out.event(Peers(current, peers))
            out.event(Info("\n".join(peer_lines(peers, wall_ms())) or "nobody heard from yet"))
        elif name == "retry":
            n = await node.retry()
            out.event(Info(f"sending {n} failed message(s) again", {"retried": n}))
        elif name == "stats":
            out.event(Info("stats", node.stats()))
        elif name == "help":
            out.event(Info(HELP))
    except (ValueError, KeyError) as exc:
        out.event(NodeError(str(exc)))
    except NodeClosedError:
        pass
    return current


def _consume(fut: asyncio.Future[int]) -> None:
    """The node reports a failed enqueue as an ``error`` event; just retrieve it here."""
    if not fut.cancelled():
        fut.exception()


def remember(data_dir: Path, info: Any) -> None:
    """Keep a joined channel's derived key in ``channels.json`` (app/joined.py, as the
    TUI does), so the next start rejoins it; a write failure only loses that."""
    with contextlib.suppress(OSError, AttributeError):
        remember_channel(Path(data_dir), info.key)


async def _rejoin(node: Node, data_dir: Path, out: JsonLines) -> None:
    """Join again the channels of ``channels.json`` not joined yet (a supervisor's
    restart of a bot keeps the channels it /join'ed), each with its stored key."""
    for key in load_joined(Path(data_dir)):
        if key.channel in node.channels:
            continue
        try:
            await node.join(key.channel, None, key=key)
        except (ValueError, StorageError) as exc:
            out.event(NodeError(f"could not rejoin #{key.channel}: {exc}"))


def default_data_dir() -> Path:
    """Where ``sdschat join`` (and ``sdschat history``) keep and find data without
    ``--data-dir``."""
    return Path.home() / ".local" / "share" / "sdschat"


_default_data_dir = default_data_dir


def _passphrase(args: argparse.Namespace) -> bytes | None:
    if args.passphrase_file:
        return read_passphrase_file(args.passphrase_file)
    if sys.stdin.isatty():
        entered = getpass.getpass(
            f"Passphrase for {args.channel} (empty: PUBLIC channel anyone can read): "
        )
        return entered.encode("utf-8") if entered else None
    return None


def run_join(args: argparse.Namespace) -> int:
    """``sdschat join --headless``: validate settings, then run the headless node (the
    CLI sends ``join`` without ``--headless`` to :func:`app.tui.run.run_tui`)."""
    out = JsonLines(sys.stdout)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        return _fatal(out, str(exc), EXIT_USAGE)
    try:
        passphrase = _passphrase(args)
    except PassphraseFileError as exc:
        return _fatal(out, str(exc), EXIT_PASSPHRASE)
    except (EOFError, KeyboardInterrupt):
        return _fatal(out, "no passphrase entered", EXIT_PASSPHRASE)
    return runner.run(_serve(args, settings, passphrase, out))
