"""TUI benchmarks: opening a channel with 100,000 stored messages; typing while 200 msg/s arrive.

1. ``open``: a data directory whose #general holds ``--messages`` (100,000)
   stored messages. Timed: ``make_app(...)`` started headless (Textual
   ``run_test``) until the app is ready and the newest page is drawn: the node
   opens the store, joins (restores and reconciles the protocol state), the
   log pages in its newest 200 rows and renders them. Twice: the *first* open
   (no saved protocol state: the node rebuilds it from the log) and the
   *usual* open (state saved by the previous run). Then scrolling: PgUp
   through 2,000 rows (older pages come from SQLite as the view reaches the
   top of the window): time per PgUp keystroke until the frame is written,
   and the window size (the app never holds more than 1,200 rows).

2. ``typing``: a real relay (``sdschat relay``) and two headless participants
   (``sdschat join --headless``, separate processes) each sending
   ``--rate``/2 messages per second to #general, where the TUI (this process,
   over the relay) is connected. While they send, a key is pressed every 50 ms
   and timed from the key event to the first frame the terminal driver writes
   that shows it (p50/p95/p99/max). Messages the TUI received per second are
   reported alongside, to show the load was there.

Usage::

    .venv/bin/python bench/tui_bench.py                   # both, README figures
    .venv/bin/python bench/tui_bench.py open --messages 20000
    .venv/bin/python bench/tui_bench.py typing --rate 200 --seconds 10

Everything listens on 127.0.0.1 only; every child is stopped by its PID.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import operator
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402

from app.chat.lines import encode_content  # noqa: E402
from app.node.runtime import NodeOptions  # noqa: E402
from app.node.transport import MemoryHub, RelayTransport  # noqa: E402
from app.tui import SdsChatApp, make_app  # noqa: E402
from app.tui.widgets.message_log import MessageLog  # noqa: E402
from net.channel_key import DEFAULT_KDF, derive_channel_key  # noqa: E402
from storage import Store, StoredMessage  # noqa: E402

SIZE = (120, 40)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


class FrameClock:
    """When frames are produced: every screen update handed to ``App._display``.

    Headless Textual skips writing to the terminal, so the hook also turns each
    update into terminal bytes (``render_segments``), the work a real terminal
    frame costs, and records the time after that, with what ``probe()`` said
    then (e.g. the input line's text: the frame shows that text).
    """

    def __init__(self, app: SdsChatApp, probe: Callable[[], str] = lambda: "") -> None:
        from textual._compositor import CompositorUpdate

        self.frames: list[tuple[float, str]] = []
        original = app._display

        def display(screen: Any, renderable: Any) -> None:
            original(screen, renderable)
            if isinstance(renderable, CompositorUpdate):
                renderable.render_segments(app.console)
                self.frames.append((time.perf_counter(), probe()))

        app._display = display  # type: ignore[method-assign]

    def first_after(self, t: float, shows: Callable[[str], bool] = lambda _: True) -> float | None:
        """Time of the first frame at or after ``t`` whose probe satisfies ``shows``."""
        for f, seen in self.frames:
            if f >= t and shows(seen):
                return f
        return None


# ----------------------------------------------------------------------------- open


async def seed(data_dir: Path, n: int) -> None:
    key = derive_channel_key("general", None, params=DEFAULT_KDF)
    names = ("dave", "erin", "frank", "grace")
    rng = random.Random(1)
    async with await Store.open(data_dir) as store:
        await store.join_channel("general", key.topic, is_public=True)
        batch: list[StoredMessage] = []
        for i in range(n):
            text = " ".join(rng.choice(("relay", "bloom", "sync", "lamport", "repair", "ok"))
                            for _ in range(rng.randint(3, 30)))  # fmt: skip
            batch.append(
                StoredMessage(
                    channel="general",
                    message_id=f"{i:064x}",
                    sender_id=f"{i % 4:032x}",
                    lamport=1_700_000_000_000 + i,
                    content=encode_content(text, names[i % 4]),
                    delivered_at=1_700_000_000_000 + i,
                )
            )
            if len(batch) == 5000:
                await store.insert_messages(batch)
                batch = []
        if batch:
            await store.insert_messages(batch)


async def time_open(data_dir: Path) -> dict[str, Any]:
    app = make_app(data_dir, MemoryHub().transport(), remember_state=False)
    t0 = time.perf_counter()
    out: dict[str, Any] = {}
    async with app.run_test(size=SIZE) as pilot:
        log = app.chat.query_one(MessageLog)
        clock = FrameClock(
            app,
            lambda: f"{log.scroll_y}/{log.view.rows[0].key if log.view and log.view.rows else ''}",
        )
        await asyncio.wait_for(app.ready.wait(), 300)
        t_ready = time.perf_counter()
        for _ in range(200):  # bounded: until the newest rows are laid out
            await pilot.pause()
            if log.view is not None and log.view.rows and log._offsets:
                break
        frame = clock.first_after(t_ready, lambda seen: not seen.endswith("/"))
        out["open_s"] = (frame or time.perf_counter()) - t0
        out["ready_s"] = t_ready - t0
        # scrolling back through 2,000 rows with PgUp
        times: list[float] = []
        view = log.view
        assert view is not None
        oldest = view.rows[0].key
        pages = 0
        for _ in range(3000):  # bounded
            before = clock.frames[-1][1] if clock.frames else ""
            t = time.perf_counter()
            await pilot.press("pageup")
            f = None
            for _ in range(2000):  # bounded: until a frame shows the scroll
                f = clock.first_after(t, functools.partial(operator.ne, before))
                if f is not None:
                    break
                await asyncio.sleep(0.001)
            times.append((f or time.perf_counter()) - t)
            if view.rows[0].key != oldest:
                oldest = view.rows[0].key
                pages += 1
            if pages >= 10 or (log.scroll_y == 0 and not view.more_before):
                break
        out["pgup_n"] = len(times)
        out["pgup_p50_ms"] = 1000 * statistics.median(times)
        out["pgup_p99_ms"] = 1000 * pct(times, 0.99)
        out["pgup_max_ms"] = 1000 * max(times)
        out["pages_in"] = pages
        out["window_rows"] = len(view.rows)
        await app.action_quit()
    return out


async def bench_open(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
        data_dir = Path(tmp) / "alice"
        t = time.perf_counter()
        await seed(data_dir, n)
        print(f"seeded {n:,} messages in {time.perf_counter() - t:.1f} s")
        first = await time_open(data_dir)
        usual = await time_open(data_dir)
    t = time.perf_counter()
    derive_channel_key("general", None, params=DEFAULT_KDF)
    kdf_ms = (time.perf_counter() - t) * 1000
    print(f"\nopen #general with {n:,} stored messages (until the newest page is drawn)")
    print(f"  (of which the channel key derivation, Argon2id 64 MiB: {kdf_ms:.0f} ms)")
    print(f"  first open (state rebuilt from the log): {first['open_s'] * 1000:7.0f} ms")
    print(f"  usual open (saved protocol state):       {usual['open_s'] * 1000:7.0f} ms")
    u = usual
    print(
        f"  PgUp x{u['pgup_n']} through {u['pages_in']} pages paged in from SQLite: "
        f"p50 {u['pgup_p50_ms']:.1f} ms, p99 {u['pgup_p99_ms']:.1f} ms, "
        f"max {u['pgup_max_ms']:.1f} ms per keystroke; window {u['window_rows']} rows"
    )


# ----------------------------------------------------------------------------- typing


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


def feed(rate: float, seconds: float, at: float, tag: str) -> int:
    """Child process: from wall time ``at``, print ``rate`` lines per second for ``seconds``."""
    time.sleep(max(0.0, at - time.time()))
    start = time.perf_counter()
    out = sys.stdout
    for i in range(int(rate * seconds)):  # bounded
        pause = start + i / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        out.write(f"{tag} message {i} with a few words of text\n")
        out.flush()
    time.sleep(3)  # let the last ones go out before stdin closes
    return 0


async def bench_typing(rate: float, seconds: float) -> None:
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes] | asyncio.subprocess.Process] = []
    tmp = tempfile.mkdtemp(prefix="sdschat-bench-")
    relay = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "relay", "--host", "127.0.0.1", "--port", str(port),
         "--rate", "5000", "--burst", "5000", "--log-format", "text"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    procs.append(relay)
    try:
        wait_port(port, 20)
        # Each sender: a feeder process piping lines into a headless node (own processes,
        # so this one does nothing but the TUI). They start sending after `delay` s.
        delay = 8.0
        go_at = time.time() + delay
        for name in ("bob", "carol"):
            feeder = subprocess.Popen(
                [sys.executable, __file__, "_feed", str(rate / 2), str(seconds + 2), str(go_at),
                 name],
                cwd=ROOT, stdout=subprocess.PIPE,
            )  # fmt: skip
            node = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "join", "general", "--headless", "--relay", url,
                 "--data-dir", f"{tmp}/{name}", "--name", name],
                cwd=ROOT, stdin=feeder.stdout, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            assert feeder.stdout is not None
            feeder.stdout.close()
            procs += [feeder, node]
        t_spawn = time.perf_counter()
        app = make_app(
            Path(tmp) / "alice",
            RelayTransport(url),
            name="alice",
            options=NodeOptions(),
            transport_label="relay",
            remember_state=False,
        )
        async with app.run_test(size=SIZE):
            await asyncio.wait_for(app.ready.wait(), 120)
            counted = app.node.counters["delivered"]  # type: ignore[union-attr]
            await asyncio.sleep(max(0.0, t_spawn + delay + 1.0 - time.perf_counter()))
            if rate > 0 and app.node.counters["delivered"] == counted:  # type: ignore[union-attr]
                raise RuntimeError("the senders did not start")
            box = app.chat.query_one("#input")
            clock = FrameClock(app, lambda: box.value)  # type: ignore[attr-defined]
            lat: list[float] = []
            t_start = time.perf_counter()
            counted = app.node.counters["delivered"]  # type: ignore[union-attr]
            i = 0
            profiler = None
            if os.environ.get("TUI_BENCH_PROFILE"):
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            while time.perf_counter() - t_start < seconds:  # bounded by the duration
                ch = "abcdefghij"[i % 10]
                i += 1
                t = time.perf_counter()
                app.post_message(events.Key(ch, ch))  # what the terminal driver posts
                shown = None
                for _ in range(2000):  # bounded: until a frame shows the key
                    shown = clock.first_after(t, operator.methodcaller("endswith", ch))
                    if shown is not None:
                        break
                    await asyncio.sleep(0.001)
                if shown is not None:
                    lat.append(shown - t)
                if len(box.value) > 60:  # type: ignore[attr-defined]
                    box.value = ""  # type: ignore[attr-defined]
                await asyncio.sleep(max(0.0, 0.05 - (time.perf_counter() - t)))
            elapsed = time.perf_counter() - t_start
            if profiler is not None:
                import pstats

                profiler.disable()
                target = os.environ["TUI_BENCH_PROFILE"]
                if target.endswith(".prof"):  # TUI_BENCH_PROFILE=out.prof: keep it for pstats
                    profiler.dump_stats(target)
                pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
            got = app.node.counters["delivered"] - counted  # type: ignore[union-attr]
            await app.action_quit()
        print(f"\ntyping while {rate:.0f} msg/s arrive ({seconds:.0f} s, relay + 2 headless "
              "senders in their own processes)")  # fmt: skip
        print(f"  the TUI received {got} messages while typing ({got / elapsed:.0f}/s)")
        print(
            f"  keystroke -> frame written: n={len(lat)}, "
            f"p50 {1000 * statistics.median(lat):.1f} ms,"
            f" p95 {1000 * pct(lat, 0.95):.1f} ms, p99 {1000 * pct(lat, 0.99):.1f} ms, "
            f"max {1000 * max(lat):.1f} ms"
        )

    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                if isinstance(p, subprocess.Popen):
                    p.send_signal(signal.SIGTERM)
                else:
                    p.terminate()
        for p in procs:
            with contextlib.suppress(Exception):
                if isinstance(p, subprocess.Popen):
                    p.wait(timeout=10)
                else:
                    await asyncio.wait_for(p.wait(), 10)
        for p in procs:  # anything left: by its PID
            with contextlib.suppress(ProcessLookupError, OSError):
                os.kill(p.pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "_feed":
        return feed(float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    parser.add_argument("which", nargs="?", choices=("open", "typing", "all"), default="all")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    runs: list[Callable[[], Any]] = []
    if args.which in ("open", "all"):
        runs.append(lambda: bench_open(args.messages))
    if args.which in ("typing", "all"):
        runs.append(lambda: bench_typing(args.rate, args.seconds))
    for run in runs:
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
