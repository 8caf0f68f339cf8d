"""Soak: 5 nodes, a relay (and optionally a store) under churn, kill -9, relay restarts and loss.

Not run in CI. Real processes on 127.0.0.1 only: one ``sdschat relay`` on a
fixed free port, optionally one ``sdschat store`` (``--store``), and
``--nodes`` (5) ``sdschat join soak --headless --relay ws://127.0.0.1:PORT
--drop-rate 0.2`` nodes, each with its own data directory under a temporary
directory, with the DEFAULT protocol timings (``--timings default``), the
``--fast`` ones (``--timings fast``), the defaults with js-waku's SDS-R windows of
30-120 s (``--timings jswaku``) or several, one after the other in the same
invocation (``--timings default fast``) so that they share the machine's state.

One run has two phases:

1. **Faults** (60% of ``--minutes``): every node that is up types a line
   ``<node>.<incarnation>.<seq>`` through its stdin at ``--rate`` lines/s
   (0.5: 2.5 lines/s over 5 nodes, the rate of js-waku's reliability suite);
   every ``--fault-every`` seconds (jittered) one fault, in cycles of five in
   an order shuffled by a seeded RNG (two of each node fault, one relay fault):
   a node stopped cleanly (stdin closed) and restarted 2-10 s later
   (churn), a node killed with SIGKILL and restarted 1-10 s later, or the relay
   killed with SIGKILL and restarted on the same port after 0.5, 2, 5 or 20 s.
   At most two nodes are down at once. Every node drops ``--drop-rate`` of the
   envelopes in each direction all the time (also after the faults).
2. **Convergence** (at most the remaining 40%, or ``--converge-minutes``):
   typing stops, every process is back; every 2 s the bench checks from the
   nodes' events whether each node holds every confirmed line, and then
   compares ``sdschat history --json`` of all nodes. Converged = every line
   confirmed by its author (``own``/``queued``: durable in the outbox) is in
   every node's history, and the histories are identical: same ids, senders,
   Lamport timestamps and content digests in the same order.

Reported per run: lines typed (written to a stdin), confirmed (``queued``),
delivered everywhere (in all final histories), missing (confirmed but absent
somewhere, with the nodes), time to converge after the last fault (the last
restarted process back up), delivery latency over (line, receiver) pairs and
the share delivered within 5 s (js-waku's per-message criterion), peak memory
(``VmHWM`` from ``/proc/PID/status``, sampled every 2 s and just before each
kill) of every process, the nodes' ``lost``/``conflict``/``rejected``/``error``
events, unexpected exits, and whether the histories are identical.

**Hostile mode** (``--hostile``, issues 26 and 39 §6): no process faults; honest nodes
type all along while the run goes through three phases of one length (25% of
``--minutes`` each), then a bounded convergence (the rest):

1. **quiet**: the baseline;
2. **flood**: identities flooding, nothing else: a raw relay client built from this
   tree's modules (``FLOOD``) signs with ``--flood-keys`` (11) fresh identities, each
   sending every 2 s a content message naming 1,000 ids nobody has (issue 39 §6 asks
   this phase's honest p50 and p99 to be those of the quiet one);
3. **faults**: the flood goes on (for 80% of the phase), and
   * **a disk filling and emptying** (as root): node ``n0``'s data directory is a tmpfs
     (``--disk-mib``, 128), filled to the last byte 20% into the phase and emptied at 50%;
   * **a clock jump**: node ``n1`` is restarted under libfaketime (``FAKETIME=+1h``,
     Debian's ``faketime``) 30% into the phase and restarted with the right clock at 70%.

Reported per phase (lines typed in it; ``hostile`` is flood and faults together, as
earlier runs reported it): lines confirmed (``queued``), delivered to every honest node by
the end, delivery p50/p99 over (line, receiver) pairs and as multiples of the quiet
phase's, ``lost`` events; the CPU seconds of every process the bench started, of the rest
of the machine (``others``: other sessions on a shared machine) and of the whole machine,
per phase (``--attacker-nice`` runs the flood niced, to bound its share of the cores
without touching its send rate); the nodes' peak RSS; the histories are compared at the
end as in the fault mode. ``--code DIR`` runs the relay and the nodes from another
checkout (a ``git worktree`` of an earlier commit), the attackers staying this tree's,
so two invocations one after the other compare two versions under the same attack.

Usage::

    .venv/bin/python bench/soak.py --quick                       # ~2.5 min
    .venv/bin/python bench/soak.py --hostile --minutes 6 --timings fast
    .venv/bin/python bench/soak.py --quick --timings default fast
    .venv/bin/python bench/soak.py --minutes 12 --converge-minutes 8 --json out.json

Every loop is bounded in count and time. Children are ended by their PID only,
also on Ctrl+C or an exception (then every child is killed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import calibrate, describe

ROOT = Path(__file__).resolve().parents[1]
CHANNEL = "soak"
MAX_NODES_DOWN = 2
SAMPLE_EVERY_S = 2.0
STOP_GRACE_S = 20.0


LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

FLOOD = """
import os, sys, time
from websockets.sync.client import connect
from app.chat.lines import encode_content
from net.channel_key import derive_channel_key
from net.envelope import seal
from net.identity import Identity
from net.relay_frames import encode_publish, encode_subscribe
from sds import sds_pb2
from sds.ids import message_id_for

url, channel, keys, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
key = derive_channel_key(channel, None)
idents = [Identity.generate() for _ in range(keys)]
sent = 0
with connect(url, max_size=None, proxy=None) as ws:
    # subscribed (the relay closes connections that subscribe to nothing) to a topic
    # nobody uses: subscribed to the channel's, the honest traffic it never reads
    # filled its receive queue, and its keepalive timed out ~45 s into the phase
    ws.send(encode_subscribe([os.urandom(16)]))
    end = time.monotonic() + seconds
    for rnd in range(100_000):  # bounded by ``seconds`` too
        if time.monotonic() >= end:
            break
        for ident in idents:
            lamport = time.time_ns() // 1_000_000
            content = encode_content(f"flood {rnd}", "mallory")
            mid = message_id_for(channel, ident.sender_id, lamport, content, os.urandom(8))
            msg = sds_pb2.SdsMessage(
                sender_id=ident.sender_id, message_id=mid, channel_id=channel,
                lamport_timestamp=lamport, content=content,
                causal_history=[sds_pb2.HistoryEntry(message_id=os.urandom(32).hex())
                                for _ in range(1000)],
            )
            ws.send(encode_publish(seal(msg.SerializeToString(), ident, key)))
            sent += 1
        time.sleep(2.0)
