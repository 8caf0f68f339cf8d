"""TUI memory and time to the first message: a chat kept open while 20,000 messages arrive.

A real relay (``sdschat relay``), headless senders (``sdschat join --headless``, their
own processes, fed lines by feeder processes) and the TUI under test in a process of
its own (this file's ``_tui`` mode: ``make_app`` over a ``RelayTransport``, Textual
headless with ``run_test``, 120x40), all on 127.0.0.1. Measured, as the resident
memory (VmRSS) of the TUI's process:

1. ``idle``: the TUI joined an empty #general, nothing received;
2. ``live``: after receiving ``--messages`` (20,000) messages live, at the senders' rate;
3. ``restart``: the same data directory opened again (the 20,000 messages stored),
   idle; and its **time to the first message**: from the process's start (before
   Textual and the node are imported) until the newest message is laid out in the
   log, the first frame that can show it.

The TUI's target (issue 27): under 100 MB whatever it has received.

With ``--own-pending N`` (issue 41 item 8: "under 100 MB whatever is pending") it
measures instead a TUI opened on a data directory holding N own lines nobody ever
acknowledged: a headless bot (``sdschat join --headless``) pipes N lines into #general
alone, exits, and the TUI opens that data directory idle, for this tree and for a
baseline revision (``--baseline``, default ``49fcdad``, main before the resends backed
off; ``git archive`` into a temporary directory, its bot and TUI run from there), side
by side in one run: each tree's bot makes the directory its TUI opens (what a node
saves is what it restores).

Usage::

    .venv/bin/python bench/tui_memory.py                      # 20,000 messages
    .venv/bin/python bench/tui_memory.py --messages 5000 --rate 400
    .venv/bin/python bench/tui_memory.py --log-window 10000    # the core's window of a node
    .venv/bin/python bench/tui_memory.py --own-pending 5000    # 5,000 own lines unacknowledged

Where the memory is (each slows the TUI down or prints a lot, on stderr):
``TUI_MEMORY_TRACE=1`` (tracemalloc: what grew in the second half, or from idle with
``TUI_MEMORY_TRACE_FROM=idle``, or from the start with ``=start``; ``TUI_MEMORY_TRACE_TOP=40``
lines), and
``TUI_MEMORY_PROBE=1`` (resident memory per mapping, large containers, what a full
collection and ``malloc_trim`` give back, pymalloc's statistics).

Every child is stopped by its PID; nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # the process's start, for the time to the first message

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_MB = 100.0


def rss_mb(pid: int | None = None) -> float:
    """Resident memory of ``pid`` (this process by default), in MB (10^6 bytes)."""
    status = Path(f"/proc/{pid or os.getpid()}/status").read_text()
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError("no VmRSS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # bounded
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError("relay did not start")


# ----------------------------------------------------------------------------- the TUI


def probe(label: str, objs: dict[str, Any]) -> None:
    """``TUI_MEMORY_PROBE=1``: where the resident memory is, on stderr: resident kB per
    mapping (``/proc/self/smaps``: anonymous, the brk heap, libraries), and the
    containers of more than 200 items under the node and the TUI's model."""
    kinds: dict[str, int] = {}
    name = "?"
    regions: list[str] = []
    size = 0
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and ":" not in head[0]:
            name = head[5].rsplit("/", 1)[-1] if len(head) > 5 else "[anon]"
        elif head[0] == "Size:":
            size = int(head[1])
        elif head[0] == "Rss:":
            kinds[name] = kinds.get(name, 0) + int(head[1])
            if name == "[anon]" and int(head[1]) > 1024:
                regions.append(f"{int(head[1]) // 1024}/{size // 1024}M")
    top = sorted(kinds.items(), key=lambda kv: -kv[1])[:4]
    threads = len(list(Path("/proc/self/task").iterdir()))
    print(f"probe {label}: {threads} threads, anon regions >1M (rss/size): {regions}",
          file=sys.stderr)
    sizes: list[str] = []

    def attrs(obj: Any) -> list[tuple[str, Any]]:
        out = list(vars(obj).items()) if hasattr(obj, "__dict__") else []
        for klass in type(obj).__mro__:
            for slot in getattr(klass, "__slots__", ()):
                if hasattr(obj, slot):
                    out.append((slot, getattr(obj, slot)))
        return out

    seen: set[int] = set()

    def walk(path: str, obj: Any, depth: int) -> None:
        if id(obj) in seen or depth > 5:
            return
        seen.add(id(obj))
        if isinstance(obj, (dict, list, set, tuple)) or hasattr(obj, "__len__"):
            try:
                n = len(obj)
            except TypeError:
                n = 0
            if n > 200:
                sizes.append(f"{path}={n}")
            if isinstance(obj, dict) and n < 50:
                for k, v in obj.items():
                    walk(f"{path}[{str(k)[:12]}]", v, depth + 1)
            return
        if type(obj).__module__.split(".")[0] in ("app", "sds", "net", "storage"):
            for attr, val in attrs(obj):
                walk(f"{path}.{attr}", val, depth + 1)

    for oname, obj in objs.items():
        walk(oname, obj, 0)
    print(f"probe {label}: rss {rss_mb():.1f} MB, smaps kB {top}", file=sys.stderr)
    print(f"probe {label}: containers {' '.join(sizes)}", file=sys.stderr, flush=True)


