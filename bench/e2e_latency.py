"""End-to-end latency: a line handed to one headless node until it is delivered by the others.

Real processes on 127.0.0.1: one ``sdschat relay`` and ``--nodes`` (10) headless
nodes (``sdschat join <channel> --headless --relay ws://127.0.0.1:PORT``) with
the DEFAULT protocol timings (no ``--fast``), each with an ephemeral data
directory under a temporary directory. After a warm-up (every node sends a few
messages and every other node must deliver them), each rate runs for
``--seconds``: message ``k`` is due at ``t0 + k / rate`` and goes to node
``k mod nodes`` (the aggregate rate is spread evenly over the senders).

Times (all processes share one machine, hence one wall clock):

* send: ``time.time_ns()`` in this process immediately before the line is
  written to the sender's stdin (so the node's stdin reading, the outbox
  fsync, the core, the round's commit and the publish all count);
* delivery: the receiver's ``emitted_ns`` (wall-clock ns at which its headless
  mode wrote the ``delivered`` event, i.e. after the message was committed to
  its SQLite log); ``ts`` (seconds, float) when an older node lacks it.

Latency = delivery - send, over every (message, receiver) pair. Pairs that
were not delivered by the end of the drain are counted (delivered/expected),
not guessed. A breakdown of medians splits the path at the sender's ``own``
events: ``queued`` (the line is durable in its outbox) and ``logged`` (its
round, message and envelope included, is committed; the envelope is published
right after). Since a typed line is recorded with its message in one commit
(``Batch.record_typed``), both are emitted after that commit and differ by
microseconds; a previous version shows the two commits apart.

Profiles (``--profile``): ``default`` runs the nodes with ``sds.Config()``'s
sizes (adaptive causal history, floor 5, cap 30; filter 250 / 0.001: ~1-3 KB
envelopes), ``waku`` with ``sdschat join --profile waku`` (js-waku's sizes:
200-id history, 10,000-entry filter, ~45 KB envelopes), ``both`` (the default)
runs each, one after the other, in the same run. ``--compare DIR`` runs another
checkout's ``sdschat`` (e.g. a ``git worktree`` of the previous commit; its
processes start with that directory as their working directory) alternately
with this one: for each of ``--rounds`` rounds, each profile, each version
(order alternating), a fresh relay and fresh nodes. Besides each node's total
CPU, the CPU of its threads is read from ``/proc`` (the event loop's main
thread vs SQLite's and the checkpointer's threads), per delivered message.

Usage::

    .venv/bin/python bench/e2e_latency.py            # 100, 200, 400 msg/s; default and waku
    .venv/bin/python bench/e2e_latency.py --rates 100 --seconds 10 --profile default --json
    .venv/bin/python bench/e2e_latency.py --compare /tmp/previous --rounds 2

Channel kinds: ``default`` and ``waku`` join a public channel (no passphrase);
``--profile passphrase`` joins with ``--passphrase-file`` (a passphrase channel),
``--profile members`` makes a members channel as people do (``n0`` runs ``join
CHANNEL --create`` and says ``/invite`` once per other node, which joins with
``join --invite CODE``: the outer epoch key and a Megolm session per sender, shared
by sealed boxes), and ``--profile channels`` runs passphrase then members in each
round (alternating the order over ``--rounds``), both in the default sizes: the
per-message cost of a members channel side by side with a passphrase channel.

Floor mode (``--floor``): in the same run, before each profile's nodes, the same
number of processes on a fresh relay of the same code pass bare bytes: each reads
a line from stdin, appends it to a file with one ``fsync`` (a line is durable
before it is sent), wraps it in an Envelope protobuf without encryption or
signature (the relay routes by its topic) and publishes it with the project's
``RelayClient``; a received envelope is printed as a ``delivered`` event. No SDS,
no crypto, no SQLite. sdschat's p50 and p99 are then reported as multiples of the
floor's at each rate (``floor x``): a ratio means something across machines,
where an absolute latency does not.

CPU split (``--cpu-split``; every profile but the floor): every node
runs with its event loop's CPU time (``time.thread_time``) counted around each
stage of the path (envelope open, Ed25519, the SDS core, node events, event-log
rows, SQLite statements and commits, event output, websockets' frames), each
exclusive of the stages it calls, snapshotted at the start and end of each rate;
printed per delivery with "the rest" (asyncio, the reader task, the inbox). The
counters cost ~1.8 us per counted call (~25 calls, ~45 us per delivery, quiet
core): measure ratios without them.
docs/benchmarks.md ("Latency as a ratio to its floor") has the breakdown and the
side-by-side figures.

Measured 2026-11-27 07:29 UTC on the shared 2-core machine, **loaded** (load
average 9.0 -> 9.4; calibration Python loop 89 ms, SHA-256 of 46 KB 42 us, SQLite
52 KB row 231 us), ``--profile default --rates 100 400 --seconds 5 --floor``:
at 100 msg/s sdschat p50 41.9 ms / p99 330 ms against the floor's 7.6 / 116 ms
(**5.5x / 2.8x**); at 400 msg/s 610 / 1,910 ms against 7.2 / 83 ms (85x / 23x:
the nodes do not keep up on this loaded machine, 6.2 CPU s in 6.7 s of wall time).
Where the rest goes: the nodes' event-loop threads spend 729 us per delivery at
100 msg/s (274 us at 400) against the floor's 202 us (142 us), and a line takes
20 ms from stdin to durable in the outbox at 100 msg/s (the floor's fsync: 5 ms),
243 ms at 400 (queueing behind the loop). The targets (3x at p50, 5x at p99) are
not met at p50; not measured on a quiet machine.

Everything is bounded (every wait has a deadline, loops are bounded in count)
and every child is killed by its PID at the end, also on error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import calibrate, describe

ROOT = Path(__file__).resolve().parents[1]
CHANNEL = "e2e-bench"
#: The floor nodes' routing topic (16 bytes, like a channel's).
FLOOR_TOPIC = b"e2e-latency-flr\x00"


def floor_node(url: str, data_dir: Path, name: str) -> int:
    """A floor node (``--floor-node``): stdin lines -> fsync -> relay; relay -> stdout."""
    import asyncio

    sys.path.insert(0, str(ROOT))
    from net.envelope_pb2 import Envelope
    from net.relay_client import RelayClient, StateChange

    out = sys.stdout

    def emit(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        out.flush()

    def on_envelope(data: bytes) -> None:
        text = Envelope.FromString(data).ciphertext.decode()
        emit({"event": "delivered", "text": text, "emitted_ns": time.time_ns()})

    def on_state(change: StateChange) -> None:
        emit({"event": "connection", "state": change.state.value})

    async def run() -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / "lines", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        client = RelayClient(url, [FLOOR_TOPIC], on_envelope, on_state=on_state)
        client.start()
        emit({"event": "channel", "joined": True, "name": name})
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        n = 0
        try:
            while True:  # ends at EOF
                line = await reader.readline()
                if not line:
                    break
                os.write(fd, line)
                os.fsync(fd)
                text = line.rstrip(b"\n")
                emit({"event": "own", "state": "queued", "text": text.decode(),
                      "emitted_ns": time.time_ns()})
                n += 1
                env = Envelope(version=2, topic=FLOOR_TOPIC, nonce=n.to_bytes(12, "big"),
                               ciphertext=text)
                await client.publish(env.SerializeToString())
        finally:
            await client.close()
            os.close(fd)

    asyncio.run(run())
    return 0


class Child:
    """A child process; a reader thread keeps its stdout lines with their arrival time."""

    def __init__(
        self, argv: list[str], name: str, log_dir: Path, *, stdin: bool, cwd: Path = ROOT
    ) -> None:
        self.name = name
        self.stderr_path = log_dir / f"{name}.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.popen = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.pid = self.popen.pid
        self.lines: list[bytes] = []
        self.lock = threading.Lock()
        self.tag = b"\x00"  # lines carrying the current run's tag are counted
        self.tagged_delivered = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        out = self.popen.stdout
        assert out is not None
        for raw in out:  # ends at EOF (process exit)
            with self.lock:
                self.lines.append(raw)
                if b'"event":"delivered"' in raw and self.tag in raw:
                    self.tagged_delivered += 1

    def set_tag(self, tag: bytes) -> None:
        with self.lock:
            self.tag = tag
            self.tagged_delivered = 0

    def events(self, start: int = 0) -> list[dict[str, Any]]:
        with self.lock:
            raw = self.lines[start:]
        out = []
        for line in raw:
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
        return out

    def n_lines(self) -> int:
        with self.lock:
            return len(self.lines)

    def write(self, data: bytes) -> None:
        stdin = self.popen.stdin
        assert stdin is not None
        stdin.write(data)
        stdin.flush()

    def cpu_s(self) -> float:
        """User + system CPU seconds of the child so far (from /proc)."""
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return 0.0

    def thread_cpu_s(self) -> tuple[float, float]:
        """(main thread, all other threads) CPU seconds so far, from /proc."""
        main = other = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                    t = (int(fields[11]) + int(fields[12])) / tick
                    if int(task.name) == self.pid:
                        main += t
                    else:
                        other += t
        return main, other

    def stop(self, grace: float = 0.0) -> None:
        """Close stdin, wait up to ``grace`` s, then kill by PID; release pipes and files."""
        if grace > 0 and self.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(grace)
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)
        self._reader.join(5)
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()

    def tail(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-2000:]


def start_relay(children: list[Child], log_dir: Path, code: Path = ROOT) -> str:
    argv = [sys.executable, "-m", "app.cli", "relay", "--host", "127.0.0.1", "--port", "0",
            "--stats-interval", "0"]  # fmt: skip
    relay = Child(argv, "relay", log_dir, stdin=False, cwd=code)
    children.append(relay)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # bounded
        for line in relay.stderr_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if rec.get("event") == "relay_listening":
                    return f"ws://127.0.0.1:{int(rec['port'])}"
        if relay.popen.poll() is not None:
            raise RuntimeError(f"relay exited:\n{relay.tail()}")
        time.sleep(0.05)
    raise RuntimeError("relay did not report its port")


CPU_PROFILE = """
import atexit, cProfile, sys, time
out = sys.argv.pop(1)
prof = cProfile.Profile(time.thread_time)  # the main thread's CPU time, not wall time
atexit.register(prof.dump_stats, out)
sys.argv[0] = "sdschat"
from app.cli import main
prof.enable()
try:
    code = main(sys.argv[1:])
