"""The node's receive path in one process: envelopes in, delivered and committed out.

Usage::

    .venv/bin/python bench/node_receive.py [--messages 3000] [--repeat 5]
    .venv/bin/python bench/node_receive.py --one-at-a-time [--messages 1000]
    .venv/bin/python bench/node_receive.py --members [--one-at-a-time] [--messages 1000]

Builds ``--messages`` realistic envelopes (two real SDS cores conversing,
default protocol settings: ~46 KB each, see ``bench/store_data.py``), then for
each repeat opens a fresh :class:`app.node.Node` (real SQLite file, envelope
checks, the SDS core; an in-memory transport) and hands it every envelope as
its transport would, as fast as its bounded inbox accepts them, until the last
one is delivered and committed. No websockets, no store process: what is left
is the node's own work per received message, which is what a catch-up and a
busy channel pay for. Prints the median and best wall time per message and the
median process CPU per message (the event loop, SQLite's thread and the
checkpointer together).

``--one-at-a-time`` hands over the next envelope only once the previous one
was delivered (its round committed and its event emitted), as in a quiet
channel: each message is then a round and a transaction of its own, and the
figures are one receiver's latency (median, p99) and CPU per message, the
part of the end-to-end latency that each of the receivers adds. With
``--busy-ms X`` the loop meanwhile runs Python work in chunks of X ms (as a
node's loop does at 100 msg/s: other rounds, websocket frames), so that a
hand-over to another thread has to wait for the GIL; that work's CPU is not
counted.

Profiles: ``--profile default`` (exactly ``sds.Config()``: adaptive causal
history, floor 5, cap 30; filter 250 / 0.001), ``--profile waku``
(``sds.Config.waku()``: js-waku's 200-id history and 10,000-entry filter,
~46 KB envelopes), ``--profile small`` (a fixed history of 10, filter 1,000:
the size class measured before the defaults changed), or ``--profile both``
(default and waku, side by side; without ``--compare`` this checkout alone).

It also reports what the node's SQLite file holds per message after the run
(``db_per_msg``: the whole file over the messages received) and, split with
SQLite's ``dbstat``, the part that stays per message forever (``log_per_msg``:
the message rows, their indexes and the event log; schema 1 keeps every
envelope in its message rows) and the bounded part (``window_bytes``: the
recent window's envelopes and histories, schema 2). The rest of the file is
the core state (bounded by the log window) and free pages (reused by the next
envelopes). ``bench/storage_bytes.py`` measures the steady state directly.

``--members`` measures a members channel side by side with a passphrase channel
(this checkout; alternated fresh subprocesses, ``--repeat`` rounds, default
profile): the envelopes are written by a real sending node (alice) in both kinds
of channel, interleaved, after the receiving node (bob) joined each (the members
channel as people make one: ``create_channel``, ``make_invite``,
``join_by_invite`` over an in-memory hub); bob's data directory is copied fresh
for every run. The members envelopes include the key shares alice's node posts
(a new Megolm session every 100 messages, shared with bob first), so the
figures are per delivered line with the share cost spread over them; with
``--one-at-a-time`` the latency is over the lines only.

``--compare DIR`` measures another checkout (e.g. ``/work/main``) side by side:
each repeat runs one fresh subprocess per (version, profile), alternated, on
the same envelopes (built once here; the envelope format is the same), so a
run prints both versions' medians with the machine's calibration. On 2 shared
cores, single runs of the full catch-up benchmark vary by +-15%, this one by a
few percent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(  # --code=DIR: the sdschat tree to import (another version to compare)
    0,
    next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--code=")), None)
    or str(Path(__file__).resolve().parents[1]),
)

from machine import describe
from store_data import make_history

import sds
from app.members.device_copy import forget_home
from app.members.events import is_control
from app.node.events import Delivered, OwnMessage
from app.node.runtime import Node, NodeOptions
from app.node.transport import MemoryHub
from net import runner
from net.channel_key import TEST_KDF, ChannelKey, derive_channel_key
from net.envelope import EnvelopeError, open_for_topic, peek_topic

PROFILES = ("default", "waku", "small")


def profile_config(name: str) -> sds.Config:
    """The ``sds.Config`` of a profile (see the module docstring)."""
    if name == "small":  # the size class measured before the defaults changed
        return sds.Config(causal_history_size=10, causal_history_floor=None, bloom_capacity=1000)
    return sds.Config.profile(name)  # "default" is exactly sds.Config()


def db_bytes(data_dir: Path) -> dict[str, int]:
    """Bytes of the closed database: ``file``, and ``window`` (the ``recent`` table and
    its indexes, schema 2) from SQLite's ``dbstat``."""
    path = data_dir / "sdschat.db"
    out = {"file": path.stat().st_size, "window": 0, "log": 0}
    log = ("messages", "messages_log_order", "sqlite_autoindex_messages_1", "events")
    with contextlib.closing(sqlite3.connect(path)) as db:
        for name, size in db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            if name == "recent" or str(name).startswith("recent_"):
                out["window"] += int(size)
            elif name in log:
                out["log"] += int(size)
    return out


