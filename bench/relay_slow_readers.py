"""Relay memory under the slow-reader attack (issue 14 §5): the previous relay vs this one.

The attack: ``--readers`` connections, each subscribed to a topic of its own,
read only ``--read-rate`` frames per second each, through a 4 KiB receive
buffer, and reconnect as soon as they are dropped (a persistent attacker).
For each topic a publisher sends ``--size``-byte envelopes at
``--publish-rate`` per second, a little faster than its reader reads, so every
reader's queue on the relay grows, each with frames of its own (readers of one
topic would share the frames: the relay queues one ``bytes`` object for all).
One honest subscriber reads everything on the first topic.

Two relays run as child processes with their default flags, one after the
other, in the same run:

* ``before``: the relay at ``--baseline`` (default ``5069118``, the last
  version whose queues were bounded in frames only: 256 frames of up to
  256 KiB per connection), extracted with ``git archive`` into a temporary
  directory;
* ``after``: the relay of this working tree (queues bounded in bytes,
  ``--max-lag``, ``--memory-budget``).

For each, the relay's resident memory (VmRSS from /proc) is sampled every
0.25 s during the ``--duration`` seconds of attack and for ``--cooldown``
seconds after every attacker has left. Reported: peak and mean RSS during the
attack, RSS after the attackers left, how many times attackers were
disconnected, and the honest subscriber's deliveries against the publishes.

Everything is on 127.0.0.1, bounded in time, and every child is killed by
its PID at the end::

    .venv/bin/python bench/relay_slow_readers.py
    .venv/bin/python bench/relay_slow_readers.py --readers 16 --duration 40
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import describe  # noqa: E402
from websockets.asyncio.client import ClientConnection, connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from net import envelope_pb2  # noqa: E402
from net.relay_frames import encode_publish, encode_subscribe  # noqa: E402

OTHER_TOPIC = bytes(range(16, 32))


def _topic(i: int) -> bytes:
    return i.to_bytes(2, "big") + bytes(range(14))
DEFAULT_BASELINE = "5069118"


@dataclass
class Result:
    label: str
    rss_kib: list[int] = field(default_factory=list)
    after_kib: list[int] = field(default_factory=list)
    idle_kib: int = 0
    published: int = 0
    honest: int = 0
    drops: int = 0
    first_drop_s: float | None = None


def _fake_envelope(size: int, topic: bytes) -> bytes:
    return envelope_pb2.Envelope(
        version=1, topic=topic, nonce=os.urandom(12), ciphertext=os.urandom(max(0, size - 40))
    ).SerializeToString()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _start_relay(cwd: Path) -> tuple[subprocess.Popen[bytes], int]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "relay", "--port", "0", "--stats-interval", "0"],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # bounded
        line = proc.stderr.readline()
        if not line:
            break
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if rec.get("event") == "relay_listening":
                # keep draining stderr so the relay never blocks on a full pipe
                _drain(proc)
                return proc, int(rec["port"])
    _stop(proc)
    raise RuntimeError(f"relay in {cwd} did not start")


def _drain(proc: subprocess.Popen[bytes]) -> None:
    import threading

    def run() -> None:
        assert proc.stderr is not None
        for _ in proc.stderr:  # ends at EOF
            pass

    threading.Thread(target=run, daemon=True).start()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def _open_slow(port: int, topic: bytes) -> ClientConnection:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), 10)
    ws = await asyncio.wait_for(
        connect(f"ws://127.0.0.1:{port}", sock=sock, proxy=None, compression=None,
                max_queue=1, max_size=None, ping_interval=None),
        10,
    )
    await ws.send(encode_subscribe([topic]))
    return ws


async def _attack(port: int, args: argparse.Namespace, pid: int, res: Result) -> None:
    stop = asyncio.Event()
    t0 = time.monotonic()

    async def slow_reader(topic: bytes) -> None:
        while not stop.is_set():  # reconnects when dropped, until the attack ends
            try:
                ws = await _open_slow(port, topic)
            except (OSError, TimeoutError, ConnectionClosed):
                await asyncio.sleep(0.2)
                continue
            try:
                while not stop.is_set():
                    await asyncio.wait_for(ws.recv(), 30)
                    await asyncio.sleep(1.0 / args.read_rate)
            except (ConnectionClosed, TimeoutError):
                res.drops += 1
                if res.first_drop_s is None:
                    res.first_drop_s = time.monotonic() - t0
            finally:
                ws.transport.abort()

    async def honest() -> None:
        async with connect(f"ws://127.0.0.1:{port}", proxy=None, compression=None,
                           max_size=None) as ws:
            await ws.send(encode_subscribe([_topic(0)]))
            with contextlib.suppress(TimeoutError, ConnectionClosed):
                while True:  # ends 3 s after the last frame
                    await asyncio.wait_for(ws.recv(), 3)
                    res.honest += 1

    async def publisher(topic: bytes) -> None:
        frame = encode_publish(_fake_envelope(args.size, topic))
        async with connect(f"ws://127.0.0.1:{port}", proxy=None, compression=None,
                           max_size=None) as ws:
            await ws.send(encode_subscribe([OTHER_TOPIC]))
            interval = 1.0 / args.publish_rate
            start = time.monotonic()
            sent = 0
            while time.monotonic() - start < args.duration:  # bounded
                await ws.send(frame)
                sent += 1
                if topic == _topic(0):
                    res.published += 1
                await asyncio.sleep(max(0.0, start + sent * interval - time.monotonic()))

    async def sampler() -> None:
        while not stop.is_set():
            res.rss_kib.append(_rss_kib(pid))
            await asyncio.sleep(0.25)

    res.idle_kib = _rss_kib(pid)
    honest_task = asyncio.create_task(honest())
    await asyncio.sleep(0.3)
    tasks = [asyncio.create_task(slow_reader(_topic(i))) for i in range(args.readers)]
    sample = asyncio.create_task(sampler())
    await asyncio.gather(*(publisher(_topic(i)) for i in range(args.readers)))
    stop.set()
    await asyncio.wait(tasks, timeout=35)
    for t in tasks:
        t.cancel()
    await sample
    await asyncio.wait_for(honest_task, 60)
    end = time.monotonic() + args.cooldown
    while time.monotonic() < end:  # bounded
        res.after_kib.append(_rss_kib(pid))
        await asyncio.sleep(0.25)


def _baseline_tree(rev: str, dest: Path) -> Path:
    archive = dest / "baseline.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "archive", rev, "app", "net", "sds", "storage"], cwd=ROOT,
                       stdout=f, check=True, timeout=60)
    with tarfile.open(archive) as tar:
        tar.extractall(dest / "tree", filter="data")
    return dest / "tree"


def _mib(kib: float) -> str:
    return f"{kib / 1024:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", type=int, default=16)
    parser.add_argument("--read-rate", type=float, default=5.0, help="frames/s each reader reads")
    parser.add_argument("--publish-rate", type=float, default=12.0, help="publishes per second")
    parser.add_argument("--size", type=int, default=200_000, help="envelope bytes")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of attack")
    parser.add_argument("--cooldown", type=float, default=5.0, help="seconds sampled after")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision of 'before'")
    args = parser.parse_args(argv)

    print(f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC  {describe()}")
    print(f"attack: {args.readers} readers at {args.read_rate:g} frames/s (4 KiB receive buffer, "
          f"reconnecting), each on its own topic with a publisher at {args.publish_rate:g}/s of "
          f"{args.size:,}-byte envelopes, for {args.duration:g} s; 1 honest subscriber")
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="sdschat-slow-readers-") as tmp:
        trees = [("before", _baseline_tree(args.baseline, Path(tmp))), ("after", ROOT)]
        for label, tree in trees:
            proc, port = _start_relay(tree)
            try:
                res = Result(label)
                asyncio.run(_attack(port, args, proc.pid, res))
                results.append(res)
            finally:
                _stop(proc)
            print(f"  {label}: done", file=sys.stderr)

    print(f"\n{'relay':<8}{'idle MiB':>9}{'peak MiB':>10}{'mean MiB':>10}{'after MiB':>11}"
          f"{'drops':>7}{'1st drop s':>12}{'honest/published':>18}")
    for r in results:
        first = f"{r.first_drop_s:.1f}" if r.first_drop_s is not None else "-"
        print(f"{r.label:<8}{_mib(r.idle_kib):>9}{_mib(max(r.rss_kib)):>10}"
              f"{_mib(statistics.mean(r.rss_kib)):>10}{_mib(r.after_kib[-1]):>11}{r.drops:>7}"
              f"{first:>12}{f'{r.honest}/{r.published}':>18}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
