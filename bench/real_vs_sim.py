"""Real processes against the simulator (issue 28 item 3): one script, both ways.

Not run in CI (a smoke size is, in tests/sim/test_real_vs_sim.py). Real processes on
127.0.0.1 only: one ``sdschat relay`` and ``--nodes`` (100) headless ``sdschat join
rvs --drop-rate P`` nodes with the fast timings at ``--time-scale`` (5,000 ms: sync
10 s; 100 nodes at 1 s saturate two cores, see docs/sim.md), each with its own data
directory. A fixed script (seeded): ``--messages`` (40) lines, one every
``1/--rate`` (0.2) s, each typed into the stdin of a node drawn at random; then
``--drain`` (100) seconds with nobody typing. The nodes are stopped (stdin closed),
their SQLite event logs exported (``sdschat export``) and the same shape is
simulated (``app.sim.simulation.run_sim``: same N, messages, rate, drain, fast timings at the
same scale, content size, and the loss of ``--drop-rate P``, which is ``--loss P
--send-loss P``: a dropped outgoing envelope is missed by every receiver, a dropped
incoming one by one). The sim's latency range is the real run's one hop (p5 to p85
of the deliveries of messages the member never missed), unless ``--sim-latency``;
``--sim-seeds`` sims are averaged.

A tap (a plain relay client of the bench, subscribed to the channel's topic,
that never publishes) opens every envelope the relay forwards, with the public
channel's key: broadcasts and bytes by kind (content; again: a resend or a
repair answer, the same bytes; sync) and per sender, which gives one member's
traffic in and out. The nodes' ``closed`` counters give the envelopes they
received (their deliveries).

Compared (both from the event rows, with the same code): content messages
sent, content deliveries, members holding every message, syncs sent, repair
requests, repair answers, resends, messages declared lost; and from the
traffic: deliveries per content delivery and SDS bytes uploaded per content
message. Counts of content and convergence must be equal; the others within
``--tolerance`` (20%) of the sim. Exit 0 when everything is within, 1 if not.

Usage::

    .venv/bin/python bench/real_vs_sim.py                       # 100 nodes, ~8-10 min
    .venv/bin/python bench/real_vs_sim.py --nodes 8 --messages 10 --rate 1 \
        --time-scale 1000 --drain 20                             # smoke, ~1 min
    .venv/bin/python bench/real_vs_sim.py --json out.json --keep DIR

Every wait is bounded; children are ended by their PID only (also on an error).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from machine import calibrate, describe
from soak import Child, free_port, proc_status_kib, sdschat

ROOT = Path(__file__).resolve().parents[1]
CHANNEL = "rvs"
KINDS = ("MessageSent", "MessageDelivered", "SyncSent", "RepairRequested", "RepairSent",
         "MessageResent", "MessageLost")


class Tap:
    """A relay client that only listens: every envelope of the channel, opened."""

    def __init__(self, url: str, channel: str) -> None:
        from net.channel_key import derive_channel_key

        self.url = url
        self.key = derive_channel_key(channel, None)
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.lock = threading.Lock()
        #: (monotonic s, sender id, kind, envelope bytes, sds bytes (the carried
        #: messages' included, as the sim counts them), carried copies)
        self.rows: list[tuple[float, str, str, int, int, int]] = []
        self.errors = 0
        self._seen: set[str] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from websockets.sync.client import connect

        from net.envelope import EnvelopeError, open_envelope
        from net.relay_frames import decode_frame, encode_subscribe

        with connect(self.url, max_size=None, proxy=None) as ws:
            ws.send(encode_subscribe([self.key.topic]))
            self.ready.set()
            for _ in range(10_000_000):  # bounded; ends on stop
                if self.stop.is_set():
                    return
                try:
                    raw = ws.recv(timeout=0.2)
                except TimeoutError:
                    continue
                except Exception:
                    return
                if not isinstance(raw, bytes):
                    continue
                frame = decode_frame(raw)
                if frame.WhichOneof("body") != "deliver":
                    continue
                env = frame.deliver.envelope
                try:
                    opened = open_envelope(env, self.key)
                except EnvelopeError:
                    self.errors += 1
                    continue
                msg = opened.sds_message
                assert msg is not None
                sds_len = len(opened.sds_bytes)
                for c in opened.carried:  # envelopes riding on it (app/node/carrying.py)
                    try:
                        sds_len += len(open_envelope(c, self.key).sds_bytes)
                    except EnvelopeError:
                        self.errors += 1
                if not msg.content:
                    kind = "sync"
                elif msg.message_id in self._seen:
                    kind = "again"
                else:
                    self._seen.add(msg.message_id)
                    kind = "content"
                with self.lock:
                    self.rows.append((time.monotonic(), opened.sender_id, kind, len(env),
                                      sds_len, len(opened.carried)))

    def close(self) -> None:
        self.stop.set()
        self._thread.join(5)


def _read_events(out: Path) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(glob.glob(str(out / "events" / "*.parquet")))
    cols = ["node_id", "kind", "message_id", "sender_id", "time_ms", "content_bytes", "detail"]
    if not files:
        return []
    return pa.concat_tables([pq.read_table(f, columns=cols) for f in files]).to_pylist()


def summarise(rows: list[dict[str, Any]], nodes: set[str] | None = None) -> dict[str, Any]:
    """Counts by kind, convergence and delivery latency from event rows (real or sim)."""
    kinds = Counter(r["kind"] for r in rows)
    sent = {r["message_id"]: r for r in rows if r["kind"] == "MessageSent"}
    held: dict[str, set[str]] = {}
    for r in rows:
        if r["kind"] in ("MessageSent", "MessageDelivered"):
            held.setdefault(r["node_id"], set()).add(r["message_id"])
    members = nodes if nodes is not None else set(held)
    holding_all = sum(1 for n in members if set(sent) <= held.get(n, set()))
    lat = sorted(r["time_ms"] - sent[r["message_id"]]["time_ms"] for r in rows
                 if r["kind"] == "MessageDelivered" and r["message_id"] in sent)
    # first-hand deliveries: the member never missed the message (no MessagesMissing
    # named it there), so the latency is one hop, not a repair
    noticed: set[tuple[str, str]] = set()
    for r in rows:
        if r["kind"] == "MessagesMissing" and r["detail"]:
            with contextlib.suppress(ValueError, TypeError, KeyError):
                for e in json.loads(r["detail"]).get("missing", ()):
                    noticed.add((r["node_id"], e["message_id"]))
    direct = sorted(r["time_ms"] - sent[r["message_id"]]["time_ms"] for r in rows
                    if r["kind"] == "MessageDelivered" and r["message_id"] in sent
                    and (r["node_id"], r["message_id"]) not in noticed)
    requested = 0
    for r in rows:
        if r["kind"] == "RepairRequested" and r["detail"]:
            with contextlib.suppress(ValueError, TypeError):
                requested += len(json.loads(r["detail"]).get("message_ids", ()))
    content_sizes = [r["content_bytes"] for r in sent.values() if r["content_bytes"]]

    def q(p: float, xs: list[int] = lat) -> float | None:
        return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else None

    return {
        "kinds": {k: kinds.get(k, 0) for k in KINDS},
        "repair_ids_requested": requested,
        "members": len(members),
        "holding_every_message": holding_all,
        "latency_ms": {"p5": q(0.05), "p50": q(0.5), "p85": q(0.85), "p99": q(0.99),
                       "max": lat[-1] if lat else None},
        "first_hand_latency_ms": {"p5": q(0.05, direct), "p50": q(0.5, direct),
                                  "p85": q(0.85, direct), "p95": q(0.95, direct),
                                  "count": len(direct)},
        "content_bytes": round(sum(content_sizes) / len(content_sizes)) if content_sizes else 0,
    }


def tap_traffic(tap: Tap, member: str | None, phases: dict[str, tuple[float, float]]
                ) -> dict[str, Any]:
    """Broadcasts and bytes by kind; one member's bytes per second in and out per phase."""
    with tap.lock:
        rows = list(tap.rows)
    by_kind: dict[str, dict[str, int]] = {}
    for _, _, kind, env, sds, carried in rows:
        k = by_kind.setdefault(kind, {"broadcasts": 0, "envelope_bytes": 0, "sds_bytes": 0,
                                      "carried": 0})
        k["broadcasts"] += 1
        k["envelope_bytes"] += env
        k["sds_bytes"] += sds
        k["carried"] += carried
    out: dict[str, Any] = {"by_kind": by_kind, "phases": {}}
    for name, (t0, t1) in phases.items():
        secs = max(1e-3, t1 - t0)
        inside = [r for r in rows if t0 <= r[0] < t1]
        up = sum(r[3] for r in inside if r[1] == member)
        down = sum(r[3] for r in inside if r[1] != member)
        out["phases"][name] = {
            "seconds": round(secs, 1),
            "broadcasts": len(inside),
            "member_up_bytes_per_s": round(up / secs, 1),
            "member_down_bytes_per_s": round(down / secs, 1),  # before its own drop
            "broadcasts_by_kind": dict(Counter(r[2] for r in inside)),
        }
    return out