_CONFIG = sds.Config()


@contextlib.asynccontextmanager
async def bench_node(
    data_dir: Path, key: ChannelKey | str, on_delivered: Callable[[], None]
) -> AsyncIterator[Node]:
    """A fresh node in ``data_dir``, started and joined to ``key``'s channel (a channel
    name: the members channel whose keys are in ``data_dir``), closed after."""
    options = NodeOptions(kdf=TEST_KDF, config=_CONFIG)
    node = await Node.open(data_dir, MemoryHub().transport(), name="bench", options=options)

    def on_event(ev: object) -> None:
        if isinstance(ev, Delivered):
            on_delivered()

    node.subscribe(on_event)
    try:
        await node.start()
        if isinstance(key, str):
            await node.join(key)
        else:
            await node.join(key.channel, key=key)
        yield node
    finally:
        await node.close()


async def _busy(stop: asyncio.Event, chunk_s: float) -> float:
    """Python work on the loop in chunks of ``chunk_s``, yielding between them (other
    rounds, websocket frames: a node at 100 msg/s); returns its thread CPU seconds."""
    spent = 0.0
    while not stop.is_set():  # bounded: stopped when the measurement ends
        t0 = time.thread_time()
        end = time.perf_counter() + chunk_s
        n = 0
        while time.perf_counter() < end:
            n += 1
        spent += time.thread_time() - t0
        await asyncio.sleep(0)
    return spent


async def receive_each(
    data_dir: Path, key: ChannelKey | str, envelopes: list[bytes], busy_ms: float = 0.0,
    lines: list[bool] | None = None,
) -> tuple[list[float], float]:
    """Per-envelope latency (handed in -> delivered) and total CPU seconds, one at a time
    (with ``busy_ms``: while the loop also runs Python work in chunks of that length;
    its CPU is not counted)."""
    delivered = asyncio.Event()
    latencies: list[float] = []
    async with bench_node(data_dir, key, delivered.set) as node:
        stop = asyncio.Event()
        busy = asyncio.create_task(_busy(stop, busy_ms / 1e3)) if busy_ms > 0 else None
        cpu0 = time.process_time()
        for i, envelope in enumerate(envelopes):
            delivered.clear()
            t = time.perf_counter()
            await node._on_envelope(envelope)
            if lines is not None and not lines[i]:  # a key share: no line to wait for
                await node._call_in_worker(node._noop)
                continue
            await asyncio.wait_for(delivered.wait(), 60)
            latencies.append(time.perf_counter() - t)
        cpu = time.process_time() - cpu0
        stop.set()
        if busy is not None:
            cpu -= await busy
        return latencies, cpu


async def receive_all(
    data_dir: Path, key: ChannelKey | str, envelopes: list[bytes], expected: int | None = None
) -> tuple[float, float]:
    """Wall and CPU seconds for one fresh node to deliver and commit ``envelopes``
    (``expected`` lines among them: all by default)."""
    delivered = 0
    done = asyncio.Event()
    want = len(envelopes) if expected is None else expected

    def count() -> None:
        nonlocal delivered
        delivered += 1
        if delivered == want:
            done.set()

    async with bench_node(data_dir, key, count) as node:
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        for envelope in envelopes:
            await node._on_envelope(envelope)  # the transport's callback
        await asyncio.wait_for(done.wait(), 600)
        await node._call_in_worker(node._noop)  # the last round committed
        return time.perf_counter() - t0, time.process_time() - cpu0


def _write_envelopes(path: Path, envelopes: list[bytes]) -> None:
    with path.open("wb") as f:
        for e in envelopes:
            f.write(len(e).to_bytes(4, "big") + e)