async def run_tui(data_dir: Path, relay: str, expect: int, log_window: int = 0) -> None:
    """Child: the TUI; JSON lines on stdout (ready, progress, done); ends on stdin EOF."""
    from app.node.runtime import NodeOptions
    from app.node.transport import RelayTransport
    from app.tui import make_app
    from app.tui.widgets.message_log import MessageLog

    def say(**obj: Any) -> None:
        print(json.dumps(obj), flush=True)

    import sds
    from app.tui.run import tui_protocol

    # the SDS core's settings as `sdschat join` gives the TUI (its log window: 2,000
    # ids), or with --log-window N as if the config file's [protocol] set it
    trace = os.environ.get("TUI_MEMORY_TRACE")  # where the growth is (slows it down)
    # growth from the second half only (default), from idle (TUI_MEMORY_TRACE_FROM=idle)
    # or from the start, the opening included (TUI_MEMORY_TRACE_FROM=start)
    trace_from = os.environ.get("TUI_MEMORY_TRACE_FROM", "half")
    trace_half = trace_from == "half"
    if trace and trace_from == "start":
        import tracemalloc

        tracemalloc.start(int(trace))
        before = tracemalloc.take_snapshot()
    protocol = {"log_window": log_window} if log_window else {}
    config = tui_protocol(sds.Config(), protocol).with_changes(**protocol)
    options = NodeOptions(config=config)
    app = make_app(data_dir, RelayTransport(relay), name="alice", options=options,
                   transport_label="relay", remember_state=False)  # fmt: skip
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.ready.wait(), 300)
        log = app.chat.query_one(MessageLog)
        first = None
        for _ in range(3000):  # bounded: until a row is laid out (or there is none)
            view = log.view
            if view is not None and view.loaded and (not view.rows or log._offsets):
                first = time.perf_counter() - _T0 if view.rows else None
                break
            await pilot.pause()
        if trace and trace_from != "start":
            import tracemalloc

            tracemalloc.start(int(trace))
            before = tracemalloc.take_snapshot()
        if os.environ.get("TUI_MEMORY_PROBE"):
            probe("ready", {"node": app.node, "model": app.model})
        say(event="ready", rss_mb=rss_mb(), first_message_s=first,
            rows=len(log.view.rows) if log.view else 0)  # fmt: skip
        node = app.node
        assert node is not None
        got = 0
        last = time.monotonic()
        while expect and got < expect:  # bounded by the stall check below
            await asyncio.sleep(1.0)
            now_got = node.counters["delivered"]
            if now_got != got:
                if trace and trace_half and got < expect // 2 <= now_got:  # window full by then
                    before = tracemalloc.take_snapshot()
                got, last = now_got, time.monotonic()
                say(event="progress", received=got, rss_mb=rss_mb())
            elif time.monotonic() - last > 60:  # some never came: report what did
                say(event="progress", received=got, rss_mb=rss_mb(), stalled=True)
                break
        await pilot.pause()
        if trace:
            import gc

            gc.collect()
            group = "lineno" if trace == "1" else "traceback"
            diff = tracemalloc.take_snapshot().compare_to(before, group)
            total = sum(d.size_diff for d in diff) / 1e6
            print(f"traced Python allocations grew by {total:.1f} MB", file=sys.stderr)
            for stat in diff[:int(os.environ.get("TUI_MEMORY_TRACE_TOP", "15"))]:
                print(stat, file=sys.stderr)
                for line in stat.traceback.format()[-int(trace) * 2 :]:
                    print("   ", line, file=sys.stderr)
        if os.environ.get("TUI_MEMORY_PROBE"):  # what a full pass and a trim give back
            import ctypes
            import gc

            before_mb = rss_mb()
            gc.unfreeze()
            found = gc.collect()
            gc.freeze()
            after_gc = rss_mb()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            print(f"probe: {before_mb:.1f} MB; full collection ({found} unreachable) "
                  f"{after_gc:.1f} MB; malloc_trim {rss_mb():.1f} MB", file=sys.stderr)
            probe("done", {"node": app.node, "model": app.model})
            sys._debugmallocstats()  # pymalloc's arenas and blocks (C stderr)
        say(event="done", received=got, rss_mb=rss_mb(),
            window_rows=len(log.view.rows) if log.view else 0)  # fmt: skip
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        await reader.read()  # until the parent closes stdin
        await app.action_quit()


