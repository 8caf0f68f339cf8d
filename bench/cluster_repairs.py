"""Repairs through a relay cluster against a lone relay (issue 26, item 1).

Real processes on 127.0.0.1: alice and bob on relay A, bob dropping 30% of
envelopes each way (``--drop-rate 0.3``), carol on relay B. ``lone``: one
relay for all three; ``cluster``: relays A and B sharing envelopes through one
real nats-server. Alice types 30 lines at 5 per second; the per-line delivery
latency at bob and carol is from the line being typed to it first appearing
in the receiver's stdout (polled every 20 ms). The modes alternate, one
process set per run::

    .venv/bin/python bench/cluster_repairs.py [--repeat 2]

Prints the machine calibration (``bench/machine.py``) first. Figures:
docs/protocol-defences.md ("Repairs through a relay cluster").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cluster"))

from machine import describe

from tests.cluster.cluster_helpers import cluster_relay
from tests.cluster.nats_servers import start_nats
from tests.procs import Cluster, Proc, running

LINES = 30


def _up(p: Proc) -> bool:
    return bool(p.select("connection", state="connected")) and bool(p.select("channel"))


def run(mode: str, seed: int) -> dict[str, list[float]]:
    """One run; per receiver, the latencies (s) of the lines it got within 240 s."""
    with tempfile.TemporaryDirectory(prefix="cluster-repairs-") as d:
        tmp = Path(d)
        nats = start_nats(tmp / "nats", 1) if mode == "cluster" else None
        try:
            with running(Cluster(tmp)) as c:
                if nats is not None:
                    (_a, url_a), (_b, url_b) = (cluster_relay(c, nats.urls, n) for n in ("a", "b"))
                else:
                    _relay, url_a = c.relay()
                    url_b = url_a
                lossy = ["--drop-rate", "0.3", "--drop-seed", str(seed),
                         "--lost-timeout-ms", "300000"]
                alice = c.headless("alice", tmp / "alice", relay=url_a)
                bob = c.headless("bob", tmp / "bob", relay=url_a, extra=lossy)
                carol = c.headless("carol", tmp / "carol", relay=url_b)
                for p in (alice, bob, carol):
                    p.wait_for(lambda p=p: _up(p), 30, "connected and joined")  # type: ignore[misc]
                seen: dict[str, dict[str, float]] = {"bob": {}, "carol": {}}
                done = threading.Event()

                def watch() -> None:
                    while not done.is_set():  # ends when the run does
                        now = time.monotonic()
                        for name, p in (("bob", bob), ("carol", carol)):
                            for e in p.select("delivered"):
                                seen[name].setdefault(str(e["text"]), now)
                        time.sleep(0.02)

                watcher = threading.Thread(target=watch, daemon=True)
                watcher.start()
                typed: dict[str, float] = {}
                for i in range(LINES):
                    line = f"line {i}"
                    typed[line] = time.monotonic()
                    alice.send(line)
                    time.sleep(0.2)
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline and min(map(len, seen.values())) < LINES:
                    time.sleep(0.2)
                done.set()
                watcher.join()
                return {
                    name: sorted(s[line] - typed[line] for line in typed if line in s)
                    for name, s in seen.items()
                }
        finally:
            if nats is not None:
                nats.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs per mode (default 2)")
    args = parser.parse_args(argv)
    print(describe(), flush=True)
    for rep in range(args.repeat):
        for mode in ("lone", "cluster"):
            result = run(mode, 7 + rep)
            parts = []
            for name, lat in result.items():
                if lat:
                    parts.append(f"{name} {len(lat)}/{LINES} p50 {statistics.median(lat):.2f} s "
                                 f"max {lat[-1]:.2f} s")
                else:
                    parts.append(f"{name} 0/{LINES}")
            print(f"{mode:8} run {rep}: " + ", ".join(parts), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