def _read_envelopes(path: Path) -> list[bytes]:
    data = path.read_bytes()
    out, i = [], 0
    while i < len(data):
        n = int.from_bytes(data[i : i + 4], "big")
        out.append(data[i + 4 : i + 4 + n])
        i += 4 + n
    return out


MEMBERS = "bench-members"
PASSPHRASE_KEY = ("bench-passphrase", "a passphrase")
KINDS = ("passphrase", "members")


async def _settle(cond: Callable[[], bool], what: str, limit_s: float = 120.0) -> None:
    """Wait (bounded) until ``cond`` holds."""
    deadline = time.monotonic() + limit_s
    while not cond():  # bounded by the deadline
        if time.monotonic() > deadline:
            raise RuntimeError(f"set-up: {what} not reached in {limit_s:.0f} s")
        await asyncio.sleep(0.01)


async def build_channels(tmp: Path, n: int) -> dict[str, tuple[list[bytes], list[bool]]]:
    """Alice's node writes ``n`` lines in a passphrase channel and in a members channel
    (interleaved) that bob's node joined first; bob's data directory (``tmp/"bob"``,
    closed before the lines) is the receiver's template. Returns, per kind, the
    envelopes alice published after bob left and which of them carry a line."""
    hub = MemoryHub()
    options = NodeOptions(kdf=TEST_KDF, config=_CONFIG)
    alice_t = hub.transport()
    alice = await Node.open(tmp / "alice", alice_t, name="alice", options=options)
    bob = await Node.open(tmp / "bob", hub.transport(), name="bob", options=options)
    sent: list[int] = []
    alice.subscribe(lambda ev: sent.append(1) if isinstance(ev, OwnMessage)
                    and ev.state == "sent" else None)  # fmt: skip
    pkey = derive_channel_key(*PASSPHRASE_KEY, params=TEST_KDF)
    try:
        await alice.start()
        await bob.start()
        for node in (alice, bob):
            await node.join(pkey.channel, key=pkey)
        await alice.create_channel(MEMBERS)
        await bob.join_by_invite(await alice.make_invite(MEMBERS), timeout_s=60)
        mc = alice.members_channel(MEMBERS)
        assert mc is not None
        await _settle(lambda: mc.roster.is_member(bob.sender_id), "bob a member at alice")
        # bob reads a first line in each channel: its log then holds all the lines name
        ready: set[str] = set()
        bob.subscribe(lambda ev: ready.add(ev.channel) if isinstance(ev, Delivered)
                      and ev.text == "ready" else None)  # fmt: skip
        for ch in (pkey.channel, MEMBERS):
            await alice.post(ch, "ready")
        await _settle(lambda: ready == {pkey.channel, MEMBERS}, "bob read a first line")
        await bob.close()
        start, sent_before = len(alice_t.sent), len(sent)
        for first in range(0, n, 100):
            futures = [alice.post(ch, f"line {i}: a line of ordinary chat, about sixty bytes")
                       for i in range(first, min(n, first + 100))
                       for ch in (pkey.channel, MEMBERS)]  # fmt: skip
            await asyncio.gather(*futures)
        await _settle(lambda: len(sent) - sent_before >= 2 * n, "every line sent")
        envelopes = alice_t.sent[start:]
    finally:
        await alice.close()
        if not bob.closed:
            await bob.close()
    out: dict[str, tuple[list[bytes], list[bool]]] = {k: ([], []) for k in KINDS}
    for env in envelopes:
        try:
            topic = peek_topic(env)
        except EnvelopeError:
            continue
        kind, keys = (("passphrase", [pkey]) if topic == pkey.topic
                      else ("members", mc.opening_keys()) if topic == mc.topic
                      else (None, []))  # fmt: skip
        if kind is None:
            continue
        msg = open_for_topic(env, lambda _t, keys=keys: keys).sds_message  # type: ignore[misc]
        content = b"" if msg is None else bytes(msg.content)
        out[kind][0].append(env)
        out[kind][1].append(bool(content) and not is_control(content))
    return out