# ----------------------------------------------------------------------------- the run


class Tui:
    def __init__(
        self, data_dir: Path, relay: str, expect: int, log_window: int = 0, tree: Path = ROOT
    ) -> None:
        script = tree / "bench" / Path(__file__).name
        self.proc = subprocess.Popen(
            [sys.executable, str(script), "_tui", str(data_dir), relay, str(expect),
             str(log_window)],
            cwd=tree, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=None if os.environ.get("TUI_MEMORY_TRACE") or os.environ.get("TUI_MEMORY_PROBE")
            else subprocess.DEVNULL,
        )  # fmt: skip

    def next(self, event: str, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # bounded (a line per second at least)
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the TUI exited before {event!r}")
            obj = json.loads(line)
            if obj["event"] == "progress":
                print(f"  ... {obj['received']:>6} received, {obj['rss_mb']:.1f} MB", flush=True)
            if obj["event"] == event:
                return dict(obj)
        raise RuntimeError(f"no {event!r} in {timeout} s")

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def feeder(rate: float, count: int, tag: str) -> int:
    """Child: print ``count`` lines at ``rate`` per second, then wait for the last to go."""
    start = time.perf_counter()
    for i in range(count):  # bounded
        pause = start + i / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        sys.stdout.write(f"{tag} message {i}: the relay patch is up, have a look\n")
        sys.stdout.flush()
    time.sleep(600)  # stdin stays open until the run ends (the parent stops us by PID)
    return 0


def _bot(url: str, data_dir: Path, lines: int, tree: Path) -> None:
    """A headless bot of ``tree`` pipes ``lines`` lines into #general alone, and exits."""
    bot = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "join", "general", "--headless", "--relay", url,
         "--data-dir", str(data_dir), "--name", "alice", "--no-config"],
        cwd=tree, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert bot.stdin is not None
    t = time.perf_counter()
    for i in range(lines):  # blocks while the bot holds stdin
        bot.stdin.write(f"bot line {i}: the nightly build is green\n".encode())
    bot.stdin.close()
    code = bot.wait(timeout=1_800)
    print(f"{tree.name}'s bot piped {lines:,} lines alone in {time.perf_counter() - t:.0f} s "
          f"(exit {code})", flush=True)  # fmt: skip


