"""The hostile soak's flood in virtual time: what the protocol alone does to honest latency.

``bench/soak.py --hostile`` runs real processes on a shared 2-core machine, where an
honest line's latency under the flood is the protocol's rules and the CPU the nodes
spend on the flood, tangled. This bench drives only the SDS core (``sds.Channel``,
sans-I/O) in virtual time, so no CPU is in it: the soak's shape, 5 honest members typing
0.5 lines/s each, every envelope dropped with ``--drop`` (0.2) on the way out of its
sender and again on the way into each receiver (``sdschat join --drop-rate``), 20-120 ms
of latency; a **quiet** phase, then a **flood** phase in which ``--flood-keys`` (11)
identities each send every 2 s a content message naming 1,000 ids nobody has (the
soak's ``FLOOD``). Reported per phase: honest delivery p50/p99 over (line, receiver)
pairs, and as multiples of the quiet phase's; lines not delivered everywhere. Each
``--variant`` (``name:field=value,...``, sds.Config fields) runs in the same invocation
with the same seed, beside ``base`` (``sds.Config.fast(1000)``, the soak's ``--fast``).

Usage::

    .venv/bin/python bench/sim_flood.py
    .venv/bin/python bench/sim_flood.py --variant budget100:max_missing_per_sender=100

Every loop is bounded in count and virtual time.
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sds
from sds import sds_pb2
from sds.ids import message_id_for

CHANNEL = "soak"
START_MS = 1_800_000_000_000


def pct(values: list[int], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] / 1000


class World:
    """Honest channels, a lossy broadcast network and the flood, in virtual time."""

    def __init__(self, cfg: sds.Config, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self.now = START_MS
        self.nodes = [
            sds.Channel(CHANNEL, f"n{i}", cfg, self.now, random.Random(opts.seed * 100 + i))
            for i in range(opts.nodes)
        ]
        self.queue: list[tuple[int, int, int, bytes]] = []  # (at, seq, receiver index, data)
        self.seq = 0
        self.sent_at: dict[str, int] = {}  # honest line id -> when it was typed
        self.author: dict[str, int] = {}
        self.got: dict[tuple[str, int], int] = {}  # (line id, receiver) -> delivered at
        self.flood_ids = [os.urandom(16).hex() for _ in range(opts.flood_keys)]
        self.flood_sent = 0

    def broadcast(self, src: int | None, data: bytes) -> None:
        if src is not None and self.rng.random() < self.opts.drop:
            return  # dropped on the way out (every receiver misses it)
        for i in range(len(self.nodes)):
            if i == src or self.rng.random() < self.opts.drop:
                continue
            self.seq += 1
            heapq.heappush(self.queue, (self.now + self.rng.randint(20, 120), self.seq, i, data))

    def drain(self, i: int) -> None:
        ch = self.nodes[i]
        for ev in ch.events():
            if isinstance(ev, sds.MessageDelivered) and ev.message_id in self.sent_at:
                self.got.setdefault((ev.message_id, i), self.now)
        for dg in ch.datagrams_to_send():
            self.broadcast(i, dg.data)

    def type_line(self, i: int) -> None:
        ch = self.nodes[i]
        data = ch.send(f"n{i} line".encode(), self.now)
        for ev in ch.events():
            if isinstance(ev, sds.MessageSent):
                self.sent_at[ev.message_id] = self.now
                self.author[ev.message_id] = i
        self.broadcast(i, data)
        self.drain(i)

    def flood(self) -> None:
        for sender in self.flood_ids:
            lamport = self.now
            content = b"flood"
            mid = message_id_for(CHANNEL, sender, lamport, content, os.urandom(8))
            m = sds_pb2.SdsMessage(
                sender_id=sender, message_id=mid, channel_id=CHANNEL,
                lamport_timestamp=lamport, content=content,
                causal_history=[sds_pb2.HistoryEntry(message_id=os.urandom(32).hex())
                                for _ in range(self.opts.flood_history)],
            )  # fmt: skip
            self.broadcast(None, m.SerializeToString())
            self.flood_sent += 1

    def run_until(self, until: int, flooding: bool) -> None:
        n = len(self.nodes)
        next_type = [self.now + int(self.rng.uniform(0, 2000)) for _ in range(n)]
        next_flood = self.now if flooding else None
        for _ in range(10_000_000):  # bounded by ``until`` too
            timers = [(ch.get_timer(), i) for i, ch in enumerate(self.nodes)]
            cands = [t for t in (
                self.queue[0][0] if self.queue else None,
                min(next_type),
                next_flood,
                *(t for t, _ in timers),
            ) if t is not None]  # fmt: skip
            at = max(self.now, min(cands))
            if at > until:
                break
            self.now = at
            if next_flood is not None and next_flood <= at:
                self.flood()
                next_flood = at + 2000
            for i in range(n):
                if next_type[i] <= at:
                    self.type_line(i)
                    next_type[i] = at + int(1000 / self.opts.rate)
            while self.queue and self.queue[0][0] <= at:
                _, _, i, data = heapq.heappop(self.queue)
                self.nodes[i].receive(data, at)
                self.drain(i)
            for t, i in timers:
                if t is not None and t <= at:
                    self.nodes[i].handle_timer(at)
                    self.drain(i)
        self.now = until

    def phase(self, t_from: int, t_to: int) -> dict[str, Any]:
        lines = [m for m, at in self.sent_at.items() if t_from <= at < t_to]
        lat = [self.got[(m, i)] - self.sent_at[m] for m in lines
               for i in range(len(self.nodes)) if i != self.author[m] and (m, i) in self.got]
        missing = sum(1 for m in lines for i in range(len(self.nodes))
                      if i != self.author[m] and (m, i) not in self.got)  # fmt: skip
        return {"lines": len(lines), "p50_s": pct(lat, 0.5), "p99_s": pct(lat, 0.99),
                "pairs_missing": missing}  # fmt: skip


def run(cfg: sds.Config, opts: argparse.Namespace) -> dict[str, Any]:
    w = World(cfg, opts)
    t0 = w.now
    cpu0 = time.process_time()
    w.run_until(t0 + opts.quiet_s * 1000, flooding=False)
    t1 = w.now
    w.run_until(t1 + opts.flood_s * 1000, flooding=True)
    t2 = w.now
    w.run_until(t2 + opts.drain_s * 1000, flooding=False)  # typing goes on, no flood
    lost = sum(ch.stats().get("lost", 0) for ch in w.nodes)
    return {"quiet": w.phase(t0, t1), "flood": w.phase(t1, t2), "flood_sent": w.flood_sent,
            "cpu_s": round(time.process_time() - cpu0, 1), "lost": lost}  # fmt: skip


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, _, fields = text.partition(":")
    changes: dict[str, Any] = {}
    for item in filter(None, fields.split(",")):
        key, _, value = item.partition("=")
        if value in ("true", "false"):
            changes[key] = value == "true"
        else:
            changes[key] = int(value) if value.lstrip("-").isdigit() else value
    return name, changes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--rate", type=float, default=0.5, help="lines per second per node")
    ap.add_argument("--drop", type=float, default=0.2)
    ap.add_argument("--flood-keys", type=int, default=11)
    ap.add_argument("--flood-history", type=int, default=1000,
                    help="invented ids each flood message names (the soak's: 1,000)")
    ap.add_argument("--quiet-s", type=int, default=90)
    ap.add_argument("--flood-s", type=int, default=90)
    ap.add_argument("--drain-s", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:FIELD=V,...")
    opts = ap.parse_args(argv)
    if not (1 <= opts.nodes <= 20 and 0 <= opts.drop < 1 and 0 < opts.rate <= 10
            and 0 <= opts.flood_keys <= 100 and 0 <= opts.flood_history <= 1000
            and 0 < opts.quiet_s + opts.flood_s <= 3600):
        ap.error("out of range")  # fmt: skip
    base = sds.Config.fast(1000)
    variants: list[tuple[str, dict[str, Any]]] = [("base", {})]
    variants += [parse_variant(v) for v in opts.variant]
    print(f"{opts.nodes} nodes, drop {opts.drop} each way, {opts.rate} lines/s/node, "
          f"{opts.flood_keys} flooding identities naming {opts.flood_history} invented ids "
          f"each; quiet {opts.quiet_s} s, flood "
          f"{opts.flood_s} s, seed {opts.seed} (virtual time)")  # fmt: skip
    print("| variant | quiet p50 / p99 s | flood p50 / p99 s | flood x quiet | pairs missing "
          "(quiet, flood) | lost | CPU s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, changes in variants:
        r = run(base.with_changes(**changes) if changes else base, opts)
        q, f = r["quiet"], r["flood"]
        rx = (f"{f['p50_s'] / q['p50_s']:.1f}x / {f['p99_s'] / q['p99_s']:.1f}x"
              if q["p50_s"] and q["p99_s"] else "-")  # fmt: skip
        print(f"| {name} | {q['p50_s']:.2f} / {q['p99_s']:.2f} | {f['p50_s']:.2f} / "
              f"{f['p99_s']:.2f} | {rx} | {q['pairs_missing']}, {f['pairs_missing']} | "
              f"{r['lost']} | {r['cpu_s']} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