class RealRun:
    def __init__(self, opts: argparse.Namespace, tmp: Path) -> None:
        self.opts = opts
        self.tmp = tmp
        (tmp / "logs").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.children: list[Child] = []
        self.nodes: list[Child] = []
        self.sender_of: dict[str, str] = {}  # node name -> sender id (from its events)
        self.closed: dict[str, dict[str, Any]] = {}
        self.peak_rss_kib = 0
        self.cpu_s: dict[str, float] = {}  # CPU seconds of each node (last sample)
        self.lock = threading.Lock()

    def _on_event(self, child: Child, obj: dict[str, Any]) -> None:
        if obj.get("event") == "ready" and obj.get("sender"):
            with self.lock:
                self.sender_of[child.name] = obj["sender"]

    def start(self) -> None:
        o = self.opts
        relay = Child(sdschat("relay", "--host", "127.0.0.1", "--port", str(self.port),
                              "--stats-interval", "0", "--max-clients-per-ip", "0",
                              "--max-clients", str(o.nodes + 16),
                              # a bench relay: a loaded machine must not cut the tap or
                              # a node as a slow reader (that would be another experiment)
                              "--queue", "65536", "--queue-bytes", "256M",
                              "--max-lag", "600", "--memory-budget", "1G"),
                      "relay", self.tmp / "logs", stdin=False)
        self.children.append(relay)
        relay.wait_log("relay_listening", 60)
        self.tap = Tap(self.url, CHANNEL)
        if not self.tap.ready.wait(30):
            raise RuntimeError("the tap could not subscribe")
        conf = self.tmp / "node.toml"  # the --fast timings at --time-scale
        (self.tmp / "trace").mkdir(exist_ok=True)
        conf.write_text(f"fast = true\nfast_scale_ms = {o.time_scale}\n")
        for i in range(o.nodes):
            argv = sdschat("join", CHANNEL, "--headless", "--config", str(conf), "--relay",
                           self.url, "--data-dir", str(self.tmp / f"n{i:03d}"), "--name",
                           f"n{i:03d}", "--drop-rate", str(o.drop_rate),
                           "--drop-seed", str(o.seed * 1000 + i))
            if o.carry_trace:  # the same command through the tracing wrapper
                argv = [sys.executable, str(ROOT / "bench" / "carry_trace.py"),
                        str(self.tmp / "trace" / f"n{i:03d}.jsonl"), *argv[3:]]
            child = Child(argv, f"n{i:03d}", self.tmp / "logs", stdin=True,
                          on_event=self._on_event)
            self.children.append(child)
            self.nodes.append(child)
            if (i + 1) % o.start_batch == 0:
                self._wait_ready(self.nodes, o.join_timeout)
        self._wait_ready(self.nodes, o.join_timeout)

    def _wait_ready(self, nodes: list[Child], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # bounded
            if all(c.ready for c in nodes):
                return
            for c in nodes:
                if not c.alive():
                    raise RuntimeError(f"{c.name} exited:\n{c.tail()}")
            time.sleep(0.1)
        raise RuntimeError("nodes did not join in time: "
                           + ", ".join(c.name for c in nodes if not c.ready))

    def _sample(self) -> None:
        total = sum(proc_status_kib(c.pid, "VmRSS") or 0 for c in self.nodes)
        self.peak_rss_kib = max(self.peak_rss_kib, total)
        tick = os.sysconf("SC_CLK_TCK")
        for c in self.nodes:
            with contextlib.suppress(OSError, ValueError, IndexError):
                f = Path(f"/proc/{c.pid}/stat").read_text().rsplit(")", 1)[1].split()
                self.cpu_s[c.name] = (int(f[11]) + int(f[12])) / tick

    def cpu_total(self) -> float:
        return round(sum(self.cpu_s.values()), 1)

    def script(self) -> dict[str, tuple[float, float]]:
        """Type the lines; then the drain. Returns the phases (monotonic seconds)."""
        o = self.opts
        rng = random.Random(o.seed)
        self._sample()
        self.cpu_at_start = self.cpu_total()
        t0 = time.monotonic() + 1.0
        next_sample = 0.0
        for i in range(o.messages):  # bounded by --messages
            at = t0 + i / o.rate
            while (now := time.monotonic()) < at:
                time.sleep(min(0.05, at - now))
            node = self.nodes[rng.randrange(len(self.nodes))]
            if not node.write_line(f"rvs {i:04d} from {node.name}"):
                raise RuntimeError(f"{node.name} refused a line:\n{node.tail()}")
            if time.monotonic() >= next_sample:
                self._sample()
                next_sample = time.monotonic() + 2.0
        busy_end = t0 + o.messages / o.rate
        end = busy_end + o.drain
        while (now := time.monotonic()) < end:  # bounded by --drain
            time.sleep(min(2.0, end - now))
            self._sample()
        return {"busy": (t0, busy_end), "settling": (busy_end, busy_end + o.drain / 2),
                "idle": (busy_end + o.drain / 2, end)}

    def stop(self) -> None:
        for c in self.nodes:
            c.close_stdin()
        deadline = time.monotonic() + 60
        for c in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.popen.wait(max(0.1, deadline - time.monotonic()))
            if c.closed_counters is not None:
                self.closed[c.name] = c.closed_counters
        self.tap.close()

    def release(self) -> None:
        for c in self.children:
            c.release()


def export(tmp: Path, dirs: list[Path], out: Path) -> None:
    subprocess.run(sdschat("export", "--out", str(out), "--run", "real", *map(str, dirs)),
                   cwd=ROOT, check=True, capture_output=True, timeout=600)


def compare(real: dict[str, Any], sim: dict[str, Any], tol: float) -> list[dict[str, Any]]:
    rows = []

    def add(name: str, r: float, s: float, rule: str) -> None:
        if rule == "equal":
            ok = r == s
        else:
            ok = abs(r - s) <= tol * max(abs(s), 1e-9) or abs(r - s) <= 2  # small counts
        rows.append({"metric": name, "real": r, "sim": s,
                     "ratio": round(r / s, 3) if s else None, "rule": rule, "ok": ok})

    rk, sk = real["kinds"], sim["kinds"]
    add("content messages sent", rk["MessageSent"], sk["MessageSent"], "equal")
    add("content deliveries", rk["MessageDelivered"], sk["MessageDelivered"], "equal")
    add("members holding every message", real["holding_every_message"],
        sim["holding_every_message"], "equal")
    add("syncs sent", rk["SyncSent"], sk["SyncSent"], "tolerance")
    add("repair ids requested", real["repair_ids_requested"], sim["repair_ids_requested"],
        "tolerance")
    add("repair answers (RepairSent)", rk["RepairSent"], sk["RepairSent"], "tolerance")
    add("resends", rk["MessageResent"], sk["MessageResent"], "tolerance")
    add("declared lost", rk["MessageLost"], sk["MessageLost"], "tolerance")
    add("deliveries per content delivery", real["deliveries_per_content"],
        sim["deliveries_per_content"], "tolerance")
    add("SDS bytes uploaded per content message", real["sds_bytes_per_message"],
        sim["sds_bytes_per_message"], "tolerance")
    # (a run kept from before carrying has none)
    none = {"copies_sent": 0, "copies_again": 0, "copies_attached": 0, "arrivals_new": 0}
    rc, sc = real.get("carried") or none, sim.get("carried") or none
    # the core's choice: copies attached to new lines (the sim also counts copies again
    # on every resend and answer of a line that carried others, where a real member
    # that got the line only as a carried copy holds it without them: on the wire,
    # real and sim differ there)
    add("carried copies attached to lines", rc.get("copies_attached", 0),
        sc["copies_sent"] - sc.get("copies_again", 0), "tolerance")
    add("carried arrivals new to the member", rc["arrivals_new"], sc["arrivals_new"],
        "tolerance")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--messages", type=int, default=40)
    ap.add_argument("--rate", type=float, default=0.2, help="lines per second (all nodes)")
    ap.add_argument("--drop-rate", type=float, default=0.05)
    ap.add_argument("--drain", type=float, default=100.0, help="seconds after the last line")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-scale", type=int, default=5000,
                    help="ms unit of the fast timings (nodes: fast_scale_ms; sim: "
                    "--time-scale); larger keeps timings above a loaded machine's latency")
    ap.add_argument("--tolerance", type=float, default=0.2)
    ap.add_argument("--sim-latency", default="auto", help="LO:HI ms, or auto (the real run's)")
    ap.add_argument("--sim-seeds", type=int, default=2, help="sim runs (seeds) to average")
    ap.add_argument("--start-batch", type=int, default=10, help="nodes started before a wait")
    ap.add_argument("--join-timeout", type=float, default=180.0)
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--carry-trace", action="store_true",
                    help="log every Channel.to_carry decision (sds.channel.carry_trace) in "
                    "the real nodes and the sims, and print a summary of both")
    ap.add_argument("--keep", default=None, help="keep logs, data and exports in this directory")
    ap.add_argument("--real-from", default=None, metavar="JSON",
                    help="no real run: take it from this earlier --json, with its events "
                    "in --keep DIR/real (the sim half again, e.g. with another latency)")
    o = ap.parse_args(argv)
    if (o.nodes < 2 or o.messages < 1 or o.rate <= 0 or not 0 <= o.drop_rate < 1
            or o.time_scale < 100):
        ap.error("need --nodes >= 2, --messages >= 1, --rate > 0, 0 <= --drop-rate < 1, "
                 "--time-scale >= 100")
    if o.nodes > 200 or o.messages > 2000 or o.drain > 900:
        ap.error("bounded: at most 200 nodes, 2,000 messages, 900 s of drain")
    avail = 0
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) // 1024
    if avail and avail < 70 * o.nodes + 500:
        ap.error(f"{o.nodes} nodes need about {70 * o.nodes + 500} MB; {avail} MB available")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()
    machine = describe(calibrate())
    print(f"{started}; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {machine}", flush=True)
    tmp = Path(o.keep) if o.keep else Path(tempfile.mkdtemp(prefix="rvs-"))
    tmp.mkdir(parents=True, exist_ok=True)
    if o.real_from:  # the real half of an earlier run (its --json and --keep directory)
        real = json.loads(Path(o.real_from).read_text())["real"]
        real.update(summarise(_read_events(tmp / "real")))
        return finish(o, tmp, real, started, load, machine)
    run = RealRun(o, tmp)
    wall0 = time.monotonic()
    try:
        run.start()
        print(f"{o.nodes} nodes joined in {time.monotonic() - wall0:.0f} s", flush=True)
        phases = run.script()
        run.stop()
    finally:
        run.release()
    real_wall = time.monotonic() - wall0
    export(tmp, [tmp / f"n{i:03d}" for i in range(o.nodes)], tmp / "real")
    real_rows = _read_events(tmp / "real")
    real = summarise(real_rows, {r["node_id"] for r in real_rows})
    member = run.sender_of.get("n000")
    traffic = tap_traffic(run.tap, member, phases)
    received = sum(int(c.get("received", 0)) for c in run.closed.values())
    content_deliveries = real["kinds"]["MessageDelivered"]
    real["deliveries_per_content"] = round(received / max(1, content_deliveries), 3)
    real["envelopes_received"] = received
    real["nodes_closed_cleanly"] = len(run.closed)
    sds_total = sum(k["sds_bytes"] for k in traffic["by_kind"].values())
    env_total = sum(k["envelope_bytes"] for k in traffic["by_kind"].values())
    real["sds_bytes_per_message"] = round(sds_total / o.messages)
    real["envelope_bytes_per_message"] = round(env_total / o.messages)
    real["traffic"] = traffic
    carried_in = sum(int(c.get("carried_received", 0)) for c in run.closed.values())
    carried_held = sum(int(c.get("carried_duplicates", 0)) for c in run.closed.values())
    real["carried"] = {
        "copies_sent": sum(k["carried"] for k in traffic["by_kind"].values()),
        "copies_attached": sum(int(c.get("carried_sent", 0)) for c in run.closed.values()),
        # what the cores picked (to_carry); attached less those the node had no envelope for
        "copies_wanted": sum(int(c.get("carried_wanted", 0)) for c in run.closed.values()),
        "arrivals_new": carried_in - carried_held,
        "arrivals_held": carried_held,
    }
    real["tap_errors"] = run.tap.errors
    real["wall_seconds"] = round(real_wall, 1)
    real["peak_rss_mb_all_nodes"] = round(run.peak_rss_kib / 1024)
    real["node_cpu_seconds_script_and_drain"] = round(run.cpu_total() - run.cpu_at_start, 1)
    real["script_and_drain_seconds"] = round(o.messages / o.rate + o.drain, 1)
    return finish(o, tmp, real, started, load, machine)


