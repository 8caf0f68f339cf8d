"""Relay cluster benchmark: 1 relay vs 2 and 3 relays on a NATS cluster, in one run.

Configurations, measured side by side (interleaved: the order rotates every
round, the median of ``--rounds`` is reported):

* ``lone``: one ``sdschat relay`` without ``--cluster`` (the reference);
* ``nats-1``: one relay with ``--cluster`` (what NATS costs a single relay);
* ``nats-2``, ``nats-3``: 2 and 3 relays, each on its own server of a
  3-server NATS cluster (routes on loopback), the subscribers spread evenly
  over them.

Every relay and nats-server is a real child process on 127.0.0.1 (relays run
``python -m app.cli relay`` with its defences on, limits raised so they do
not throttle). One publisher on the first relay, ``--subscribers`` subscribers
(raw websocket clients from ``bench/relay_fanout.py`` that count bytes), all
in this process. Every envelope is distinct (the cluster drops repeated bytes
as duplicates). Two phases per measurement:

* throughput: ``--messages`` publishes with at most ``--window`` in flight;
  deliveries/s = publishes x subscribers / time;
* latency: ``--lat-messages`` publishes at ``--lat-rate`` per second (well
  under capacity); per delivery, the time from the publisher's write to the
  subscriber's read; p50 and p99 over every delivery.

CPU per delivery: CPU time (``/proc/PID/task/*/schedstat``) of the relays in use
and of the nats-servers during the throughput phase, divided by its
deliveries, in microseconds; shown for the relays and for NATS.

This machine has 2 cores for everything (clients, relays, NATS): the
deliveries/s of the clustered configurations are NOT the capacity of a
cluster whose relays have machines of their own; CPU per delivery is what
the capacity model in docs/cluster.md builds on.

``--dedup-keys`` instead compares, interleaved in one run, the two ways a
relay can key its duplicate check: a SHA-256 of the whole envelope (the
envelope hash) and ``net.relay_cluster.dedup_key`` (nonce, AEAD tag, length
read from the parsed envelope), at 1 KiB and 40 KB.

Usage::

    .venv/bin/python bench/relay_cluster.py                 # 1 KiB envelopes
    .venv/bin/python bench/relay_cluster.py --size 40000 --messages 600
    .venv/bin/python bench/relay_cluster.py --dedup-keys

Bounded: each phase has a deadline, every child is stopped by its PID.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe
from relay_fanout import (
    TOPIC,
    RawWs,
    Tracker,
    _client_frame,
    _fake_envelope,
    _open_raw,
    _server_frame_len,
)

from net.relay_frames import encode_deliver, encode_ping, encode_publish, encode_subscribe
from tests.cluster.nats_servers import NatsServers, start_nats

ROOT = Path(__file__).resolve().parents[1]

def cpu_seconds(pid: int) -> float:
    """CPU seconds a process has run so far, at nanosecond resolution.

    The sum over its threads of ``/proc/PID/task/TID/schedstat`` (first field:
    nanoseconds on a CPU); ``/proc/PID/stat`` counts in 10 ms ticks, too
    coarse for a few seconds of work.
    """
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
    return total / 1e9


@dataclass
class RelayProc:
    popen: subprocess.Popen[bytes]
    port: int


def start_relay(cluster: list[str], log_dir: Path, name: str) -> RelayProc:
    argv = [sys.executable, "-m", "app.cli", "relay", "--host", "127.0.0.1", "--port", "0",
            "--stats-interval", "0", "--rate", "1e9", "--burst", "1000000000",
            "--queue", "4096", "--max-clients", "10000"]
    for url in cluster:
        argv += ["--cluster", url]
    err = log_dir / f"{name}.stderr"
    with err.open("wb") as f:
        popen = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=f)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # bounded
        for line in err.read_text(errors="replace").splitlines():
            if '"relay_listening"' in line:
                return RelayProc(popen, int(json.loads(line)["port"]))
        if popen.poll() is not None:
            break
        time.sleep(0.05)
    popen.kill()
    raise RuntimeError(f"relay {name} did not start:\n{err.read_text()[-2000:]}")


def stop(popen: subprocess.Popen[bytes]) -> None:
    if popen.poll() is None:
        popen.terminate()
        try:
            popen.wait(10)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(5)


class LatencyTracker(Tracker):
    """A Tracker that also records, per delivery, the time since its publish."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.sent_at: list[float] = []
        self.latencies: list[float] | None = None

    def update(self, i: int, count: int) -> None:
        before = self.counts[i]
        if self.latencies is not None and count > before:
            now = time.perf_counter()
            sent = self.sent_at
            self.latencies.extend(now - sent[m] for m in range(before, min(count, len(sent))))
        super().update(i, count)