finally:
    prof.disable()
sys.exit(code)
"""
"""``--profile-dir``: run a node under cProfile timed by its main thread's CPU time."""

CPU_SPLIT = """
import json, os, sys, threading, time
base = sys.argv.pop(1)
sys.argv[0] = "sdschat"
sys.path.insert(0, os.getcwd())
tt = time.thread_time
stages = {}
stack = []


def timed(name, fn):
    acc = stages.setdefault(name, [0.0, 0.0, 0])  # inclusive s, exclusive s, calls

    def wrapper(*a, **k):
        frame = [tt(), 0.0]
        stack.append(frame)
        try:
            return fn(*a, **k)
        finally:
            stack.pop()
            el = tt() - frame[0]
            acc[0] += el
            acc[1] += el - frame[1]
            acc[2] += 1
            if stack:
                stack[-1][1] += el
    return wrapper


def patch(obj, attr, name):
    setattr(obj, attr, timed(name, getattr(obj, attr)))


def patch_first(name, *places):
    # the first (module, class or None, attribute) of this checkout's layout: the node's
    # parts (app/node/receiving.py, effects.py) or, before them, app/node/runtime.py
    import importlib
    for module, cls, attr in places:
        try:
            obj = importlib.import_module(module)
        except ImportError:
            continue
        obj = getattr(obj, cls, None) if cls else obj
        if obj is not None and hasattr(obj, attr):
            return patch(obj, attr, name)
    raise SystemExit(f"--cpu-split: nothing to time as {name!r} in this checkout")


import websockets.asyncio.connection as wsc
import app.headless.run, app.node.runtime, net.envelope, net.relay_client
import sds.channel, storage.store
from storage.batch import Batch
patch(wsc.Connection, "data_received", "websockets: frames in")
patch(wsc.Connection, "send_data", "websockets: frames out")
patch(net.relay_client, "decode_frame", "relay frame decode")
patch_first("envelope open", ("app.node.receiving", None, "open_for_topic"),
            ("app.node.runtime", None, "open_for_topic"))
patch(net.envelope, "verify_signature", "Ed25519 verify")
patch(sds.channel.Channel, "receive_parsed", "SDS core receive")
patch_first("core events to node events", ("app.node.effects", "Effects", "drain"),
            ("app.node.runtime", "Node", "_drain"))
patch(Batch, "add_event", "event-log rows")
commit = storage.store.Store.commit_batch_now
plain, durable = timed("SQLite commit", commit), timed("SQLite commit, fsynced", commit)
storage.store.Store.commit_batch_now = (
    lambda self, batch, **k: (durable if batch.needs_fsync else plain)(self, batch, **k))
apply_batch = timed("SQLite statements", storage.store.apply_batch)


class TimedDb:
    # apply_batch's connection: each statement timed by its first words
    def __init__(self, db):
        self.db = db

    def __getattr__(self, attr):
        return getattr(self.db, attr)

    def execute(self, sql, *a):
        name = "SQL " + " ".join(sql.split()[:4])[:48]
        if name not in stages:
            stages[name] = [0.0, 0.0, 0]  # the dumper copies the dict: add keys here only
        return timed(name, self.db.execute)(sql, *a)

    def executemany(self, sql, *a):
        name = "SQL " + " ".join(sql.split()[:4])[:48]
        if name not in stages:
            stages[name] = [0.0, 0.0, 0]
        return timed(name, self.db.executemany)(sql, *a)


storage.store.apply_batch = lambda db, *a, **k: apply_batch(TimedDb(db), *a, **k)
patch(app.node.runtime.Node, "_emit", "event output")
patch(app.headless.run.JsonLines, "write", "stdout JSON write")
patch(app.node.runtime.Node, "_send_typed", "own line: SDS send, seal")
patch(app.node.runtime.Node, "_complete_batch", "carried states, state export")
patch(app.node.runtime.Node, "_rearm", "timers")
import app.members.group_keys
patch(app.members.group_keys.GroupKeys, "decrypt", "Megolm decrypt (members)")
patch(app.members.group_keys.GroupKeys, "open_sealed", "sealed box open (members)")
patch(app.node.runtime.Node, "_arm_state_save", "timers")


def dumper():
    seen = None
    while True:  # ends with the process (daemon)
        time.sleep(0.01)
        try:
            with open(base + ".want") as f:
                tag = f.read().strip()
        except OSError:
            continue
        if tag and tag != seen:
            seen = tag
            snap = {k: list(v) for k, v in list(stages.items())}
            with open(base + ".tmp", "w") as f:
                json.dump(snap, f)
            os.replace(base + ".tmp", f"{base}.{tag}.json")


threading.Thread(target=dumper, daemon=True).start()
from app.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""``--cpu-split DIR``: run a node with its main thread's CPU time counted per stage of the
path (``time.thread_time`` around the functions named above, exclusive of the stages they
call); the bench asks for a snapshot at the start and end of each rate (a file ``.want``)."""


