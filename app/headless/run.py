"""``sdschat join … --headless``: a node driven by stdin, reporting JSON lines on stdout.

Input: one line per message (UTF-8: a line that is not is refused with an ``error``
event naming it, never sent with U+FFFD in place of its bytes, and counts as not
sent for the exit status); slash commands from the command table
(:mod:`app.commands.table`; ``/help`` lists them; :mod:`app.headless.front` says how
headless mode answers them).
Lines are read with backpressure and drained at the end (:mod:`app.headless.line_feed` says
what a script can count on): a line is handed to the node when its outgoing buffer
has room (stdin is not read meanwhile); end of input or ``/quit`` waits until every
line read is durable and sent, then shuts the node down cleanly (protocol state
saved, exit status 0), or exits 6 naming the lines that did not leave. SIGTERM or
SIGINT stops without waiting for lines to leave (they are durable in the outbox).

Output: one JSON object per line for every node event (:mod:`app.node.events`
documents them: ``ready``, ``channel`` (with ``"public": true`` for a channel
without passphrase), ``delivered``, ``own`` (``queued``/``logged``/``sent``/
``possibly_acknowledged``/``acknowledged``/``failed``), ``missing``, ``lost``,
``peer``, ``connection``, ``rejected``, ``peers``, ``info``, ``error``,
``catchup`` (progress of catching up from a store peer), ``lan_peer`` (LAN
gossip peers coming and going), ``closed``; ``rejected`` lines are written a few
per reason and 10 s, then summed into one with ``suppressed``
(:mod:`app.headless.rejected`); a ``missing`` reminder lists at most
:data:`REMINDER_IDS` ids, with ``ids_total``). Every object has ``ts``
(wall-clock seconds, taken when the node made the event) and ``emitted_ns``
(wall-clock nanoseconds when the line was written: for a ``delivered`` event,
after the message was committed to the log).

Network: LAN gossip when no relay is chosen, the relay with ``--relay``, both
(bridged) with ``--relay … --lan`` (:mod:`net.lan.flags`); ``--store URL`` (or a
store announced on the LAN) to catch up after being away.

Exit status: 0 clean exit (every line read was sent); 2 bad usage or settings;
3 the data directory is in use by another instance; 4 the database or identity file is unusable
(written by a newer sdschat, corrupt, key file of another identity);
5 passphrase problem (unreadable or empty passphrase file, or a passphrase
that differs from the one this data directory joined the channel with);
6 lines read were not all sent (:data:`app.headless.line_feed.EXIT_UNSENT`; a line
sent whose acknowledgement the node gave up on counts as sent, and is named in an
``info`` event with ``unacknowledged``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import getpass
import json
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import orjson

from app.chat.lines import json_visible
from app.commands.channels import check_new_channel
from app.commands.line import parse_line
from app.commands.table import Command
from app.headless.file_watch import FileWatch
from app.headless.front import HeadlessFront
from app.headless.line_feed import EXIT_UNSENT, LineFeed
from app.headless.rejected import RejectedLines
from app.launch.data_dir import default_data_dir, prepare_data_dir
from app.launch.exits import (
    EXIT_DATABASE,
    EXIT_DEVICE_COPY,
    EXIT_LOCKED,
    EXIT_PASSPHRASE,
    EXIT_USAGE,
)
from app.launch.invite_wait import redeem
from app.launch.joined import JoinedKeeper, load_joined, load_remembered, rejoinable
from app.launch.last_setup import record_start
from app.launch.passphrase import PassphraseFileError, read_passphrase_file
from app.launch.settings import NodeSettings, load_config_file, settings_from_args
from app.launch.wiring import node_options, wire_transport
from app.members import secrets_file as members_file
from app.members.device_copy import DataDirCopiedError
from app.node.events import (
    DeviceCopied,
    Info,
    LanPeer,
    Missing,
    NodeError,
    NodeEvent,
    Rejected,
    event_to_json,
)
from app.node.runtime import (
    IdentityMismatchError,
    Node,
    NodeClosedError,
    PassphraseMismatchError,
)
from net import runner
from net.identity import IdentityFileError
from storage import DataDirLockedError, StorageError

__all__ = ["EXIT_UNSENT", "run_join"]

STDIN_HIGH = 512
"""Lines read ahead of the node before stdin stops being read (a pipe, or the thread)."""
STDIN_LOW = 128
"""Stdin is read again once the lines read ahead are down to this many."""

REMINDER_IDS = 100
"""Ids written in a ``missing`` reminder (``first`` false, ``waiting`` empty: the core
repeating what is still missing, every sweep); ``ids_total`` then says how many there
are. A member naming thousands of invented ids made each node write a ~700 KB line a
second with ``--fast`` (56 of 62 MB of a soak node's output)."""


class JsonLines:
    """Writes node events as JSON lines (flushed per event: scripts read them live);
    ``rejected`` events a few at a time (:mod:`app.headless.rejected`)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.broken = False
        self.rejected = RejectedLines(self._rejected)

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

    def _rejected(self, ev: Rejected, suppressed: int) -> None:
        obj = event_to_json(ev)
        if suppressed:
            obj["suppressed"] = suppressed
        obj["emitted_ns"] = time.time_ns()
        self.write(obj)

    def event(self, ev: NodeEvent) -> None:
        if isinstance(ev, Rejected):
            self.rejected.offer(ev)
            return
        total = None
        if (isinstance(ev, Missing) and not ev.first and not ev.waiting
                and len(ev.ids) > REMINDER_IDS):  # fmt: skip
            total = len(ev.ids)
            ev = dataclasses.replace(ev, ids=ev.ids[:REMINDER_IDS])
        obj = event_to_json(ev)
        if total is not None:
            obj["ids_total"] = total
        obj["emitted_ns"] = time.time_ns()
        self.write(obj)


def _fatal(out: JsonLines, message: str, code: int) -> int:
    print(f"sdschat join: {message}", file=sys.stderr)
    out.write({"event": "error", "message": message, "fatal": True, "exit": code})
    return code


class NotUtf8:
    """A stdin line that is not UTF-8 (:func:`decode_line`): refused, never sent with
    U+FFFD in place of what the script meant."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NotUtf8) and other.reason == self.reason

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NotUtf8({self.reason!r})"


StdinLine = str | NotUtf8 | None
"""What the stdin readers queue: a line, a line that is not UTF-8, ``None`` at EOF."""


def decode_line(raw: bytes) -> str | NotUtf8:
    """``raw`` as text, or why it is not UTF-8 (the first bad byte and its offset)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return NotUtf8(f"byte 0x{raw[exc.start]:02x} at offset {exc.start} is not UTF-8")


class _PipeLines(asyncio.Protocol):
    """Stdin lines read by the event loop itself (stdin a pipe): no thread, so a line
    reaches the node without a thread waiting for the GIL while the loop is busy (up
    to ``sys.getswitchinterval()``, 5 ms, on a node receiving at 100 msg/s)."""

    def __init__(self, queue: asyncio.Queue[StdinLine]) -> None:
        self.queue = queue
        self.buf = b""
        self.transport: asyncio.BaseTransport | None = None
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # a read pipe (uvloop's is no asyncio.ReadTransport)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if b"\n" not in data:
            return
        *lines, self.buf = self.buf.split(b"\n")
        for raw in lines:
            self.queue.put_nowait(decode_line(raw + b"\n"))
        if self.queue.qsize() >= STDIN_HIGH and self.transport is not None and not self.paused:
            self.paused = True  # backpressure: the writer's pipe fills and it blocks
            self.transport.pause_reading()  # type: ignore[attr-defined]

    def resume_if_room(self) -> None:
        """Read stdin again once the lines read ahead are down to :data:`STDIN_LOW`."""
        if self.paused and self.queue.qsize() <= STDIN_LOW and self.transport is not None:
            self.paused = False
            with contextlib.suppress(RuntimeError):  # already closed (EOF)
                self.transport.resume_reading()  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:  # EOF or a read error
        if self.buf:
            self.queue.put_nowait(decode_line(self.buf))
            self.buf = b""
        self.queue.put_nowait(None)


class _ThreadLines:
    """Stdin read by a daemon thread (a terminal, a file): at most :data:`STDIN_HIGH`
    lines ahead of the node (the thread waits for room)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[StdinLine]):
        self.loop = loop
        self.queue = queue
        self.room = threading.Semaphore(STDIN_HIGH)

    def pump(self) -> None:
        stream = sys.stdin.buffer
        while True:  # ends at EOF
            self.room.acquire()  # released as the node takes lines (resume_if_room)
            try:
                raw = stream.readline()
            except (OSError, ValueError):
                raw = b""
            item = decode_line(raw) if raw else None
            try:
                self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
            except RuntimeError:
                return  # the loop is gone
            if item is None:
                return

    def resume_if_room(self) -> None:
        self.room.release()