def finish(o: argparse.Namespace, tmp: Path, real: dict[str, Any], started: str,
           load: tuple[float, float, float], machine: str) -> int:
    traffic = real["traffic"]
    real_wall = real["wall_seconds"]

    lat = real["latency_ms"]
    hop = real["first_hand_latency_ms"]
    if o.sim_latency == "auto":
        # one hop: the first-hand deliveries' p5 to p85 (their last 10% waited for a
        # dependency that was repaired: 3-10 s in a 100-node run, not a hop)
        lo = max(1, int(hop["p5"] or 1))
        hi = max(lo, int(hop["p85"] or lo))
    else:
        a, _, b = o.sim_latency.partition(":")
        lo, hi = int(a), int(b)
    sims = [run_sim_summary(o, tmp / f"sim-{k}", o.seed + k, (lo, hi), real["content_bytes"])
            for k in range(o.sim_seeds)]
    if o.carry_trace:
        from carry_trace import summarise_trace

        real["carry_trace"] = summarise_trace(sorted((tmp / "trace").glob("n*.jsonl")))
        for k, s in enumerate(sims):
            s["carry_trace"] = summarise_trace([tmp / f"sim-{k}.carry.jsonl"])
    sim = average(sims)
    rows = compare(real, sim, o.tolerance)
    print(f"\nreal: {o.nodes} nodes, {o.messages} lines at {o.rate}/s, --drop-rate "
          f"{o.drop_rate}, fast timings x {o.time_scale} ms, drain {o.drain:.0f} s; "
          f"wall {real_wall:.0f} s; peak RSS of "
          f"all nodes {real['peak_rss_mb_all_nodes']} MB; nodes' CPU "
          f"{real['node_cpu_seconds_script_and_drain']} s in "
          f"{real['script_and_drain_seconds']} s; real delivery latency p5/p50/p85/"
          f"p99 {lat['p5']}/{lat['p50']}/{lat['p85']}/{lat['p99']} ms; first-hand p5/p50/p85/p95 "
          f"{hop['p5']}/{hop['p50']}/{hop['p85']}/{hop['p95']} ms")
    print(f"sim: same shape, --loss {o.drop_rate} --send-loss {o.drop_rate}, latency "
          f"{lo}:{hi} ms, content {real['content_bytes']} B, {o.sim_seeds} seed(s)")
    print(f"{'metric':<42} {'real':>10} {'sim':>10} {'ratio':>7}  ok")
    for r in rows:
        print(f"{r['metric']:<42} {r['real']:>10} {r['sim']:>10} "
              f"{r['ratio'] if r['ratio'] is not None else '-':>7}  "
              f"{'yes' if r['ok'] else 'NO'} ({r['rule']})")
    rc, sc = real.get("carried") or {}, sim.get("carried") or {}
    if rc.get("copies_sent") or sc.get("copies_sent"):
        print(f"carried copies on the wire, with those again on resends and answers: real "
              f"{rc.get('copies_sent', 0)}, sim {sc.get('copies_sent', 0)} "
              f"({sc.get('copies_again', 0)} again)")
    if rc.get("copies_wanted") is not None:
        print(f"carried copies the real cores picked (to_carry): {rc['copies_wanted']}, "
              f"attached {rc.get('copies_attached', 0)}")
    if real.get("carry_trace"):
        print(f"to_carry decisions, real: {json.dumps(real['carry_trace'])}")
        for k, s in enumerate(sims):
            print(f"to_carry decisions, sim seed {o.seed + k}: {json.dumps(s['carry_trace'])}")
    print(f"envelope bytes uploaded per content message (real, wire): "
          f"{real['envelope_bytes_per_message']}")
    for name, ph in traffic["phases"].items():
        sp = sim["traffic"]["phases"].get(name, {})
        print(f"one member, {name:<8} ({ph['seconds']:.0f} s): real up "
              f"{ph['member_up_bytes_per_s']:>8} "
              f"B/s down {ph['member_down_bytes_per_s']:>9} B/s (envelopes) | sim up "
              f"{sp.get('member_up_bytes_per_s')} down {sp.get('member_down_bytes_per_s')} "
              f"B/s (SDS bytes, mean member); real broadcasts {ph['broadcasts_by_kind']}")
    result = {"started": started, "load": load, "machine": machine, "options": vars(o),
              "real": real, "sim": sim, "sim_latency_ms": [lo, hi], "compare": rows}
    if o.json:
        Path(o.json).write_text(json.dumps(result, indent=2, default=str) + "\n")
    if not o.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(r["ok"] for r in rows) else 1