def start_floor_nodes(
    children: list[Child], url: str, n: int, tmp: Path, code: Path = ROOT
) -> list[Child]:
    """``n`` floor nodes (:func:`floor_node`), each once connected."""
    nodes = []
    for i in range(n):
        argv = [sys.executable, str(Path(__file__).resolve()), "--floor-node", url,
                str(tmp / f"f{i}"), f"f{i}"]  # fmt: skip
        child = Child(argv, f"f{i}", tmp / "logs", stdin=True, cwd=code)
        children.append(child)
        nodes.append(child)
    deadline = time.monotonic() + 60
    for node in nodes:
        while not any(e.get("event") == "connection" and e.get("state") == "connected"
                      for e in node.events()):  # bounded by the deadline
            if node.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{node.name} did not connect:\n{node.tail()}")
            time.sleep(0.05)
    return nodes


def start_nodes(
    children: list[Child],
    url: str,
    n: int,
    tmp: Path,
    profile: Path | None = None,
    extra: list[str] | None = None,
    code: Path = ROOT,
    first: int = 0,
    channel_args: list[list[str]] | None = None,
    split: Path | None = None,
) -> list[Child]:
    """``n`` headless nodes named ``n{first}``...; each joins ``CHANNEL`` (or runs with
    ``channel_args[i]`` in its place, e.g. ``--invite CODE``), each once joined and connected."""
    nodes = []
    for i in range(n):
        name = f"n{first + i}"
        prof = ["-c", CPU_PROFILE, str(profile / f"{name}.prof")] if profile else ["-m", "app.cli"]
        if split is not None:
            prof = ["-c", CPU_SPLIT, str(split / name)]
        chan = channel_args[i] if channel_args is not None else [CHANNEL]
        argv = [sys.executable, *prof, "join", *chan, "--headless",
                "--relay", url, "--data-dir", str(tmp / name), "--name", name,
                *(extra or [])]  # fmt: skip
        child = Child(argv, name, tmp / "logs", stdin=True, cwd=code)
        children.append(child)
        nodes.append(child)
    deadline = time.monotonic() + 60
    for node in nodes:
        while True:  # bounded by the deadline
            evs = node.events()
            if any(e.get("event") == "error" and e.get("fatal") for e in evs):
                raise RuntimeError(f"{node.name} failed: {evs}\n{node.tail()}")
            joined = any(e.get("event") == "channel" and e.get("joined") for e in evs)
            conn = any(e.get("event") == "connection" and e.get("state") == "connected"
                       for e in evs)  # fmt: skip
            if joined and conn:
                break
            if node.popen.poll() is not None:
                raise RuntimeError(f"{node.name} exited:\n{node.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{node.name} did not join and connect:\n{node.tail()}")
            time.sleep(0.05)
    return nodes