class _StdinReader:
    """Where stdin lines come from: :meth:`taken` after each line taken from the queue."""

    def __init__(self, pipe: _PipeLines | None, thread: _ThreadLines | None,
                 transport: asyncio.BaseTransport | None) -> None:  # fmt: skip
        self.pipe, self.thread, self.transport = pipe, thread, transport

    def taken(self) -> None:
        if self.pipe is not None:
            self.pipe.resume_if_room()
        elif self.thread is not None:
            self.thread.resume_if_room()


async def _stdin_lines(
    loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[StdinLine]
) -> asyncio.BaseTransport | None:
    """Feed stdin lines (then ``None`` at EOF) into ``queue`` (see :func:`_stdin_reader`);
    returns the pipe's transport (to close at the end), or None for the thread."""
    return (await _stdin_reader(loop, queue)).transport


async def _stdin_reader(
    loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[StdinLine]
) -> _StdinReader:
    """Feed stdin lines (then ``None`` at EOF) into ``queue``: read by the loop when stdin
    is a pipe (:class:`_PipeLines`), else (a terminal, a file) by a daemon thread; at
    most :data:`STDIN_HIGH` lines ahead of the node either way."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = sys.stdin.fileno()
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            pipe = os.fdopen(os.dup(fd), "rb", buffering=0)  # the transport closes its copy
            try:
                protocol = _PipeLines(queue)
                transport, _ = await loop.connect_read_pipe(lambda: protocol, pipe)
                return _StdinReader(protocol, None, transport)
            except (OSError, ValueError, NotImplementedError):
                pipe.close()
    reader = _ThreadLines(loop, queue)
    threading.Thread(target=reader.pump, name="stdin", daemon=True).start()
    return _StdinReader(None, reader, None)


async def _serve(
    args: argparse.Namespace, settings: NodeSettings, passphrase: bytes | None, out: JsonLines
) -> int:
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    # LAN gossip unless a relay was chosen (net/lan/flags.py); --store or a LAN store.
    store_url: str | tuple[str, ...] | None = getattr(args, "store", None)
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
        wired = wire_transport(args, settings, config=config_file, on_peer=on_lan_peer,
                               on_store=on_lan_store)  # fmt: skip
    except ValueError as exc:
        return _fatal(out, str(exc), EXIT_USAGE)
    transport = wired.transport
    options = node_options(settings, store_url=store_url)
    try:
        node = await Node.open(data_dir, transport, name=settings.name, options=options)
    except DataDirLockedError as exc:
        return _fatal(out, str(exc), EXIT_LOCKED)
    except DataDirCopiedError as exc:
        return _fatal(out, str(exc), EXIT_DEVICE_COPY)
    except (StorageError, IdentityFileError, IdentityMismatchError) as exc:
        # newer schema, damaged file, unusable directory: every storage refusal but the lock
        return _fatal(out, str(exc), EXIT_DATABASE)
    node.subscribe(out.event)
    # every channel the node joins (a direct conversation too) is rejoined next time
    node.subscribe(JoinedKeeper(node, data_dir, lambda why: out.event(NodeError(why))).on_event)
    files = FileWatch(node.store, out.write)  # "file" events: incomplete / complete
    node.subscribe(files.on_event)
    node_box.append(node)
    feed = LineFeed(node, out.event)
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[StdinLine] = asyncio.Queue()
    signalled: list[int] = []

    def on_signal(sig: int) -> None:  # stop now: no draining (lines are in the outbox)
        signalled.append(sig)
        feed.stop()
        lines.put_nowait(None)

    copied: list[DeviceCopied] = []

    def on_copy(ev: NodeEvent) -> None:  # another process holds our key: stop, saying so
        if isinstance(ev, DeviceCopied) and not copied:
            copied.append(ev)
            feed.stop()
            lines.put_nowait(None)

    node.subscribe(on_copy)
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal, sig)
    status = 0
    stdin_pipe: asyncio.BaseTransport | None = None
    try:
        await node.start()
        channels = [args.channel, *[c for c in args.extra_channels if c != args.channel]]
        try:
            first = args.channel
            for ch in channels:  # a new channel's name: one word without '/'
                await check_new_channel(node, ch)
            if node.members_channel(first) is None and not members_file.members_file(
                    data_dir, first).exists():  # fmt: skip
                if getattr(args, "create", False):
                    await node.create_channel(first)
                elif getattr(args, "invite", None):  # bounded: "nobody answered"
                    await redeem(node, args.invite, lambda text: out.event(
                        Info(text, {"invite": "no_answer_yet"})))  # fmt: skip
            keys = {k.channel: k for k in load_joined(data_dir)}
            for ch in channels:  # a channel kept from an earlier run: with its key
                key = keys.get(ch) if passphrase is None else None
                await node.join(ch, passphrase, key=key)
        except PassphraseMismatchError as exc:
            return _fatal(out, str(exc), EXIT_PASSPHRASE)
        except ValueError as exc:
            return _fatal(out, str(exc), EXIT_USAGE)
        except StorageError as exc:  # e.g. a damaged page found only now
            return _fatal(out, str(exc), EXIT_DATABASE)
        await _rejoin(node, data_dir, out)  # every channel of the last run, as the TUI
        start = settings.start
        if start is not None:
            record_start(start)  # the relays and store peers, for the next start
            if start.note:
                out.event(Info(f"using {start.note}", {"restored": start.network_from}))
        invite_relays = wired.invite_relays  # those chosen, none for LAN gossip
        reader = await _stdin_reader(loop, lines)
        stdin_pipe = reader.transport
        front = HeadlessFront(node, out.event, current=args.channel, passphrase=passphrase,
                              data_dir=data_dir, relays=invite_relays, feed=feed,
                              interrupted=lambda: bool(signalled))  # fmt: skip
        for _ in iter(int, 1):  # until EOF, /quit or a signal
            line = await lines.get()
            reader.taken()
            if line is None or signalled or copied:
                break
            front.line += 1
            if isinstance(line, NotUtf8):
                feed.refuse(front.line, front.current, line.reason)
                out.event(NodeError(f"stdin line {front.line}: {line.reason}: not sent "
                                    "(sdschat reads UTF-8 text)"))  # fmt: skip
                continue
            cmd = parse_line(line)
            if cmd is None:
                continue
            await front.run(cmd)  # the command table (app/commands/table.py)
            if front.stopping:
                break
        if copied:  # typed lines stay in the outbox: the copy kept is the one to send them
            status = _fatal(out, copied[0].text, EXIT_DEVICE_COPY)
        elif not signalled:
            unsent = await feed.drain()
            _report_unacknowledged(feed, out)
            if unsent:
                status = EXIT_UNSENT
                shown = ", ".join(
                    f"line {u.number}"
                    + (f" (local_id {u.local_id})" if u.local_id is not None else "")
                    + f": {u.state}"
                    + (f" ({u.error})" if u.error else "")
                    for u in unsent[:20]
                )
                more = f" and {len(unsent) - 20} more" if len(unsent) > 20 else ""
                message = f"{len(unsent)} line(s) read were not sent: {shown}{more}"
                print(f"sdschat join: {message}", file=sys.stderr)
                out.write({
                    "event": "error", "message": message, "fatal": True, "exit": status,
                    "unsent": [
                        {"line": u.number, "local_id": u.local_id, "state": u.state}
                        for u in unsent
                    ],
                })
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        if stdin_pipe is not None:
            stdin_pipe.close()
        await files.close()
        await node.close()
        out.rejected.flush()  # what the last window held back
    return status


def _report_unacknowledged(feed: LineFeed, out: JsonLines) -> None:
    """Lines sent that nobody acknowledged: said (an ``info`` event and stderr), not an
    error: they left, and members may have them (``app.headless.line_feed``)."""
    unacked = feed.unacknowledged()
    if not unacked:
        return
    shown = ", ".join(f"line {u.number}" for u in unacked[:20])
    more = f" and {len(unacked) - 20} more" if len(unacked) > 20 else ""
    message = (f"{len(unacked)} line(s) were sent but nobody acknowledged them: {shown}"
               f"{more}; members may have them: do not type them again (/retry sends "
               "the same messages, which a member who has them drops)")  # fmt: skip
    print(f"sdschat join: {message}", file=sys.stderr)
    out.event(Info(message, {"unacknowledged": [
        {"line": u.number, "local_id": u.local_id, "state": u.state} for u in unacked]}))


async def _command(
    node: Node,
    name: str,
    arg: str,
    current: str | None,
    passphrase: bytes | None,
    out: JsonLines,
    data_dir: Path | None = None,
    *,
    relays: Sequence[str] | str | None = None,
) -> str | None:
    """Run one parsed command (without the stdin feed); returns the (possibly new)
    current channel."""
    urls = [relays] if isinstance(relays, str) else list(relays or ())
    front = HeadlessFront(node, out.event, current=current, passphrase=passphrase,
                          data_dir=data_dir, relays=urls)  # fmt: skip
    await front.run(Command(name, arg))
    return front.current


async def _rejoin(node: Node, data_dir: Path, out: JsonLines) -> None:
    """Join again the channels of ``channels.json`` not joined yet (a supervisor's
    restart of a bot keeps the channels it /join'ed, and its direct conversations),
    each with its stored key (a members channel's are in its members file)."""
    data_dir = Path(data_dir)
    for entry in rejoinable(data_dir, load_remembered(data_dir), node.channels):
        try:
            await node.join(entry.name, None, key=entry.key)
        except (ValueError, StorageError) as exc:
            out.event(NodeError(f"could not rejoin #{entry.name}: {exc}"))


def _passphrase(args: argparse.Namespace) -> bytes | None:
    if getattr(args, "create", False) or getattr(args, "invite", None):
        return None  # a members channel: keys come from its admin, not a passphrase
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    if members_file.members_file(data_dir, args.channel).exists():
        return None  # a members channel joined before: its keys are in the data directory
    if args.passphrase_file:
        return read_passphrase_file(args.passphrase_file)
    if any(k.channel == args.channel for k in load_joined(data_dir)):
        return None  # joined before: its key is kept in channels.json, nothing to ask
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
    try:  # before a passphrase is asked: a --data-dir that cannot work is said first
        prepare_data_dir(Path(args.data_dir).expanduser() if args.data_dir
                         else default_data_dir())  # fmt: skip
    except StorageError as exc:
        return _fatal(out, str(exc), EXIT_DATABASE)
    try:
        passphrase = _passphrase(args)
    except PassphraseFileError as exc:
        return _fatal(out, str(exc), EXIT_PASSPHRASE)
    except (EOFError, KeyboardInterrupt):
        return _fatal(out, "no passphrase entered", EXIT_PASSPHRASE)
    return runner.run(_serve(args, settings, passphrase, out))