print(f"flood sent {sent}", file=sys.stderr)
"""


def sdschat(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", *args]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_status_kib(pid: int, key: str) -> int | None:
    """``key`` (``VmHWM``, ``VmRSS``) of a live process in KiB, ``None`` once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process (``/proc/PID/stat``), ``None`` once gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        fields = text[text.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy since boot (all cores, ``/proc/stat``)."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in first[1:9])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


class Child:
    """A child process; its stdout JSON lines go to ``on_event`` from a reader thread."""

    def __init__(
        self,
        argv: list[str],
        name: str,
        log_dir: Path,
        *,
        stdin: bool,
        on_event: Any = None,
        env: dict[str, str] | None = None,
        nice: int = 0,
        cwd: Path = ROOT,
    ) -> None:
        self.name = name
        self.stderr_path = log_dir / f"{name}.stderr"
        self.stdout_path = log_dir / f"{name}.stdout"  # a copy, for post-mortems (--keep)
        self._stderr = self.stderr_path.open("wb")
        self.popen = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            preexec_fn=(lambda: os.nice(nice)) if nice else None,
        )
        self.pid = self.popen.pid
        self.started = time.monotonic()
        self.on_event = on_event
        self.ready = False  # joined the channel
        self.expected_exit = False  # we stopped or killed it
        self.hwm_kib = 0
        self.cpu_s = 0.0  # the last sampled user + system CPU seconds
        self.closed_counters: dict[str, Any] | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        out = self.popen.stdout
        assert out is not None
        with self.stdout_path.open("wb") as copy:
            for raw in out:  # ends at EOF (process exit)
                copy.write(raw)
                self._handle(raw)

    def _handle(self, raw: bytes) -> None:
        try:
            obj = json.loads(raw)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        ev = obj.get("event")
        if ev == "channel" and obj.get("joined", True):
            self.ready = True
        elif ev == "closed":
            self.closed_counters = obj.get("counters")
        if self.on_event is not None:
            self.on_event(self, obj)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def sample(self) -> None:
        v = proc_status_kib(self.pid, "VmHWM") if self.alive() else None
        if v is not None:
            self.hwm_kib = max(self.hwm_kib, v)
        cpu = proc_cpu_s(self.pid) if self.alive() else None
        if cpu is not None:
            self.cpu_s = cpu

    def write_line(self, text: str) -> bool:
        stdin = self.popen.stdin
        if stdin is None or stdin.closed:
            return False
        try:
            stdin.write(text.encode() + b"\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def close_stdin(self) -> None:
        self.expected_exit = True
        self.sample()
        stdin = self.popen.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError):
                stdin.close()

    def kill9(self) -> None:
        self.expected_exit = True
        self.sample()
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)

    def log_event(self, event: str) -> dict[str, Any] | None:
        for line in self.stderr_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict) and rec.get("event") == event:
                    return rec
        return None

    def wait_log(self, event: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # bounded
            rec = self.log_event(event)
            if rec is not None:
                return rec
            if not self.alive():
                raise RuntimeError(f"{self.name} exited before {event}:\n{self.tail()}")
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: no {event} within {timeout} s:\n{self.tail()}")

    def release(self) -> None:
        """Kill by PID if still running; close pipes and files."""
        if self.alive():
            self.kill9()
        self._reader.join(5)
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()

    def tail(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-2000:]


@dataclass
class Slot:
    """One participant (or the relay/store): its successive processes."""

    name: str
    data_dir: Path
    child: Child | None = None
    incarnation: int = 0
    restart_at: float | None = None  # monotonic; set while it is down
    stopping: Child | None = None  # a cleanly stopped child not yet exited
    stop_deadline: float = 0.0
    seq: int = 0
    next_type: float = 0.0
    history: list[Child] = field(default_factory=list)

    def peak_kib(self) -> int:
        return max((c.hwm_kib for c in self.history), default=0)


class Tracker:
    """What the nodes said (thread-safe): typed, confirmed and held lines, and bad events."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.local_time = False  # hostile mode: a node's own clock may be skewed
        self.typed: dict[str, float] = {}  # text -> wall time written to stdin
        self.confirmed: set[str] = set()
        self.held: dict[str, dict[str, float]] = {}  # node -> text -> wall time first held
        self.counts: dict[str, dict[str, int]] = {}
        self.bad: list[str] = []

    def add_node(self, name: str) -> None:
        self.held[name] = {}
        self.counts[name] = {"lost": 0, "conflict": 0, "rejected": 0, "error": 0,
                             "missing": 0}  # fmt: skip

    def on_event(self, node: str, obj: dict[str, Any]) -> None:
        ev = obj.get("event")
        ts = time.time() if self.local_time else float(obj.get("ts") or time.time())
        with self.lock:
            if ev == "delivered" and isinstance(obj.get("text"), str):
                self.held[node].setdefault(obj["text"], ts)
            elif ev == "own":
                text = obj.get("text")
                if isinstance(text, str):
                    if obj.get("state") == "queued":
                        self.confirmed.add(text)
                    elif obj.get("state") == "logged":
                        self.held[node].setdefault(text, ts)
                    elif obj.get("state") == "failed":
                        self.bad.append(f"{node}: own message failed: {obj}")
            elif ev in ("lost", "conflict", "rejected", "error"):
                self.counts[node][str(ev)] += 1
                if ev in ("conflict", "error") and len(self.bad) < 50:
                    self.bad.append(f"{node}: {json.dumps(obj)[:300]}")
            elif ev == "missing" and obj.get("first"):
                self.counts[node]["missing"] += 1

    def lacking(self) -> dict[str, int]:
        """Per node, how many confirmed lines it does not hold yet (by its events)."""
        with self.lock:
            return {n: len(self.confirmed - h.keys()) for n, h in self.held.items()}


def history(data_dir: Path, code: Path = ROOT) -> list[dict[str, Any]]:
    out = subprocess.run(
        sdschat("history", CHANNEL, "--data-dir", str(data_dir), "--json"),
        cwd=code, capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    return [json.loads(line) for line in out.stdout.decode().splitlines() if line.strip()]


def comparable(hist: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(h["id"], h["sender"], h["lamport"], h.get("digest"), h["content"]) for h in hist]


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Soak:
    def __init__(self, opts: argparse.Namespace, timings: str, tmp: Path) -> None:
        self.opts = opts
        self.timings = timings
        self.tmp = tmp
        self.code: Path = opts.code  # the checkout whose relay, nodes and history run
        (tmp / "logs").mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(opts.seed)
        self.tracker = Tracker()
        self.children: list[Child] = []  # every child ever started, for cleanup
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.relay = Slot("relay", tmp / "relay")
        self.store = Slot("store", tmp / "store")
        self.store_url: str | None = None
        self.nodes = [Slot(f"n{i}", tmp / f"n{i}") for i in range(opts.nodes)]
        for s in self.nodes:
            self.tracker.add_node(s.name)
        self.faults: list[dict[str, Any]] = []
        self.fault_cycle: list[str] = []
        self.unexpected_exits: list[str] = []
        self.last_fault_healed = 0.0

    # ---- processes

    def _spawn(
        self,
        slot: Slot,
        argv: list[str],
        *,
        stdin: bool,
        events: bool,
        env: dict[str, str] | None = None,
        nice: int = 0,
        own_code: bool = False,
    ) -> Child:
        slot.incarnation += 1
        name = f"{slot.name}.{slot.incarnation}"

        def on_event(_c: Child, obj: dict[str, Any], node: str = slot.name) -> None:
            self.tracker.on_event(node, obj)

        child = Child(argv, name, self.tmp / "logs", stdin=stdin,
                      on_event=on_event if events else None, env=env, nice=nice,
                      cwd=ROOT if own_code else self.code)  # fmt: skip
        self.children.append(child)
        slot.child = child
        slot.history.append(child)
        slot.restart_at = None
        return child

    def start_relay(self) -> Child:
        argv = sdschat("relay", "--host", "127.0.0.1", "--port", str(self.port),
                       "--stats-interval", "0")  # fmt: skip
        return self._spawn(self.relay, argv, stdin=False, events=False)

    def start_store(self) -> None:
        argv = sdschat("store", "--data-dir", str(self.store.data_dir), "--listen",
                       "127.0.0.1:0", "--relay", self.url, "--channel", CHANNEL,
                       "--stats-interval", "0")  # fmt: skip
        child = self._spawn(self.store, argv, stdin=False, events=False)
        rec = child.wait_log("store_listening", 60)
        self.store_url = f"ws://127.0.0.1:{int(rec['port'])}"

    def start_node(
        self, slot: Slot, *, drop_rate: float | None = None, faketime: str | None = None
    ) -> Child:
        seed = self.opts.seed * 1000 + int(slot.name[1:]) * 100 + slot.incarnation + 1
        drop = self.opts.drop_rate if drop_rate is None else drop_rate
        argv = sdschat("join", CHANNEL, "--headless", "--relay", self.url, "--data-dir",
                       str(slot.data_dir), "--name", slot.name, "--drop-rate",
                       str(drop), "--drop-seed", str(seed))  # fmt: skip
        if self.timings == "fast":
            argv.append("--fast")
        elif self.timings == "jswaku":  # js-waku's fixed SDS-R windows, for comparison
            argv += ["--repair-tmin-ms", "30000", "--repair-tmax-ms", "120000"]
        if self.store_url:
            argv += ["--store", self.store_url]
        argv += self.opts.node_arg or []
        env = None
        if faketime is not None:  # a clock jump (hostile mode): libfaketime
            env = {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": faketime}
        child = self._spawn(slot, argv, stdin=True, events=True, env=env)
        slot.next_type = time.monotonic() + self.rng.uniform(0, 1 / self.opts.rate)
        return child

    def sample_all(self) -> None:
        for c in self.children:
            c.sample()

    def cpu_mark(self) -> dict[str, float]:
        """CPU seconds so far per participant (all its processes), and the machine's."""
        self.sample_all()
        per: dict[str, float] = {}
        for c in self.children:
            slot = c.name.rsplit(".", 1)[0]
            per[slot] = per.get(slot, 0.0) + c.cpu_s
        per["machine"] = machine_busy_s()
        return per

    @staticmethod
    def cpu_split(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        """CPU seconds between two marks: each participant, ``others`` (every process on
        the machine this bench did not start: other sessions), ``machine``."""
        out = {k: round(v - a.get(k, 0.0), 1) for k, v in b.items()}
        out["others"] = round(out["machine"] - sum(v for k, v in out.items()
                                                    if k != "machine"), 1)  # fmt: skip
        return out

    def check_exits(self) -> None:
        for slot in [self.relay, self.store, *self.nodes]:
            c = slot.child
            if c is not None and not c.alive() and not c.expected_exit:
                c.expected_exit = True
                msg = f"{c.name} exited by itself with {c.popen.returncode}: {c.tail()[-600:]}"
                self.unexpected_exits.append(msg)
                print("UNEXPECTED EXIT", msg, file=sys.stderr)
                if slot in self.nodes:  # bring it back like a churned node
                    slot.child = None
                    slot.restart_at = time.monotonic() + 2

    # ---- faults

    def down_nodes(self) -> int:
        return sum(1 for s in self.nodes if s.child is None or s.stopping is not None)

    def inject(self, now: float) -> None:
        if not self.fault_cycle:  # every 5 faults: 2 churns, 2 kill -9, 1 relay kill -9
            self.fault_cycle = ["churn", "churn", "kill9", "kill9", "relay_kill9"]
            self.rng.shuffle(self.fault_cycle)
        kind = self.fault_cycle.pop()
        up = [s for s in self.nodes if s.child is not None and s.stopping is None]
        if kind != "relay_kill9" and (self.down_nodes() >= MAX_NODES_DOWN or not up):
            kind = "relay_kill9"
        if kind == "relay_kill9" and self.relay.child is None:
            return  # relay already down: skip this one
        rec: dict[str, Any] = {"t": round(now - self.t0, 1), "kind": kind}
        if kind == "relay_kill9":
            assert self.relay.child is not None
            self.relay.child.kill9()
            self.relay.child = None
            down = self.rng.choice([0.5, 2.0, 5.0, 20.0])
            self.relay.restart_at = now + down
            rec.update(target="relay", down_s=down)
        else:
            slot = self.rng.choice(up)
            assert slot.child is not None
            if kind == "kill9":
                slot.child.kill9()
                down = self.rng.uniform(1, 10)
                slot.restart_at = now + down
            else:
                slot.child.close_stdin()
                slot.stopping = slot.child
                slot.stop_deadline = now + STOP_GRACE_S
                down = self.rng.uniform(2, 10)
                slot.restart_at = now + down
            slot.child = None
            rec.update(target=slot.name, down_s=round(down, 1))
        self.faults.append(rec)

    def heal_due(self, now: float) -> None:
        """Restart what is due (a cleanly stopped node only once it has exited)."""
        if self.relay.restart_at is not None and now >= self.relay.restart_at:
            self.start_relay()
            self.last_fault_healed = now
        for slot in self.nodes:
            if slot.stopping is not None:
                if slot.stopping.alive() and now < slot.stop_deadline:
                    continue
                if slot.stopping.alive():
                    self.unexpected_exits.append(
                        f"{slot.stopping.name}: no clean exit {STOP_GRACE_S} s after stdin "
                        "closed; killed"
                    )
                    slot.stopping.kill9()
                elif slot.stopping.popen.returncode != 0:
                    self.unexpected_exits.append(
                        f"{slot.stopping.name}: clean stop exited "
                        f"{slot.stopping.popen.returncode}: {slot.stopping.tail()[-600:]}"
                    )
                slot.stopping = None
            if slot.child is None and slot.restart_at is not None and now >= slot.restart_at:
                self.start_node(slot)
                self.last_fault_healed = now

    def pending(self) -> bool:
        return any(
            s.restart_at is not None or s.stopping is not None for s in [self.relay, *self.nodes]
        )

    # ---- typing

    def type_due(self, now: float) -> None:
        for slot in self.nodes:
            c = slot.child
            if c is None or not c.ready or now < slot.next_type:
                continue
            slot.seq += 1
            text = f"{slot.name}.{slot.incarnation}.{slot.seq}"
            if c.write_line(text):
                with self.tracker.lock:
                    self.tracker.typed[text] = time.time()
            slot.next_type = max(slot.next_type + 1 / self.opts.rate, now - 1)

    # ---- phases

    def wait_all_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # bounded
            if all(s.child is not None and s.child.ready for s in self.nodes):
                return
            self.check_exits()
            time.sleep(0.1)
        raise RuntimeError("nodes did not join in time: " + ", ".join(
            s.child.tail()[-300:] for s in self.nodes if s.child and not s.child.ready))

    def run(self) -> dict[str, Any]:
        o = self.opts
        total_s = o.minutes * 60
        fault_s = total_s * 0.6
        converge_s = o.converge_minutes * 60 if o.converge_minutes else total_s - fault_s
        started_wall = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        load_before = load_avg()
        self.start_relay().wait_log("relay_listening", 30)
        if o.store:
            self.start_store()
        for slot in self.nodes:
            self.start_node(slot)
        self.wait_all_ready(90)
        self.t0 = time.monotonic()
        print(f"[{self.timings}] all {len(self.nodes)} nodes up; faults for {fault_s:.0f} s",
              flush=True)  # fmt: skip
        next_fault = self.t0 + o.fault_every * self.rng.uniform(0.5, 1.0)
        next_sample = self.t0
        end_faults = self.t0 + fault_s
        iterations = 0
        while iterations < 10_000_000:  # bounded (by end_faults, too)
            iterations += 1
            now = time.monotonic()
            if now >= end_faults:
                break
            self.type_due(now)
            self.heal_due(now)
            self.check_exits()
            if now >= next_fault:
                self.inject(now)
                next_fault = now + o.fault_every * self.rng.uniform(0.5, 1.5)
            if now >= next_sample:
                self.sample_all()
                next_sample = now + SAMPLE_EVERY_S
            time.sleep(0.02)
        typing_stopped = time.monotonic()
        # let every pending restart happen (bounded: 20 s relay down + stop grace)
        heal_deadline = typing_stopped + 60
        while self.pending() and time.monotonic() < heal_deadline:  # bounded
            now = time.monotonic()
            self.heal_due(now)
            self.check_exits()
            time.sleep(0.05)
        heal_deadline = time.monotonic() + 60
        while time.monotonic() < heal_deadline:  # bounded: restarted nodes back in the channel
            if all(s.child is not None and s.child.ready for s in self.nodes):
                break
            self.check_exits()
            time.sleep(0.1)
        healed = max(self.last_fault_healed, self.t0)
        print(f"[{self.timings}] typing stopped; last fault healed at "
              f"+{healed - self.t0:.0f} s; converging (<= {converge_s:.0f} s)",
              flush=True)  # fmt: skip
        converged_at: float | None = None
        hists: dict[str, list[dict[str, Any]]] = {}
        deadline = typing_stopped + converge_s
        next_sample = 0.0
        next_hist = 0.0
        next_progress = time.monotonic() + 30
        progress: list[tuple[float, int]] = []  # (s after typing stopped, lines lacking)
        checks = 0
        while time.monotonic() < deadline and checks < 100_000:  # bounded
            checks += 1
            now = time.monotonic()
            self.check_exits()
            self.heal_due(now)  # a node that crashed by itself comes back
            if now >= next_sample:
                self.sample_all()
                next_sample = now + SAMPLE_EVERY_S
            if now >= next_progress:
                lacking = self.tracker.lacking()
                progress.append((round(now - typing_stopped), sum(lacking.values())))
                print(f"[{self.timings}] +{now - typing_stopped:.0f} s: confirmed lines not "
                      f"yet held {lacking}", flush=True)  # fmt: skip
                next_progress = now + 30
            if now >= next_hist and not any(self.tracker.lacking().values()):
                hists = {s.name: history(s.data_dir, self.code) for s in self.nodes}
                next_hist = time.monotonic() + 5
                if self._identical_and_complete(hists):
                    converged_at = now
                    break
            time.sleep(0.5)
        if converged_at is None:
            hists = {s.name: history(s.data_dir, self.code) for s in self.nodes}
            if self._identical_and_complete(hists):
                converged_at = time.monotonic()
        self.sample_all()
        load_after = load_avg()
        # clean stop: close stdin, let them exit, collect their final counters
        for slot in self.nodes:
            if slot.child is not None:
                slot.child.close_stdin()
        for slot in self.nodes:
            c = slot.child
            if c is None:
                continue
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.popen.wait(STOP_GRACE_S)
            if c.alive():
                self.unexpected_exits.append(f"{c.name}: no clean exit at the end; killed")
            elif c.popen.returncode != 0:
                self.unexpected_exits.append(f"{c.name}: exit {c.popen.returncode} at the end")
        if hists:  # the final histories, after the clean stop
            hists = {s.name: history(s.data_dir, self.code) for s in self.nodes}
        report = self._report(hists, converged_at, healed, typing_stopped, started_wall,
                              load_before, load_after, fault_s, converge_s)  # fmt: skip
        report["lacking_every_30s"] = progress
        if self.opts.heal_minutes and report["missing"]:
            report["after_heal"] = self.heal(self.opts.heal_minutes * 60)
        return report

    def heal(self, bound_s: float) -> dict[str, Any]:
        """Restart every node without loss; how many missing lines come back within ``bound_s``."""
        print(f"[{self.timings}] healing: every node restarted without loss for "
              f"<= {bound_s:.0f} s", flush=True)  # fmt: skip
        with self.tracker.lock:
            confirmed = set(self.tracker.confirmed)
        for slot in self.nodes:
            self.start_node(slot, drop_rate=0.0)
        t0 = time.monotonic()
        series: list[tuple[int, int]] = []
        missing = -1
        for _ in range(int(bound_s // 30) + 1):  # bounded
            time.sleep(max(0.0, min(30.0, t0 + bound_s - time.monotonic())))
            hists = {s.name: history(s.data_dir, self.code) for s in self.nodes}
            missing = sum(len(confirmed - {h["content"] for h in hist})
                          for hist in hists.values())  # fmt: skip
            series.append((round(time.monotonic() - t0), missing))
            print(f"[{self.timings}] heal +{series[-1][0]} s: {missing} line-holdings missing",
                  flush=True)  # fmt: skip
            if missing == 0 or time.monotonic() >= t0 + bound_s:
                break
        for slot in self.nodes:
            if slot.child is not None:
                slot.child.close_stdin()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    slot.child.popen.wait(STOP_GRACE_S)
        return {"bound_s": round(bound_s), "missing_every_30s": series,
                "missing_at_end": missing}  # fmt: skip

    def _identical_and_complete(self, hists: dict[str, list[dict[str, Any]]]) -> bool:
        lists = [comparable(h) for h in hists.values()]
        if any(x != lists[0] for x in lists[1:]):
            return False
        with self.tracker.lock:
            confirmed = set(self.tracker.confirmed)
        contents = {h["content"] for h in next(iter(hists.values()))}
        return confirmed <= contents

    def _report(
        self,
        hists: dict[str, list[dict[str, Any]]],
        converged_at: float | None,
        healed: float,
        typing_stopped: float,
        started_wall: str,
        load_before: list[float],
        load_after: list[float],
        fault_s: float,
        converge_s: float,
    ) -> dict[str, Any]:
        tr = self.tracker
        with tr.lock:
            typed = dict(tr.typed)
            confirmed = set(tr.confirmed)
            held = {n: dict(h) for n, h in tr.held.items()}
        contents = {n: [h["content"] for h in hist] for n, hist in hists.items()}
        sets = {n: set(c) for n, c in contents.items()}
        everywhere = set.intersection(*sets.values()) if sets else set()
        missing = {t: sorted(n for n, s in sets.items() if t not in s)
                   for t in sorted(confirmed - everywhere)}  # fmt: skip
        dup = {n: len(c) - len(set(c)) for n, c in contents.items()}
        lists = [comparable(h) for h in hists.values()]
        identical = bool(lists) and all(x == lists[0] for x in lists[1:])
        # latency over (line, receiver) pairs, from typing to the receiver's event
        lat: list[float] = []
        for text, t_typed in typed.items():
            author = text.split(".", 1)[0]
            for n, h in held.items():
                if n != author and text in h:
                    lat.append(h[text] - t_typed)
        pairs = sum(len(self.nodes) - 1 for t in confirmed)
        within5 = sum(1 for x in lat if x <= 5.0)
        peaks = {s.name: s.peak_kib() for s in [self.relay, self.store, *self.nodes]
                 if s.history}  # fmt: skip
        resent = sum(int((c.closed_counters or {}).get("resent", 0))
                     for s in self.nodes for c in s.history)  # fmt: skip
        return {
            "timings": self.timings,
            "started": started_wall,
            "nodes": len(self.nodes),
            "store": bool(self.opts.store),
            "drop_rate": self.opts.drop_rate,
            "rate_per_node": self.opts.rate,
            "fault_phase_s": round(fault_s),
            "converge_bound_s": round(converge_s),
            "faults": len(self.faults),
            "fault_kinds": {
                k: sum(1 for f in self.faults if f["kind"] == k)
                for k in ("churn", "kill9", "relay_kill9")
            },
            "incarnations": {s.name: s.incarnation for s in [self.relay, *self.nodes]},
            "typed": len(typed),
            "confirmed": len(confirmed),
            "typed_not_confirmed": len(set(typed) - confirmed),
            "delivered_everywhere": len(confirmed & everywhere),
            "missing": len(missing),
            "missing_detail": dict(list(missing.items())[:20]),
            "history_lengths": {n: len(c) for n, c in contents.items()},
            "duplicates": dup,
            "identical": identical,
            "converged": converged_at is not None,
            "converge_s_after_last_fault": (
                round(converged_at - healed, 1) if converged_at is not None else None
            ),
            "converge_s_after_typing_stopped": (
                round(converged_at - typing_stopped, 1) if converged_at is not None else None
            ),
            "latency_s": {
                "p50": round(pct(lat, 0.5) or 0, 2),
                "p90": round(pct(lat, 0.9) or 0, 2),
                "p99": round(pct(lat, 0.99) or 0, 2),
                "max": round(max(lat, default=0), 2),
            },
            "pairs_within_5s": f"{within5}/{pairs}",
            "peak_rss_kib": peaks,
            "events": tr.counts,
            "resent_clean_exits": resent,
            "unexpected_exits": self.unexpected_exits,
            "bad_events": tr.bad[:20],
            "load_before": load_before,
            "load_after": load_after,
        }

    # ---- hostile mode (issue 26)

    def _lost_total(self) -> int:
        with self.tracker.lock:
            return sum(c["lost"] for c in self.tracker.counts.values())

    def _type_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        next_sample = 0.0
        for _ in range(10_000_000):  # bounded by ``end`` too
            now = time.monotonic()
            if now >= end:
                return
            self.type_due(now)
            self.check_exits()
            if now >= next_sample:
                self.sample_all()
                next_sample = now + SAMPLE_EVERY_S
            time.sleep(0.02)

    def _fill(self, mnt: Path) -> Path:
        ballast = mnt / "ballast"
        with open(ballast, "wb", buffering=0) as f:
            for size in [256 * 1024] * 400 + [4096] * 256 + [1] * 4096:  # bounded
                try:
                    f.write(b"\0" * size)
                except OSError:
                    if size == 1:
                        break
        return ballast

    def run_hostile(self) -> dict[str, Any]:
        o = self.opts
        total_s = o.minutes * 60
        quiet_s = flood_s = faults_s = total_s * 0.25  # one length: their figures compare
        converge_s = total_s - quiet_s - flood_s - faults_s
        started_wall = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        load_before = load_avg()
        self.tracker.local_time = True
        disk = self.nodes[0].data_dir
        mounted = False
        if os.geteuid() == 0 and shutil.which("mount"):
            disk.mkdir(parents=True, exist_ok=True)
            mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={o.disk_mib}m", "tmpfs",
                                      str(disk)], check=False).returncode == 0  # fmt: skip
        clock_node = self.nodes[1] if len(self.nodes) > 1 else self.nodes[0]
        notes: list[str] = []
        if not mounted:
            notes.append("disk: not root or no mount: the full-disk fault was skipped")
        if not LIBFAKETIME.exists():
            notes.append("clock: libfaketime missing (make tools): the clock jump was skipped")
        try:
            self.start_relay().wait_log("relay_listening", 30)
            for slot in self.nodes:
                self.start_node(slot)
            self.wait_all_ready(90)
            self.t0 = time.monotonic()
            t_quiet = time.time()
            cpu_quiet = self.cpu_mark()
            print(f"[{self.timings}] hostile mode: quiet phase {quiet_s:.0f} s", flush=True)
            self._type_for(quiet_s)
            lost_quiet = self._lost_total()
            t_flood = time.time()
            cpu_flood = self.cpu_mark()
            print(f"[{self.timings}] flood phase {flood_s:.0f} s: {o.flood_keys} flooding "
                  "identities", flush=True)  # fmt: skip
            flood = Slot("flood", self.tmp / "flood")
            flooder = self._spawn(flood, [sys.executable, "-c", FLOOD, self.url, CHANNEL,
                                          str(o.flood_keys), str(flood_s + faults_s * 0.8)],
                                  stdin=False, events=False, nice=o.attacker_nice,
                                  own_code=True)  # the attacker: this tree's modules
            self._type_for(flood_s)
            lost_flood = self._lost_total()
            t_faults = time.time()
            cpu_faults = self.cpu_mark()
            print(f"[{self.timings}] faults phase {faults_s:.0f} s: the flood goes on, a full "
                  "disk, a clock jump", flush=True)  # fmt: skip
            steps = [(0.2, "fill"), (0.3, "clock+"), (0.5, "empty"), (0.7, "clock0"), (1.0, "")]
            done = 0.0
            ballast: Path | None = None
            for at, what in steps:
                self._type_for(faults_s * (at - done))
                done = at
                rec = {"t": round(time.monotonic() - self.t0, 1), "kind": what}
                if what == "fill" and mounted:
                    ballast = self._fill(disk)
                elif what == "empty" and ballast is not None:
                    ballast.unlink()
                elif what in ("clock+", "clock0") and LIBFAKETIME.exists():
                    c = clock_node.child
                    if c is not None:
                        c.close_stdin()
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            c.popen.wait(STOP_GRACE_S)
                        if c.alive():
                            c.kill9()
                    self.start_node(clock_node, faketime="+1h" if what == "clock+" else None)
                else:
                    continue
                self.faults.append(rec)
            t_end = time.time()
            cpu_end = self.cpu_mark()
            typing_stopped = time.monotonic()
            print(f"[{self.timings}] typing stopped; converging (<= {converge_s:.0f} s)",
                  flush=True)  # fmt: skip
            converged_at: float | None = None
            for _ in range(100_000):  # bounded by converge_s
                if time.monotonic() > typing_stopped + converge_s:
                    break
                self.check_exits()
                if not any(self.tracker.lacking().values()):
                    converged_at = time.monotonic()
                    break
                time.sleep(0.5)
            cpu_converged = self.cpu_mark()
            for slot in self.nodes:
                if slot.child is not None:
                    slot.child.close_stdin()
            exits = {}
            for slot in self.nodes:
                c = slot.child
                if c is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        c.popen.wait(STOP_GRACE_S)
                    exits[c.name] = c.popen.returncode
            hists = {}
            for s in self.nodes:
                try:
                    hists[s.name] = history(s.data_dir, self.code)
                except subprocess.CalledProcessError as exc:
                    notes.append(f"history of {s.name} failed (exit {exc.returncode}): "
                                 f"{(exc.stderr or b'').decode(errors='replace')[-300:]}")
                    hists[s.name] = []
            lists = [comparable(h) for h in hists.values()]
            identical = all(x == lists[0] for x in lists[1:])
            lost_all = self._lost_total()
            texts = {n: {h.get("content") for h in hist} for n, hist in hists.items()}
            with self.tracker.lock:
                confirmed = set(self.tracker.confirmed)
            missing = {t: [n for n in texts if t not in texts[n]] for t in sorted(confirmed)}
            missing = {t: ns for t, ns in missing.items() if ns}
            flood_err = flooder.stderr_path.read_text(errors="replace")
            sent = re.search(r"flood sent (\d+)", flood_err)
            if sent is None:
                notes.append(f"the flood did not finish: {flood_err.strip()[-200:]}")
            report = {
                "timings": self.timings,
                "code": str(self.code),
                "mode": "hostile",
                "started": started_wall,
                "nodes": len(self.nodes),
                "drop_rate": o.drop_rate,
                "rate_per_node": o.rate,
                "flood_keys": o.flood_keys,
                "flood_sent": int(sent.group(1)) if sent else None,
                "faults": self.faults,
                "notes": notes,
                "phases": {
                    "quiet": self._phase(t_quiet, t_flood, lost_quiet),
                    "flood": self._phase(t_flood, t_faults, lost_flood - lost_quiet),
                    "faults": self._phase(t_faults, t_end, lost_all - lost_flood),
                    "hostile": self._phase(t_flood, t_end, lost_all - lost_quiet),
                },
                "converged": converged_at is not None,
                "converge_s_after_typing_stopped": (
                    round(converged_at - typing_stopped, 1) if converged_at else None
                ),
                "cpu_s": {
                    "quiet": self.cpu_split(cpu_quiet, cpu_flood),
                    "flood": self.cpu_split(cpu_flood, cpu_faults),
                    "faults": self.cpu_split(cpu_faults, cpu_end),
                    "converge": self.cpu_split(cpu_end, cpu_converged),
                },
                "attacker_nice": o.attacker_nice,
                "identical": identical,
                "history_lengths": {n: len(h) for n, h in hists.items()},
                "missing": missing,  # confirmed line -> final histories lacking it
                "exit_status": exits,
                "peak_rss_kib": {s.name: s.peak_kib() for s in [self.relay, *self.nodes]},
                "events": self.tracker.counts,
                "unexpected_exits": self.unexpected_exits,
                "load_before": load_before,
                "load_after": load_avg(),
            }
            if o.heal_minutes and missing:  # do the lines missing at the end come back?
                report["after_heal"] = self.heal(o.heal_minutes * 60)
            return report
        finally:
            self.close()
            if mounted:
                subprocess.run(["umount", "-l", str(disk)], check=False)

    def _phase(self, t_from: float, t_to: float, lost: int) -> dict[str, Any]:
        """Honest lines typed in [t_from, t_to): confirmed, delivered everywhere, latency."""
        tr = self.tracker
        with tr.lock:
            typed = {t: at for t, at in tr.typed.items() if t_from <= at < t_to}
            confirmed = set(typed) & tr.confirmed
            held = {n: dict(h) for n, h in tr.held.items()}
        lat: list[float] = []
        everywhere = 0
        for text in confirmed:
            author = text.split(".", 1)[0]
            got = [held[n][text] - typed[text] for n in held if n != author and text in held[n]]
            lat.extend(got)
            if len(got) == len(held) - 1:
                everywhere += 1
        return {
            "seconds": round(t_to - t_from),
            "typed": len(typed),
            "confirmed": len(confirmed),
            "delivered_everywhere": everywhere,
            "not_delivered_everywhere": len(confirmed) - everywhere,
            "latency_p50_s": round(pct(lat, 0.5) or 0, 2),
            "latency_p99_s": round(pct(lat, 0.99) or 0, 2),
            "lost_events": lost,
        }

    def close(self) -> None:
        for c in self.children:
            with contextlib.suppress(Exception):
                c.release()


def ratio(x: float, base: float) -> str:
    """``x`` as a multiple of ``base`` (``-`` when the base is 0)."""
    return f"{x / base:.2f}x" if base else "-"


def print_hostile(r: dict[str, Any]) -> None:
    print(f"\n=== soak, hostile mode [{r['timings']} timings] started {r['started']}, "
          f"code {r.get('code')} ===")
    print(f"nodes {r['nodes']}, drop {r['drop_rate']}, {r['rate_per_node']} lines/s/node, "
          f"{r['flood_keys']} flooding identities ({r['flood_sent']} messages sent); "
          f"faults {r['faults']}")  # fmt: skip
    print("| phase | s | typed | confirmed | delivered everywhere | p50 s | p99 s | "
          "p50 / p99 x quiet | lost |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    q = r["phases"]["quiet"]
    for name, p in r["phases"].items():
        p50, p99 = p["latency_p50_s"], p["latency_p99_s"]
        print(f"| {name} | {p['seconds']} | {p['typed']} | {p['confirmed']} | "
              f"{p['delivered_everywhere']} | {p50} | {p99} | "
              f"{ratio(p50, q['latency_p50_s'])} / {ratio(p99, q['latency_p99_s'])} | "
              f"{p['lost_events']} |")  # fmt: skip
    print(f"converged: {r['converged']} ({r['converge_s_after_typing_stopped']} s after typing "
          f"stopped); histories identical: {r['identical']} {r['history_lengths']}")  # fmt: skip
    if r["missing"]:
        shown = list(r["missing"].items())[:20]
        print(f"confirmed lines missing at the end ({len(r['missing'])}): "
              + ", ".join(f"{t} at {'/'.join(ns)}" for t, ns in shown))  # fmt: skip
    print(f"exit status {r['exit_status']}")
    names = [k for k in r["cpu_s"]["faults"] if k not in ("others", "machine")]
    print(f"CPU seconds per phase (attackers at nice {r['attacker_nice']}; 'others': processes "
          "this bench did not start)")  # fmt: skip
    print("| phase | " + " | ".join(names) + " | others | machine |")
    print("|---|" + "---|" * (len(names) + 2))
    for phase, split in r["cpu_s"].items():
        print(f"| {phase} | " + " | ".join(str(split.get(k, 0.0)) for k in names)
              + f" | {split['others']} | {split['machine']} |")  # fmt: skip
    print("peak RSS (VmHWM) MiB: " + ", ".join(
        f"{k} {v / 1024:.0f}" for k, v in r["peak_rss_kib"].items()))
    print(f"events per node: {r['events']}")
    for x in r["notes"] + r["unexpected_exits"]:
        print(f"note: {x}")
    print(f"load average before {r['load_before']} after {r['load_after']}")


def print_report(r: dict[str, Any]) -> None:
    print(f"\n=== soak [{r['timings']} timings] started {r['started']} ===")
    print(f"nodes {r['nodes']}, store {r['store']}, drop {r['drop_rate']}, "
          f"{r['rate_per_node']} lines/s/node, faults {r['faults']} {r['fault_kinds']} in "
          f"{r['fault_phase_s']} s")  # fmt: skip
    print(f"typed {r['typed']}, confirmed {r['confirmed']}, delivered everywhere "
          f"{r['delivered_everywhere']}, missing {r['missing']}")  # fmt: skip
    conv = (f"{r['converge_s_after_last_fault']} s after the last fault "
            f"({r['converge_s_after_typing_stopped']} s after typing stopped)"
            if r["converged"] else f"NOT converged within {r['converge_bound_s']} s")  # fmt: skip
    print(f"converged: {conv}; histories identical: {r['identical']} "
          f"{r['history_lengths']}")  # fmt: skip
    print(f"latency p50/p90/p99/max {r['latency_s']} s; pairs within 5 s "
          f"{r['pairs_within_5s']}")  # fmt: skip
    print("peak RSS (VmHWM) MiB: " + ", ".join(
        f"{k} {v / 1024:.0f}" for k, v in r["peak_rss_kib"].items()))
    print(f"events per node: {r['events']}")
    print(f"resent (processes that exited cleanly): {r['resent_clean_exits']}")
    if r.get("lacking_every_30s"):
        print(f"(s after typing stopped, line-holdings lacking): {r['lacking_every_30s']}")
    if r["missing_detail"]:
        print(f"missing (first 20): {r['missing_detail']}")
    if r.get("after_heal"):
        h = r["after_heal"]
        print(f"after healing (no loss, <= {h['bound_s']} s): line-holdings missing "
              f"{h['missing_every_30s']}")  # fmt: skip
    for x in r["unexpected_exits"]:
        print(f"unexpected: {x}")
    for x in r["bad_events"]:
        print(f"bad event: {x}")
    print(f"load average before {r['load_before']} after {r['load_after']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0,
                    help="wall-clock budget of one run (60%% faults, 40%% convergence)")
    ap.add_argument("--quick", action="store_true", help="a 2.5-minute run (--minutes 2.5)")
    ap.add_argument("--converge-minutes", type=float, default=None,
                    help="bound of the convergence phase (default: 40%% of --minutes)")
    ap.add_argument("--timings", nargs="+", choices=("default", "fast", "jswaku"),
                    default=["default"],
                    help="protocol timings, one run each in this order (default: default; "
                    "jswaku: the defaults with js-waku's SDS-R windows, 30-120 s)")
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--rate", type=float, default=0.5, help="lines per second per node")
    ap.add_argument("--drop-rate", type=float, default=0.2)
    ap.add_argument("--fault-every", type=float, default=None,
                    help="mean seconds between faults (default 12 quick, 30 otherwise)")
    ap.add_argument("--store", action="store_true", help="run a store peer too")
    ap.add_argument("--heal-minutes", type=float, default=0.0,
                    help="if lines are missing at the end, restart every node without loss "
                    "for up to this long and report what comes back (default 0: off)")
    ap.add_argument("--hostile", action="store_true",
                    help="quiet phase, flood phase (identities flooding), faults phase (the "
                    "flood, a full disk and a clock jump), then convergence; no process "
                    "faults")
    ap.add_argument("--disk-mib", type=int, default=128,
                    help="size of n0's tmpfs in --hostile mode (the flood's messages are "
                    "stored too: 20 MiB fill up without the ballast)")
    ap.add_argument("--flood-keys", type=int, default=11,
                    help="fresh identities flooding in --hostile mode (each 1,000 unknown "
                    "ids every 2 s)")
    ap.add_argument("--attacker-nice", type=int, default=0,
                    help="niceness of the attacker processes in --hostile mode (0..19): "
                    "bounds their share of the machine's cores, not their send rates")
    ap.add_argument("--code", type=Path, default=ROOT,
                    help="run the relay, the nodes and 'sdschat history' from this checkout "
                    "(e.g. a git worktree of an earlier commit); the bench and the attackers "
                    "are this tree's")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--node-arg", action="append", metavar="ARG",
                    help="extra argument for every 'sdschat join' (repeatable; for "
                         "experiments, e.g. --node-arg=--config --node-arg=FILE)")
    ap.add_argument("--json", type=Path, default=None, help="write the reports here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    opts = ap.parse_args(argv)
    if opts.quick:
        opts.minutes = 2.5
    if opts.fault_every is None:
        opts.fault_every = 12.0 if opts.minutes <= 5 else 30.0
    if not (0 < opts.minutes <= 24 * 60 and 1 <= opts.nodes <= 20 and 0 < opts.rate <= 50
            and 0 <= opts.drop_rate < 1 and 0 <= opts.attacker_nice <= 19):  # fmt: skip
        ap.error("out of range: --minutes (0, 1440], --nodes 1..20, --rate (0, 50], "
                 "--drop-rate [0, 1), --attacker-nice 0..19")  # fmt: skip
    def on_term(_sig: int, _frame: object) -> None:  # cleanup as on Ctrl+C (children, tmpfs)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    cal = calibrate()
    print(f"{describe(cal)}; load average {load_avg()}", flush=True)
    reports = []
    for timings in opts.timings:
        tmp = Path(tempfile.mkdtemp(prefix=f"sdschat-soak-{timings}-"))
        soak = Soak(opts, timings, tmp)
        try:
            reports.append(soak.run_hostile() if opts.hostile else soak.run())
        except KeyboardInterrupt:
            print("interrupted: killing every child by PID", file=sys.stderr)
            raise
        finally:
            soak.close()
            if opts.keep:
                print(f"kept {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        (print_hostile if opts.hostile else print_report)(reports[-1])
    if opts.json is not None:
        opts.json.write_text(json.dumps({"machine": cal, "runs": reports}, indent=1))
    ok = all(r["converged"] and r["identical"] and not r.get("missing") for r in reports)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