def start_members_nodes(
    children: list[Child],
    url: str,
    n: int,
    tmp: Path,
    profile: Path | None = None,
    extra: list[str] | None = None,
    code: Path = ROOT,
    split: Path | None = None,
) -> list[Child]:
    """A members channel of ``n`` nodes, made as people make one: ``n0`` runs ``join
    CHANNEL --create`` (its admin), says ``/invite`` ``n - 1`` times, and every other node
    runs ``join --invite CODE`` (added by ``n0``'s node when it proves the code)."""
    admin = start_nodes(children, url, 1, tmp, profile, [*(extra or []), "--create"], code,
                        split=split)[0]  # fmt: skip
    start = admin.n_lines()
    for _ in range(n - 1):
        admin.write(b"/invite\n")
    deadline = time.monotonic() + 60
    codes: list[str] = []
    while len(codes) < n - 1:  # bounded by the deadline
        codes = [str(e["code"]) for e in admin.events(start) if e.get("event") == "invite"]
        if admin.popen.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"n0 made {len(codes)} of {n - 1} invites:\n{admin.tail()}")
        time.sleep(0.05)
    others = start_nodes(children, url, n - 1, tmp, profile, extra, code, first=1,
                         channel_args=[["--invite", c] for c in codes], split=split)  # fmt: skip
    return [admin, *others]