@dataclass
class Result:
    rate: float
    p50_ms: float
    p99_ms: float
    relay_cpu_us: float
    nats_cpu_us: float


@dataclass
class Setup:
    name: str
    relays: list[RelayProc]
    nats_pids: list[int] = field(default_factory=list)


async def measure(setup: Setup, args: argparse.Namespace) -> Result:
    n_sub = args.subscribers
    total_msgs = 200 + args.messages + args.lat_messages
    envs = [_fake_envelope(args.size) for _ in range(total_msgs)]
    frames = [_client_frame(encode_publish(e)) for e in envs]
    frame_len = _server_frame_len(len(encode_deliver(envs[0])))
    ports = [r.port for r in setup.relays]
    subs: list[RawWs] = [await _open_raw(ports[i % len(ports)]) for i in range(n_sub)]
    pub = await _open_raw(ports[0])
    try:
        for i, s in enumerate(subs):
            s.send(_client_frame(encode_subscribe([TOPIC])))
            s.send(_client_frame(encode_ping(i + 1)))
        for s in subs:
            await asyncio.wait_for(s.frames.get(), 10)  # the Pong: subscribed (NATS too)
        tracker = LatencyTracker(n_sub)
        for i, s in enumerate(subs):
            s.start_counting(i, frame_len, tracker)
        nxt = 0
        for warm in range(1, 201):  # until one message reaches every subscriber
            pub.send(frames[nxt])
            nxt += 1
            tracker.set_target(warm)
            try:
                await asyncio.wait_for(tracker.reached.wait(), 0.2)
                break
            except TimeoutError:
                continue
        else:
            raise RuntimeError("subscribers never all received the warm-up message")
        # resynchronise: wait until every subscriber has every warm-up message
        tracker.set_target(nxt)
        await asyncio.wait_for(tracker.reached.wait(), 10)
        for s in subs:
            s.counted_bytes = 0
        tracker.counts = [0] * n_sub
        tracker.set_target(0)

        pids = [r.popen.pid for r in setup.relays]
        cpu0 = [cpu_seconds(p) for p in pids], [cpu_seconds(p) for p in setup.nats_pids]
        start = time.perf_counter()
        deadline = start + 60.0
        sent = 0
        window = args.window
        while sent < args.messages:  # bounded by count and deadline
            burst = min(window // 2 or 1, args.messages - sent)
            pub.send(b"".join(frames[nxt : nxt + burst]))
            nxt += burst
            sent += burst
            tracker.set_target(max(0, sent - window // 2))
            await asyncio.wait_for(tracker.reached.wait(), max(0.1, deadline - time.perf_counter()))
        tracker.set_target(sent)
        await asyncio.wait_for(tracker.reached.wait(), max(0.1, deadline - time.perf_counter()))
        elapsed = time.perf_counter() - start
        cpu1 = [cpu_seconds(p) for p in pids], [cpu_seconds(p) for p in setup.nats_pids]
        deliveries = sent * n_sub
        relay_cpu = sum(cpu1[0]) - sum(cpu0[0])
        nats_cpu = sum(cpu1[1]) - sum(cpu0[1])

        # latency at a fixed rate, counts continue from `sent`
        tracker.sent_at = [0.0] * sent
        tracker.latencies = []
        gap = 1.0 / args.lat_rate
        t0 = time.perf_counter()
        for k in range(args.lat_messages):  # bounded by count
            target = t0 + k * gap
            delay = target - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tracker.sent_at.append(time.perf_counter())
            pub.send(frames[nxt])
            nxt += 1
        tracker.set_target(sent + args.lat_messages)
        await asyncio.wait_for(tracker.reached.wait(), 30)
        lat = sorted(tracker.latencies)
        return Result(
            rate=deliveries / elapsed,
            p50_ms=lat[len(lat) // 2] * 1e3,
            p99_ms=lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3,
            relay_cpu_us=relay_cpu / deliveries * 1e6,
            nats_cpu_us=nats_cpu / deliveries * 1e6,
        )
    finally:
        for s in [*subs, pub]:
            s.close()


def dedup_key_costs(rounds: int = 5, n: int = 2000) -> int:
    """Microseconds per envelope of the two duplicate-check keys, interleaved."""
    import hashlib
    import timeit

    from net.relay_cluster import dedup_key

    print(describe())
    print(f"{'size':>8}{'SHA-256 us':>12}{'dedup_key us':>14}   (median of {rounds} rounds)")
    for size in (1024, 40_000):
        env = _fake_envelope(size)
        sha: list[float] = []
        key: list[float] = []
        for r in range(rounds):
            pair = [
                ("sha", lambda env=env: hashlib.sha256(env).digest()),
                ("key", lambda env=env: dedup_key(env)),
            ]
            for name, fn in pair if r % 2 == 0 else pair[::-1]:
                t = timeit.timeit(fn, number=n) / n * 1e6
                (sha if name == "sha" else key).append(t)
        print(f"{size:>8}{statistics.median(sha):>12.1f}{statistics.median(key):>14.1f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=24)
    parser.add_argument("--messages", type=int, default=2000, help="publishes (throughput)")
    parser.add_argument("--size", type=int, default=1024, help="envelope size in bytes")
    parser.add_argument("--window", type=int, default=64, help="messages in flight")
    parser.add_argument("--lat-messages", type=int, default=300)
    parser.add_argument("--lat-rate", type=float, default=100.0, help="publishes/s (latency)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default="lone,nats-1,nats-2,nats-3")
    parser.add_argument("--dedup-keys", action="store_true",
                        help="compare the duplicate-check keys instead (in process)")
    args = parser.parse_args(argv)
    if args.dedup_keys:
        return dedup_key_costs()
    names = args.configs.split(",")

    machine = describe()
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-cluster-") as tmp:
        log_dir = Path(tmp)
        nats: NatsServers = start_nats(log_dir / "nats", 3)
        procs: list[RelayProc] = []
        try:
            lone = start_relay([], log_dir, "lone")
            procs.append(lone)
            urls = nats.urls
            clustered = [
                start_relay([urls[(i + j) % 3] for j in range(3)], log_dir, f"relay-{i}")
                for i in range(3)
            ]
            procs += clustered
            nats_pids = [s.pid for s in nats.servers]
            setups = {
                "lone": Setup("lone", [lone]),
                "nats-1": Setup("nats-1", clustered[:1], nats_pids),
                "nats-2": Setup("nats-2", clustered[:2], nats_pids),
                "nats-3": Setup("nats-3", clustered[:3], nats_pids),
            }
            results: dict[str, list[Result]] = {n: [] for n in names}
            for r in range(args.rounds):
                order = names[r % len(names):] + names[: r % len(names)]
                for name in order:
                    res = asyncio.run(measure(setups[name], args))
                    results[name].append(res)
                    print(f"round {r + 1} {name:7s} {res.rate:10,.0f} deliveries/s "
                          f"p50 {res.p50_ms:6.2f} ms p99 {res.p99_ms:6.2f} ms "
                          f"relay {res.relay_cpu_us:5.1f} us nats {res.nats_cpu_us:5.1f} us "
                          "CPU/delivery", file=sys.stderr, flush=True)
        finally:
            for p in procs:
                stop(p.popen)
            nats.close()

    print(f"\nrelay cluster: {args.subscribers} subscribers spread over the relays, 1 publisher "
          f"on the first, {args.size}-byte envelopes, {args.messages} publishes (window "
          f"{args.window}), latency at {args.lat_rate:g} publishes/s x {args.lat_messages}; "
          f"median of {args.rounds} interleaved rounds")
    print(machine)
    print(f"{'config':<8}{'deliveries/s':>14}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'relay CPU us/deliv':>20}{'NATS CPU us/deliv':>19}")
    for name in names:
        rs = results[name]
        med = Result(*(statistics.median(getattr(x, f) for x in rs) for f in
                       ("rate", "p50_ms", "p99_ms", "relay_cpu_us", "nats_cpu_us")))
        print(f"{name:<8}{med.rate:>14,.0f}{med.p50_ms:>9.2f}{med.p99_ms:>9.2f}"
              f"{med.relay_cpu_us:>20.1f}{med.nats_cpu_us:>19.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