def own_pending(url: str, tmp: Path, lines: int, baseline: str) -> int:
    """``--own-pending``: the TUI on a data directory with ``lines`` own lines nobody
    acknowledged, this tree and ``baseline`` side by side (module docstring)."""
    import shutil

    base = tmp / "baseline"
    base.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", baseline, "app", "net", "sds", "storage",
         "pipeline"], capture_output=True, check=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    (base / "bench").mkdir()
    for name in (Path(__file__).name, "machine.py"):
        shutil.copy(ROOT / "bench" / name, base / "bench" / name)
    rows: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for label, tree in ((baseline, base), ("this tree", ROOT)):
        # each tree's own bot makes its data directory: what it saves is what it restores
        data_dir = tmp / f"alice-{len(rows)}"
        _bot(url, data_dir, lines, tree)
        tui = Tui(data_dir, url, 0, tree=tree)
        try:
            ready = tui.next("ready", 300)
            done = tui.next("done", 60)
        finally:
            tui.stop()
        rows.append((label, ready, done))
    print(f"\nTUI process memory (VmRSS), opened on {lines:,} own unacknowledged lines")
    for label, ready, done in rows:
        print(f"  {label:<10} at ready {ready['rss_mb']:6.1f} MB, settled "
              f"{done['rss_mb']:6.1f} MB (window {done['window_rows']} rows)")  # fmt: skip
    worst = max(d["rss_mb"] for _, _, d in rows[1:])
    print(f"  target: under {TARGET_MB:.0f} MB: {'met' if worst < TARGET_MB else 'NOT met'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_tui":
        window = int(sys.argv[5]) if len(sys.argv) > 5 else 0
        asyncio.run(run_tui(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), window))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "_feed":
        return feeder(float(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=300.0, help="messages/s, all senders")
    parser.add_argument("--senders", type=int, default=2)
    parser.add_argument("--log-window", type=int, default=0,
                        help="the TUI's SDS core log window (default: the TUI's, 2,000)")
    parser.add_argument("--own-pending", type=int, default=0, metavar="N",
                        help="instead: the TUI on N own unacknowledged lines, both trees")
    parser.add_argument("--baseline", default="49fcdad",
                        help="--own-pending's revision to compare with (default 49fcdad)")
    args = parser.parse_args(argv)
    from machine import describe

    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load", os.getloadavg())
    print(describe())
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    tmp = tempfile.mkdtemp(prefix="sdschat-bench-mem-")
    procs: list[subprocess.Popen[bytes]] = []
    tui: Tui | None = None
    try:
        relay = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "relay", "--host", "127.0.0.1", "--port", str(port),
             "--rate", "5000", "--burst", "10000", "--queue", "8192", "--log-format", "text",
             "--stats-interval", "0"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(relay)
        wait_port(port, 20)
        if args.own_pending:
            return own_pending(url, Path(tmp), args.own_pending, args.baseline)
        data_dir = Path(tmp) / "alice"
        tui = Tui(data_dir, url, args.messages, args.log_window)
        idle = tui.next("ready", 300)
        per = args.messages // args.senders
        for k in range(args.senders):
            name = f"sender{k}"
            feed = subprocess.Popen(
                [sys.executable, __file__, "_feed", str(args.rate / args.senders), str(per), name],
                cwd=ROOT, stdout=subprocess.PIPE,
            )  # fmt: skip
            node = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "join", "general", "--headless", "--relay", url,
                 "--data-dir", f"{tmp}/{name}", "--name", name, "--no-config"],
                cwd=ROOT, stdin=feed.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            assert feed.stdout is not None
            feed.stdout.close()
            procs += [feed, node]
        t = time.perf_counter()
        live = tui.next("done", 60 + 4 * args.messages / args.rate)
        took = time.perf_counter() - t
        tui.stop()
        tui = None
        tui = Tui(data_dir, url, 0, args.log_window)
        restart = tui.next("ready", 300)
        tui.next("done", 60)
        tui.stop()
        tui = None
    finally:
        if tui is not None:
            tui.stop()
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
    n = live["received"]
    print(f"\nTUI process memory (VmRSS), #general, {args.senders} senders at "
          f"{args.rate:.0f} msg/s")  # fmt: skip
    print(f"  idle, nothing received:              {idle['rss_mb']:6.1f} MB")
    print(f"  after receiving {n:,} live ({took:.0f} s):  {live['rss_mb']:6.1f} MB "
          f"(window {live['window_rows']} rows)")  # fmt: skip
    print(f"  restarted with them stored, idle:    {restart['rss_mb']:6.1f} MB")
    first = restart["first_message_s"]
    shown = f"{first:.2f} s from process start" if first is not None else "none shown"
    print(f"  time to the first message after a restart ({n:,} stored): {shown}")
    worst = max(idle["rss_mb"], live["rss_mb"], restart["rss_mb"])
    print(f"  target: under {TARGET_MB:.0f} MB: {'met' if worst < TARGET_MB else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