def split_snapshot(split: Path, names: list[str], tag: str) -> list[dict[str, list[float]]]:
    """``--cpu-split``: every node's per-stage CPU counters now (see CPU_SPLIT)."""
    for name in names:
        (split / f"{name}.want").write_text(tag)
    snaps = []
    deadline = time.monotonic() + 10
    for name in names:
        path = split / f"{name}.{tag}.json"
        while not path.exists():  # bounded by the deadline
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: no CPU split snapshot {tag}")
            time.sleep(0.01)
        snaps.append(json.loads(path.read_text()))
    return snaps


def split_diff(
    before: list[dict[str, list[float]]], after: list[dict[str, list[float]]]
) -> dict[str, list[float]]:
    """Per stage, over all nodes: [inclusive s, exclusive s, calls] between two snapshots."""
    total: dict[str, list[float]] = {}
    for a, b in zip(before, after, strict=True):
        for stage, vb in b.items():
            va = a.get(stage, [0.0, 0.0, 0])
            acc = total.setdefault(stage, [0.0, 0.0, 0])
            for j in range(3):
                acc[j] += vb[j] - va[j]
    return total


def run_rate(
    nodes: list[Child], relay: Child, rate: float, count: int, tag: str, drain_s: float,
    split: Path | None = None,
) -> dict[str, Any]:
    """Send ``count`` messages at ``rate`` (aggregate) and collect latencies."""
    n = len(nodes)
    names = [node.name for node in nodes]
    split0 = split_snapshot(split, names, tag + "a") if split is not None else None
    cpu0 = [c.cpu_s() for c in nodes], relay.cpu_s(), time.process_time(), time.monotonic()
    threads0 = [c.thread_cpu_s() for c in nodes]
    tag_b = tag.encode()
    starts = [node.n_lines() for node in nodes]
    for node in nodes:
        node.set_tag(tag_b)
    sent_ns: list[int] = [0] * count
    t0 = time.monotonic() + 0.05
    for k in range(count):  # bounded
        due = t0 + k / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        line = f"{tag}{k}\n".encode()
        sent_ns[k] = time.time_ns()
        nodes[k % n].write(line)
    send_span = (sent_ns[-1] - sent_ns[0]) / 1e9 if count > 1 else 0.0
    expected = count * (n - 1)
    deadline = time.monotonic() + drain_s
    last, last_change = -1, time.monotonic()
    while time.monotonic() < deadline:  # bounded
        got = sum(node.tagged_delivered for node in nodes)
        if got >= expected:
            break
        if got != last:
            last, last_change = got, time.monotonic()
        elif time.monotonic() - last_change > 10:
            break  # no progress for 10 s
        time.sleep(0.05)
    wall = time.monotonic() - cpu0[3]
    threads1 = [c.thread_cpu_s() for c in nodes]
    stages = (split_diff(split0, split_snapshot(split, names, tag + "b"))
              if split is not None and split0 is not None else None)  # fmt: skip
    cpu = {
        "loop_s": round(sum(b[0] - a[0] for a, b in zip(threads0, threads1, strict=True)), 2),
        "threads_s": round(sum(b[1] - a[1] for a, b in zip(threads0, threads1, strict=True)), 2),
        "wall_s": round(wall, 2),
        "nodes_s": round(sum(c.cpu_s() for c in nodes) - sum(cpu0[0]), 2),
        "relay_s": round(relay.cpu_s() - cpu0[1], 2),
        "bench_s": round(time.process_time() - cpu0[2], 2),
    }

    def stamp(ev: dict[str, Any]) -> int:
        ns = ev.get("emitted_ns")
        return int(ns) if ns is not None else int(float(ev["ts"]) * 1e9)

    latencies: list[float] = []
    queued_ms: list[float] = []
    logged_ms: list[float] = []
    other: dict[str, int] = {}
    seen: set[tuple[int, int]] = set()
    logged_at: dict[int, int] = {}
    trace: list[tuple[int, int, int, int, int]] = []
    for i, node in enumerate(nodes):
        for ev in node.events(starts[i]):
            kind = ev.get("event")
            text = ev.get("text")
            if kind in ("missing", "lost", "rejected", "error", "connection"):
                other[kind] = other.get(kind, 0) + 1
            if not isinstance(text, str) or not text.startswith(tag):
                continue
            k = int(text[len(tag) :])
            if kind == "delivered":
                if (k, i) not in seen:
                    seen.add((k, i))
                    latencies.append((stamp(ev) - sent_ns[k]) / 1e6)
                    trace.append((k, k % n, i, sent_ns[k], stamp(ev)))
            elif kind == "own" and ev.get("state") == "queued":
                queued_ms.append((stamp(ev) - sent_ns[k]) / 1e6)
            elif kind == "own" and ev.get("state") == "logged":
                logged_at[k] = stamp(ev)
                logged_ms.append((stamp(ev) - sent_ns[k]) / 1e6)
    return {
        "rate": rate,
        "messages": count,
        "send_rate": round((count - 1) / send_span, 1) if send_span > 0 else None,
        "expected": expected,
        "delivered": len(latencies),
        "latency_ms": summary(latencies),
        "to_queued_ms": summary(queued_ms),
        "to_logged_ms": summary(logged_ms),
        "events": other,
        "cpu": cpu,
        "stages": stages,
        "trace": sorted(trace),
    }


def pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    idx = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))  # nearest rank
    return sorted_values[idx]


def summary(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {
        "p50": round(pct(s, 0.50), 2),
        "p90": round(pct(s, 0.90), 2),
        "p99": round(pct(s, 0.99), 2),
        "max": round(s[-1], 2) if s else float("nan"),
        "n": len(s),
    }


def warm_up(nodes: list[Child], per_node: int) -> None:
    """Every node sends ``per_node`` messages; wait (bounded) until all are delivered."""
    n = len(nodes)
    tag = "warm-"
    for node in nodes:
        node.set_tag(tag.encode())
    for r in range(per_node):
        for i, node in enumerate(nodes):
            node.write(f"{tag}{i}.{r}\n".encode())
            time.sleep(0.02)
    expected = per_node * n * (n - 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # bounded
        if sum(node.tagged_delivered for node in nodes) >= expected:
            break
        time.sleep(0.05)
    else:
        got = sum(node.tagged_delivered for node in nodes)
        raise RuntimeError(f"warm-up: {got}/{expected} deliveries after 60 s")


def loadavg() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "?"


def run_config(
    args: argparse.Namespace, code: Path, profile_name: str, speed: dict[str, float]
) -> list[dict[str, Any]]:
    """One fresh relay and set of nodes (``code``'s sdschat, ``profile_name``), every rate."""
    tmp = Path(tempfile.mkdtemp(prefix="sdschat-e2e-"))
    (tmp / "logs").mkdir()
    children: list[Child] = []
    results: list[dict[str, Any]] = []
    extra = list(args.node_arg)
    if profile_name == "waku":
        extra += ["--profile", "waku"]
    if profile_name == "passphrase":
        (tmp / "passphrase").write_text("correct horse battery staple\n")
        extra += ["--passphrase-file", str(tmp / "passphrase")]
    try:
        url = start_relay(children, tmp / "logs", code)
        profile = args.profile_dir.resolve() if args.profile_dir else None
        split = None
        if args.cpu_split and profile_name in ("default", "waku", "passphrase", "members"):
            split = tmp / "split"
            split.mkdir()
        if profile:
            profile.mkdir(parents=True, exist_ok=True)
        if profile_name == "floor":
            nodes = start_floor_nodes(children, url, args.nodes, tmp, code)
        elif profile_name == "members":
            nodes = start_members_nodes(children, url, args.nodes, tmp, profile, extra, code,
                                        split)  # fmt: skip
        else:
            nodes = start_nodes(children, url, args.nodes, tmp, profile, extra, code,
                                split=split)
        warm_up(nodes, args.warmup)
        time.sleep(args.pause)
        for idx, rate in enumerate(args.rates):
            count = max(2, int(rate * args.seconds))
            results.append(run_rate(nodes, children[0], rate, count, f"e2e{idx}-", args.drain,
                                    split if profile_name != "floor" else None))
            if idx + 1 < len(args.rates):
                time.sleep(args.pause)
        alive = sum(c.popen.poll() is None for c in children)
        for r in results:
            r["alive_at_end"] = alive
    finally:
        for child in reversed(children):  # nodes first (a clean exit: stdin closed), relay last
            child.stop(grace=10.0 if child is not children[0] else 0.0)
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return results


def print_runs(label: str, results: list[dict[str, Any]]) -> None:
    print(f"{label}:")
    print(f"{'rate':>7} {'sent/s':>7} {'delivered':>15} {'p50':>8} {'p90':>8} {'p99':>8} "
          f"{'max':>8}  | to queued p50  to logged p50")  # fmt: skip
    for r in results:
        lat = r["latency_ms"]
        print(
            f"{r['rate']:>7g} {r['send_rate'] or 0:>7.1f} "
            f"{r['delivered']:>7}/{r['expected']:<7} "
            f"{lat['p50']:>6.2f}ms {lat['p90']:>6.2f}ms {lat['p99']:>6.2f}ms {lat['max']:>6.1f}ms"
            f"  | {r['to_queued_ms']['p50']:>9.2f}ms {r['to_logged_ms']['p50']:>10.2f}ms"
        )
        c = r["cpu"]
        per = 1e6 / max(1, r["delivered"])
        print(f"        CPU over {c['wall_s']} s: nodes {c['nodes_s']} s "
              f"(loop threads {c['loop_s']} s = {c['loop_s'] * per:.0f} us/delivery, other "
              f"threads {c['threads_s']} s = {c['threads_s'] * per:.0f} us/delivery), relay "
              f"{c['relay_s']} s, this process {c['bench_s']} s; other events: "
              f"{r['events'] or 'none'}")  # fmt: skip
        stages = r.get("stages")
        if stages:
            named = sum(v[1] for v in stages.values())
            print(f"        event-loop CPU per delivery by stage (exclusive; --cpu-split), "
                  f"of {c['loop_s'] * per:.0f} us:")  # fmt: skip
            for stage, (_inc, exc, calls) in sorted(stages.items(), key=lambda kv: -kv[1][1]):
                each = calls / max(1, r["delivered"])
                print(f"          {exc * per:>6.1f} us  {stage} ({each:.2f} calls)")
            print(f"          {(c['loop_s'] - named) * per:>6.1f} us  the rest: asyncio and "
                  f"uvloop, websockets' reader task, the inbox, rounds' bookkeeping")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--rates", type=float, nargs="+", default=[100.0, 200.0, 400.0])
    ap.add_argument("--seconds", type=float, default=10.0, help="sending time per rate")
    ap.add_argument("--drain", type=float, default=30.0, help="max seconds to wait after")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up messages per node")
    ap.add_argument("--pause", type=float, default=3.0, help="idle seconds between rates")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--profile", choices=("default", "waku", "both", "passphrase", "members",
                                           "channels"), default="both",
                    help="protocol sizes or channel kind of the nodes (see the module "
                    "docstring)")  # fmt: skip
    ap.add_argument("--compare", type=Path, metavar="DIR",
                    help="another sdschat checkout, measured alternately")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=1, help="rounds of alternation")
    ap.add_argument(
        "--node-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for every 'sdschat join' (repeatable; for experiments)",
    )
    ap.add_argument("--profile-dir", type=Path, help="run the nodes under cProfile, .prof here")
    ap.add_argument("--cpu-split", action="store_true",
                    help="count the nodes' event-loop CPU per stage of the path (print per "
                         "delivery); every profile but the floor")
    ap.add_argument(
        "--trace",
        type=Path,
        metavar="CSV",
        help="write every delivery (rate, k, sender, receiver, sent_ns, delivered_ns)",
    )
    ap.add_argument("--floor", action="store_true",
                    help="measure the floor (bare bytes through the same relay) in the same "
                    "run and report sdschat's latencies as multiples of it")  # fmt: skip
    ap.add_argument("--floor-node", nargs=3, metavar=("URL", "DIR", "NAME"),
                    help=argparse.SUPPRESS)  # fmt: skip
    args = ap.parse_args()
    if args.floor_node:
        return floor_node(args.floor_node[0], Path(args.floor_node[1]), args.floor_node[2])
    if args.nodes < 2 or args.seconds <= 0 or any(r <= 0 for r in args.rates):
        ap.error("need --nodes >= 2, --seconds > 0 and positive rates")
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")

    load_before = loadavg()
    speed = calibrate()  # before any node runs
    versions = [("this", ROOT)]
    if args.compare is not None:
        versions.insert(0, ("previous", args.compare.resolve()))
    profiles = {"both": ["default", "waku"], "channels": ["passphrase", "members"]}.get(
        args.profile, [args.profile])
    configs: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        if args.floor:
            runs = run_config(args, ROOT, "floor", speed)
            configs.append({"round": rnd, "profile": "floor", "version": "floor", "runs": runs})
        kinds = profiles[::-1] if args.profile == "channels" and rnd % 2 else profiles
        for prof in kinds:
            order = versions if rnd % 2 == 0 else versions[::-1]
            for name, code in order:
                runs = run_config(args, code, prof, speed)
                configs.append({"round": rnd, "profile": prof, "version": name, "runs": runs})

    if args.trace:
        with args.trace.open("w") as f:
            f.write("version,profile,round,rate,k,sender,receiver,sent_ns,delivered_ns\n")
            for c in configs:
                for r in c["runs"]:
                    f.writelines(
                        f"{c['version']},{c['profile']},{c['round']},{r['rate']:g},"
                        f"{k},{a},{b},{t0},{t1}\n"
                        for k, a, b, t0, t1 in r["trace"]
                    )
    for c in configs:
        for r in c["runs"]:
            del r["trace"]
    ratios = floor_ratios(configs)
    report = {"nodes": args.nodes, "load_before": load_before, "load_after": loadavg(),
              "machine": speed, "configs": configs}  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.nodes} headless nodes + relay on 127.0.0.1, default protocol timings, "
          f"{args.seconds:g} s per rate; load {load_before} -> {report['load_after']}")  # fmt: skip
    print(describe(speed))
    for c in configs:
        code = dict(versions).get(c["version"], ROOT)
        print_runs(f"round {c['round']}, {c['version']} ({code}), profile {c['profile']}",
                   c["runs"])  # fmt: skip
    for line in ratios:
        print(line)
    return 0


def floor_ratios(configs: list[dict[str, Any]]) -> list[str]:
    """sdschat's p50/p99 as multiples of the floor's of the same round and rate."""
    floors = {(c["round"], r["rate"]): r["latency_ms"]
              for c in configs if c["profile"] == "floor" for r in c["runs"]}  # fmt: skip
    lines = []
    for c in configs:
        if c["profile"] == "floor":
            continue
        for r in c["runs"]:
            f = floors.get((c["round"], r["rate"]))
            if not f or not f["n"]:
                continue
            lat = r["latency_ms"]
            lines.append(
                f"floor x: round {c['round']} {c['version']} {c['profile']} {r['rate']:g} msg/s: "
                f"p50 {lat['p50']:.2f} / {f['p50']:.2f} ms = {lat['p50'] / f['p50']:.1f}x, "
                f"p99 {lat['p99']:.2f} / {f['p99']:.2f} ms = {lat['p99'] / f['p99']:.1f}x"
            )
            r["floor_x"] = {"p50": round(lat["p50"] / f["p50"], 2),
                            "p99": round(lat["p99"] / f["p99"], 2)}  # fmt: skip
    return lines


if __name__ == "__main__":
    sys.exit(main())