def run_sim_summary(o: argparse.Namespace, out: Path, seed: int, latency: tuple[int, int],
                    content_bytes: int) -> dict[str, Any]:
    from app.sim.simulation import SimSpec, run_sim

    spec = SimSpec(participants=o.nodes, messages=o.messages, loss=o.drop_rate,
                   send_loss=o.drop_rate, seed=seed, rate=o.rate, timings="fast",
                   time_scale_ms=o.time_scale,
                   drain_ms=int(o.drain * 1000), latency_ms=latency,
                   content_bytes=max(1, content_bytes),
                   sender_id_chars=32,  # a real node's sender id: 32 hex characters
                   replay_guard=True)  # a copy it holds: note_copy, as a node's guard does
    trace_file = None
    if getattr(o, "carry_trace", False):
        from carry_trace import tracer

        import sds.channel

        trace_file = open(f"{out}.carry.jsonl", "w", encoding="utf-8")  # noqa: SIM115
        sds.channel.carry_trace = tracer(trace_file)
    try:
        res = run_sim(spec, out, force=True)
    finally:
        if trace_file is not None:
            import sds.channel

            sds.channel.carry_trace = None
            trace_file.close()
    s = summarise(_read_events(out))
    net = res.meta["network"]
    content = s["kinds"]["MessageDelivered"]
    s["deliveries_per_content"] = round(net["deliveries"] / max(1, content), 3)
    s["sds_bytes_per_message"] = round(
        (net["bytes_sent"] - net.get("send_lost_bytes", 0)) / max(1, o.messages))
    s["traffic"] = res.meta["traffic"]
    c = s["traffic"].get("carried") or {}
    s["carried"] = {k: c.get(k, 0)
                    for k in ("copies_sent", "copies_again", "arrivals_new", "arrivals_held")}
    s["config"] = {k: res.meta["config"][k] for k in ("lost_timeout_ms", "repair_t_max_ms",
                                                       "sync_interval_ms")}
    return s


def average(runs: list[dict[str, Any]]) -> dict[str, Any]:
    if len(runs) == 1:
        return runs[0]
    out = dict(runs[0])
    out["kinds"] = {k: round(sum(r["kinds"][k] for r in runs) / len(runs), 1) for k in KINDS}
    for key in ("repair_ids_requested", "holding_every_message", "deliveries_per_content",
                "sds_bytes_per_message"):
        vals = [r[key] for r in runs]
        out[key] = (min(vals) if key == "holding_every_message"
                    else round(sum(vals) / len(vals), 3))
    out["carried"] = {k: round(sum(r["carried"][k] for r in runs) / len(runs), 1)
                      for k in runs[0]["carried"]}
    out["per_seed"] = [{k: r[k] for k in ("kinds", "repair_ids_requested",
                                          "holding_every_message", "deliveries_per_content",
                                          "sds_bytes_per_message")} for r in runs]
    return out


if __name__ == "__main__":
    sys.exit(main())