def members_child(args: argparse.Namespace) -> int:
    """One measurement of one kind of channel (``--kind``) in this process; one JSON line."""
    envelopes = _read_envelopes(Path(args.envelopes))
    lines = [b == "1" for b in Path(args.envelopes + ".lines").read_text()]
    key: ChannelKey | str = (derive_channel_key(*PASSPHRASE_KEY, params=TEST_KDF)
                             if args.kind == "passphrase" else MEMBERS)  # fmt: skip
    n = sum(lines)
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
        d = Path(tmp) / "node"
        shutil.copytree(args.template, d)
        forget_home(d)  # the template never runs again: this copy is its own device
        if args.one_at_a_time:
            lat, cpu = runner.run(receive_each(d, key, envelopes, args.busy_ms, lines))
            lat.sort()
            res = {"p50_ms": lat[n // 2] * 1e3, "p99_ms": lat[min(n - 1, n * 99 // 100)] * 1e3,
                   "cpu_us": cpu / n * 1e6}
        else:
            wall, cpu = runner.run(receive_all(d, key, envelopes, n))
            res = {"wall_us": wall / n * 1e6, "cpu_us": cpu / n * 1e6}
    res.update(envelopes=len(envelopes), lines=n,
               bytes_per_line=sum(map(len, envelopes)) / n)
    print(json.dumps(res))
    return 0


def members_compare(args: argparse.Namespace) -> int:
    """Passphrase vs members channel: alternated fresh subprocesses, ``--repeat`` rounds."""
    print(describe())
    results: dict[str, list[dict[str, float]]] = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-env-") as tmp:
        built = runner.run(build_channels(Path(tmp), args.messages))
        for kind, (envs, lines) in built.items():
            _write_envelopes(Path(tmp) / f"{kind}.bin", envs)
            (Path(tmp) / f"{kind}.bin.lines").write_text("".join("1" if x else "0" for x in lines))
            print(f"{kind} channel: {len(envs):,} envelopes, {sum(lines):,} lines, "
                  f"~{sum(map(len, envs)) / len(envs) / 1e3:.1f} KB each")
        for r in range(args.repeat):
            for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
                argv = [sys.executable, __file__, "--child", "--kind", kind,
                        "--envelopes", str(Path(tmp) / f"{kind}.bin"),
                        "--template", str(Path(tmp) / "bob")]  # fmt: skip
                if args.one_at_a_time:
                    argv += ["--one-at-a-time", "--busy-ms", str(args.busy_ms)]
                env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
                done = subprocess.run(argv, capture_output=True, text=True, timeout=1800,
                                      cwd=tmp, env=env)  # fmt: skip
                if done.returncode != 0:
                    print(done.stderr[-3000:], file=sys.stderr)
                    return 1
                results[kind].append(json.loads(done.stdout.strip().splitlines()[-1]))
    keys = ["p50_ms", "p99_ms", "cpu_us"] if args.one_at_a_time else ["wall_us", "cpu_us"]
    keys += ["bytes_per_line"]
    print(f"medians of {args.repeat} alternated runs, {args.messages:,} lines each "
          f"(per line; key shares included)")
    print("| channel | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for kind in KINDS:
        medians = {k: statistics.median(r[k] for r in results[kind]) for k in keys}
        cells = [f"{v:,.{2 if k.endswith('_ms') else 1}f}" for k, v in medians.items()]
        print(f"| {kind} | " + " | ".join(cells) + " |")
    return 0


def child_run(args: argparse.Namespace) -> int:
    """One measurement in this process; prints one JSON line."""
    global _CONFIG
    _CONFIG = profile_config(args.profile)
    key = derive_channel_key("bench", None, params=TEST_KDF)
    envelopes = _read_envelopes(Path(args.envelopes))
    n = len(envelopes)
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
        d = Path(tmp) / "node"
        if args.one_at_a_time:
            lat, cpu = runner.run(receive_each(d, key, envelopes, args.busy_ms))
            lat.sort()
            res = {"p50_ms": lat[n // 2] * 1e3, "p99_ms": lat[min(n - 1, n * 99 // 100)] * 1e3,
                   "cpu_us": cpu / n * 1e6}
        else:
            wall, cpu = runner.run(receive_all(d, key, envelopes))
            res = {"wall_us": wall / n * 1e6, "cpu_us": cpu / n * 1e6}
        size = db_bytes(d)
    res.update(db_per_msg=size["file"] / n, log_per_msg=size["log"] / n,
               window_bytes=size["window"])
    print(json.dumps(res))
    return 0


def compare(args: argparse.Namespace) -> int:
    """Alternate fresh subprocesses: (other, this) x profiles, ``--repeat`` times."""
    key = derive_channel_key("bench", None, params=TEST_KDF)
    here = str(Path(__file__).resolve().parents[1])
    versions = {"this": here}
    if args.compare:
        versions = {"previous": str(Path(args.compare).resolve()), "this": here}
    profiles = ["default", "waku"] if args.profile == "both" else [args.profile]
    print(describe())
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-env-") as tmp:
        files = {}
        for prof in profiles:
            hist = make_history(key, args.messages, config=profile_config(prof))
            files[prof] = Path(tmp) / f"{prof}.bin"
            _write_envelopes(files[prof], hist.envelopes)
            size = sum(map(len, hist.envelopes)) / len(hist.envelopes)
            print(f"profile {prof}: {len(hist.envelopes):,} envelopes of ~{size / 1e3:.1f} KB")
        for r in range(args.repeat):
            for prof in profiles:
                order = list(versions.items()) if r % 2 == 0 else list(versions.items())[::-1]
                for name, code in order:
                    argv = [sys.executable, __file__, f"--code={code}", "--child",
                            "--profile", prof, "--envelopes", str(files[prof])]
                    if args.one_at_a_time:
                        argv += ["--one-at-a-time", "--busy-ms", str(args.busy_ms)]
                    done = subprocess.run(
                        argv, capture_output=True, text=True, timeout=1800, cwd=tmp,
                        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                    )
                    if done.returncode != 0:
                        print(done.stderr[-3000:], file=sys.stderr)
                        return 1
                    results.setdefault((name, prof), []).append(
                        json.loads(done.stdout.strip().splitlines()[-1])
                    )
    keys = ["p50_ms", "p99_ms", "cpu_us"] if args.one_at_a_time else ["wall_us", "cpu_us"]
    keys += ["db_per_msg", "log_per_msg", "window_bytes"]
    print(f"medians of {args.repeat} alternated runs, {args.messages:,} messages each")
    print("| version | profile | " + " | ".join(keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    for prof in profiles:
        for name in versions:
            rows = results[(name, prof)]
            cells = [
                f"{statistics.median(r[k] for r in rows):,.{2 if k.endswith('_ms') else 1}f}"
                for k in keys
            ]
            print(f"| {name} | {prof} | " + " | ".join(cells) + " |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--one-at-a-time", action="store_true", help="wait for each delivery")
    ap.add_argument(
        "--busy-ms",
        type=float,
        default=0.0,
        help="with --one-at-a-time: keep the loop busy with Python work in chunks of this many ms",
    )
    ap.add_argument("--profile", choices=(*PROFILES, "both"), default="default")
    ap.add_argument("--compare", metavar="DIR", help="another checkout to measure alternately")
    ap.add_argument("--code", help="=DIR: the sdschat tree to import (set before parsing)")
    ap.add_argument("--members", action="store_true",
                    help="a members channel side by side with a passphrase channel")  # fmt: skip
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--envelopes", help=argparse.SUPPRESS)
    ap.add_argument("--kind", choices=KINDS, help=argparse.SUPPRESS)
    ap.add_argument("--template", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child and args.kind:
        return members_child(args)
    if args.child:
        return child_run(args)
    if args.members:
        return members_compare(args)
    if args.compare or args.profile == "both":
        return compare(args)
    global _CONFIG
    _CONFIG = profile_config(args.profile)
    key = derive_channel_key("bench", None, params=TEST_KDF)
    hist = make_history(key, args.messages, config=_CONFIG)
    n = len(hist.envelopes)
    print(describe())
    if args.one_at_a_time:
        with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
            lat, cpu = runner.run(
                receive_each(Path(tmp) / "node", key, hist.envelopes, args.busy_ms)
            )
        lat.sort()
        print(
            f"{n:,} envelopes one at a time: latency p50 {lat[n // 2] * 1e3:.2f} ms, "
            f"p99 {lat[min(n - 1, n * 99 // 100)] * 1e3:.2f} ms; "
            f"CPU {cpu / n * 1e3:.2f} ms per message"
        )
        return 0
    walls: list[float] = []
    cpus: list[float] = []
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
        for r in range(args.repeat):
            wall, cpu = runner.run(receive_all(Path(tmp) / f"node{r}", key, hist.envelopes))
            walls.append(wall)
            cpus.append(cpu)
    us = 1e6 / n
    print(
        f"{n:,} envelopes of ~{sum(map(len, hist.envelopes)) / n / 1e3:.0f} KB: "
        f"wall {statistics.median(walls) * us:.0f} us/message (best {min(walls) * us:.0f}), "
        f"CPU {statistics.median(cpus) * us:.0f} us/message, median of {args.repeat}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
