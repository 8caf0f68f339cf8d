"""What a member feels while many identities flood a PUBLIC channel with files.

Real parts: ``sdschat relay`` on 127.0.0.1, a receiving ``sdschat join --headless`` node
("victim", real SQLite file), an honest headless member ("alice") who sends a small
file, and a flooding process that signs with K fresh identities and publishes through
the relay, each identity sending files up to ``--file-mib`` MiB x ``--files`` (a public
channel: anyone may post, every identity gets its own per-sender quota).

While the victim is quiet, during the flood and after it, the bench runs the commands a
user runs, every ``--every`` seconds, and times each from the line written to the node's
stdin until the event that says it is done:

* ``/save ID`` of alice's small file (until ``info`` "saved to ..."),
* ``/react ID 👍`` on alice's line (until our ``own`` ``logged`` event),
* ``/edit ID`` of the victim's own line (likewise),
* the newest 50 lines read beside the running node (what the TUI shows at start: a
  read-only connection, ``ORDER BY lamport DESC LIMIT 50``, each row's digest checked),
* and, once per phase, ``sdschat history`` of the whole channel (a separate process).

It reports, per phase, p50 and max of each, the victim's database size (with its WAL)
and RSS (VmRSS, and VmHWM at the end), and the victim's file counters.

    python -m bench.file_flood                 # 30 identities x 4 MiB
    python -m bench.file_flood --small         # smoke test: 5 identities x 1 MiB
    python -m bench.file_flood --keys 30 --file-mib 16 --files 4   # up to the quota

Bounded: the flood sends at most keys x files x file-mib, paced at ``--rate``
segments/s (the relay's per-connection rate and the victim's queue stay honest), and
the whole run stops after ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402
from soak import free_port  # noqa: E402
from soak import proc_status_kib as proc_kib  # noqa: E402

CHANNEL = "floodbench"

FLOOD = r"""
import os, sys, threading, time
from websockets.sync.client import connect
from app.chat.files import split_file
from net.channel_key import derive_channel_key
from net.envelope import seal
from net.identity import Identity
from net.relay_frames import encode_publish, encode_subscribe
from sds import sds_pb2
from sds.ids import message_id_for

url, channel = sys.argv[1], sys.argv[2]
keys, files, size = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rate, seconds = float(sys.argv[6]), float(sys.argv[7])
key = derive_channel_key(channel, None)
idents = [Identity.generate() for _ in range(keys)]
lamport = {i.sender_id: time.time_ns() // 1_000_000 for i in idents}
queue = []
for f in range(files):
    for n, ident in enumerate(idents):
        queue += [(ident, p) for p in split_file(f"flood{n}-{f}.bin", os.urandom(size),
                                                f"mallory{n}")]
sent = 0
start = time.monotonic()
end = start + seconds
with connect(url, max_size=None, proxy=None, ping_interval=None) as ws:
    ws.send(encode_subscribe([key.topic]))

    def drain():  # read what the relay forwards: a client that never reads is dropped
        try:
            while True:
                ws.recv()
        except Exception:
            return

    threading.Thread(target=drain, daemon=True).start()
    for ident, content in queue:
        now = time.monotonic()
        if now >= end:
            break
        due = start + sent / rate
        if due > now:
            time.sleep(due - now)
        lamport[ident.sender_id] = max(lamport[ident.sender_id] + 1, time.time_ns() // 1_000_000)
        lt = lamport[ident.sender_id]
        mid = message_id_for(channel, ident.sender_id, lt, content, os.urandom(8))
        msg = sds_pb2.SdsMessage(sender_id=ident.sender_id, message_id=mid, channel_id=channel,
                                 lamport_timestamp=lt, content=content)
        ws.send(encode_publish(seal(msg.SerializeToString(), ident, key)))
        sent += 1
print(f"flood sent {sent} messages in {time.monotonic() - start:.1f} s", flush=True)
"""


def sdschat(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", *args]


TREE = ROOT  # where the children run (``--tree``): their code is what is measured


class Child:
    """A child process; its stdout JSON lines land in ``events`` (a queue) from a thread."""

    def __init__(self, argv: list[str], name: str, log_dir: Path, *, stdin: bool) -> None:
        self.name = name
        self._err = (log_dir / f"{name}.stderr").open("wb")
        self.popen = subprocess.Popen(
            argv, cwd=TREE, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=self._err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.lines: list[str] = []
        self.err_path = log_dir / f"{name}.stderr"
        self.reconnects = 0  # "connection" events other than the first connect
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            text = raw.decode("utf-8", "replace").strip()
            if os.environ.get("FLOOD_DEBUG"):
                print(self.name, text[:300], file=sys.stderr)
            self.lines.append(text)
            with contextlib.suppress(ValueError):
                obj = json.loads(text)
                if isinstance(obj, dict):
                    if obj.get("event") == "connection" and obj.get("state") == "connected":
                        self.reconnects += 1
                    self.events.put(obj)

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write((line + "\n").encode())
        self.popen.stdin.flush()

    def wait_for(self, pred: Any, timeout: float, what: str) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.name}: no {what} within {timeout} s")
            try:
                obj = self.events.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.popen.poll() is not None:
                    raise RuntimeError(f"{self.name} exited {self.popen.returncode}") from None
                continue
            if pred(obj):
                return obj

    def drain(self) -> list[dict[str, Any]]:
        out = []
        with contextlib.suppress(queue.Empty):
            while True:
                out.append(self.events.get_nowait())
        return out

    def stop(self, grace: float = 20.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(OSError):
                if self.popen.stdin is not None:
                    self.popen.stdin.close()
                else:
                    self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        self._err.close()


def db_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("sdschat.db*") if p.is_file())


def read_only(data_dir: Path) -> sqlite3.Connection:
    """A read-only connection beside the running node (any schema version: the bench
    also measures older trees, see ``--tree``)."""
    db = sqlite3.connect(f"{(data_dir / 'sdschat.db').resolve().as_uri()}?mode=ro", uri=True)
    db.execute("PRAGMA busy_timeout = 5000")
    return db


def newest_50(data_dir: Path) -> float:
    """Seconds to read the newest 50 lines read-only beside the node (digests checked)."""
    from storage.store import log_entry

    t = time.perf_counter()
    db = read_only(data_dir)
    try:
        rows = db.execute(
            "SELECT channel, message_id, sender_id, lamport, content, state, delivered_at, "
            "received_at, digest, was_lost, recovered, missing_before FROM messages "
            "WHERE channel = ? ORDER BY lamport DESC, message_id DESC LIMIT 50", (CHANNEL,)
        ).fetchall()
        entries = [log_entry(r) for r in rows]
    finally:
        db.close()
    assert entries
    return time.perf_counter() - t


class Bench:
    def __init__(self, opts: argparse.Namespace, tmp: Path) -> None:
        self.o = opts
        self.tmp = tmp
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.children: list[Child] = []
        self.samples: dict[str, dict[str, list[float]]] = {}
        self.phase = "quiet"
        self.deadline = time.monotonic() + opts.timeout

    def child(self, argv: list[str], name: str, *, stdin: bool) -> Child:
        c = Child(argv, name, self.tmp, stdin=stdin)
        self.children.append(c)
        return c

    def node(self, name: str) -> Child:
        return self.child(sdschat("join", CHANNEL, "--headless", "--fast", "--no-config",
                                  "--relay", self.url, "--name", name,
                                  "--data-dir", str(self.tmp / name)), name, stdin=True)

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the bench's --timeout ran out")
        return left

    def note(self, what: str, seconds: float) -> None:
        self.samples.setdefault(self.phase, {}).setdefault(what, []).append(seconds)

    def timed(self, victim: Child, line: str, pred: Any, what: str) -> None:
        victim.drain()
        t = time.perf_counter()
        victim.send(line)
        victim.wait_for(lambda e: pred(e) or (e.get("event") == "error" and not e.get("fatal")
                                              and self._raise(e)),
                        min(120.0, self.left()), what)
        self.note(what, time.perf_counter() - t)

    @staticmethod
    def _raise(e: dict[str, Any]) -> bool:
        raise RuntimeError(f"command refused: {e.get('message')}")

    def round(self, victim: Child, file_id: str, line_id: str, own_id: str, n: int) -> None:
        self.timed(victim, f"/save {file_id} {self.tmp / 'saved'}",
                   lambda e: e.get("event") == "info" and "saved" in (e.get("data") or {}), "save")
        self.timed(victim, f"/react {line_id} 👍",
                   lambda e: e.get("event") == "own" and e.get("state") == "logged"
                   and e.get("kind") not in (None, "msg"), "react")
        self.timed(victim, f"/edit {own_id} edited {n}",
                   lambda e: e.get("event") == "own" and e.get("state") == "logged"
                   and e.get("kind") not in (None, "msg"), "edit")
        self.note("newest50", newest_50(self.tmp / "victim"))
        pid = victim.popen.pid
        self.note("rss_mib", (proc_kib(pid, "VmRSS") or 0) / 1024)
        self.note("db_mib", db_bytes(self.tmp / "victim") / 2**20)

    def history(self) -> None:
        t = time.perf_counter()
        subprocess.run(sdschat("history", CHANNEL, "--data-dir", str(self.tmp / "victim")),
                       cwd=TREE, check=True, stdout=subprocess.DEVNULL,
                       timeout=min(300.0, self.left()))
        self.note("history_all", time.perf_counter() - t)

    def run(self) -> dict[str, Any]:
        o = self.o
        (self.tmp / "saved").mkdir()
        relay = self.child(sdschat("relay", "--port", str(self.port), "--stats-interval", "0"),
                           "relay", stdin=False)
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), 0.2):  # fmt: skip
                break
            time.sleep(0.1)
        victim, alice = self.node("victim"), self.node("alice")
        for c in (victim, alice):
            c.wait_for(lambda e: e.get("event") == "channel" and e.get("joined"), 60, "join")
        small = self.tmp / "notes.txt"
        small.write_bytes(os.urandom(800).hex().encode())  # 1.6 KB
        alice.send("hello from alice")
        alice.send(f"/send {small}")
        got = victim.wait_for(lambda e: e.get("event") == "file" and e.get("state") == "complete",
                              60, "alice's file")
        file_id = str(got["id"])
        # alice's line
        victim.send("the victim's own line")
        own = victim.wait_for(lambda e: e.get("event") == "own" and e.get("state") == "logged",
                              30, "own line")
        own_id = str(own["message_id"])
        line_id = self._line_of(victim, "hello from alice")
        for n in range(o.rounds):
            self.round(victim, file_id, line_id, own_id, n)
        self.history()
        hwm_quiet = proc_kib(victim.popen.pid, "VmHWM")
        # the flood
        self.phase = "flood"
        seconds = max(1.0, self.left() - 60)
        flood = self.child([sys.executable, "-c", FLOOD, self.url, CHANNEL, str(o.keys),
                            str(o.files), str(int(o.file_mib * 2**20)), str(o.rate),
                            str(seconds)], "flood", stdin=False)
        n = o.rounds
        while flood.popen.poll() is None:
            self.round(victim, file_id, line_id, own_id, n)
            n += 1
            time.sleep(o.every)
            self.left()
        self.history()
        per_file = -(-int(o.file_mib * 2**20) // (48 * 1024)) + 1  # segments + manifest
        expected = o.keys * o.files * per_file
        # after: until the victim has delivered the flood (bounded)
        self.phase = "after"
        end = min(time.monotonic() + 60, self.deadline)
        while time.monotonic() < end:
            if self._counted(victim) >= expected:
                break
            time.sleep(1)
        for _ in range(o.rounds):
            self.round(victim, file_id, line_id, own_id, n)
            n += 1
        self.history()
        victim.send("/stats")
        stats = victim.wait_for(lambda e: e.get("event") == "info" and e.get("text") == "stats",
                                30, "stats")
        hwm = proc_kib(victim.popen.pid, "VmHWM")
        stored = self._counted(victim)
        layout = self._composition(victim)
        flood_out = "\n".join(flood.lines) or (
            "no report; stderr: " + flood.err_path.read_text(errors="replace")[-400:])
        for c in (alice, victim, relay):
            c.stop()
        return {
            "keys": o.keys, "files": o.files, "file_mib": o.file_mib, "rate": o.rate,
            "flood": flood_out, "expected_messages": expected, "stored": stored,
            "composition_mib": layout,
            "counters": {k: v for k, v in _flat(stats.get("data") or {}).items()
                         if "file" in k or k.endswith("delivered")},
            "victim_connects": victim.reconnects,
            "hwm_quiet_mib": round((hwm_quiet or 0) / 1024, 1),
            "hwm_mib": round((hwm or 0) / 1024, 1),
            "phases": self.samples,
        }

    def _counted(self, victim: Child) -> int:
        """Messages the victim has stored (read-only, beside it)."""
        db = read_only(self.tmp / "victim")
        try:
            return int(db.execute("SELECT count(*) FROM messages WHERE channel = ?",
                                  (CHANNEL,)).fetchone()[0])
        finally:
            db.close()

    def _composition(self, victim: Child) -> dict[str, float]:
        """What the victim's database holds, in MiB: segments' contents, envelopes kept
        in the recent window, free pages, the WAL (read-only, beside the node)."""
        db = read_only(self.tmp / "victim")
        try:
            content = db.execute("SELECT coalesce(sum(length(content)), 0) FROM messages "
                                 "WHERE substr(content, 1, 2) = x'FF08'").fetchone()[0]
            env = db.execute("SELECT coalesce(sum(length(envelope)), 0) FROM recent"
                             ).fetchone()[0]
            page = db.execute("PRAGMA page_size").fetchone()[0]
            free = db.execute("PRAGMA freelist_count").fetchone()[0] * page
        finally:
            db.close()
        wal = self.tmp / "victim" / "sdschat.db-wal"
        return {"file_contents": round(content / 2**20, 1), "envelopes": round(env / 2**20, 1),
                "free_pages": round(free / 2**20, 1),
                "wal": round((wal.stat().st_size if wal.exists() else 0) / 2**20, 1)}

    def _line_of(self, victim: Child, text: str) -> str:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            db = read_only(self.tmp / "victim")
            try:
                for mid, content in db.execute(
                        "SELECT message_id, content FROM messages WHERE channel = ?",
                        (CHANNEL,)):  # fmt: skip
                    if text.encode() in bytes(content):
                        return str(mid)
            finally:
                db.close()
            time.sleep(0.2)
        raise TimeoutError(f"the victim never stored {text!r}")

    def close(self) -> None:
        for c in reversed(self.children):
            with contextlib.suppress(Exception):
                c.stop(5)


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        elif isinstance(v, int) and not isinstance(v, bool):
            out[f"{prefix}{k}"] = v
    return out


def summary(values: list[float], unit: str) -> str:
    if unit == "s":
        return (f"p50 {statistics.median(values) * 1000:7.0f} ms  "
                f"max {max(values) * 1000:7.0f} ms  (n={len(values)})")
    return f"first {values[0]:7.1f}  last {values[-1]:7.1f} {unit}"


def print_report(r: dict[str, Any]) -> None:
    print(f"flood: {r['keys']} identities x {r['files']} file(s) x {r['file_mib']} MiB, "
          f"{r['rate']} segments/s; {r['flood']}")
    for phase, rows in r["phases"].items():
        print(f"[{phase}]")
        for what, values in rows.items():
            unit = "MiB" if what.endswith("_mib") else "s"
            print(f"  {what:12s} {summary(values, unit)}")
    print(f"victim peak RSS: {r['hwm_quiet_mib']} MiB before the flood, {r['hwm_mib']} MiB "
          f"at the end; counters {r['counters']}; relay connections {r['victim_connects']} "
          f"(1: never dropped); messages stored {r['stored']} of {r['expected_messages']} "
          "flooded (+ the honest ones)")
    print(f"victim database holds (MiB): {r['composition_mib']}")


# ------------------------------------------------------------------ --layouts

def layouts(files: int, file_mib: float, lines: int, tmp: Path) -> dict[str, dict[str, float]]:
    """Where segments live, side by side with the same rows: ``messages`` (segments'
    bytes in ``messages.content``, schema 7, the real :class:`storage.Store`) against
    ``side file`` (the message row keeps the segment's header, its bytes go to a table of
    an attached SQLite file, as a design that moved them out would). Times in seconds
    (best of 3) of what reads the log or a file, and the files' sizes in MiB."""
    import asyncio
    import hashlib as _h

    from app.chat import content_pb2 as pb
    from app.chat.content import MAGIC
    from app.chat.files import split_file
    from app.chat.lines import encode_content
    from storage import Store, StoredMessage
    from storage.records import message_digest, segment_file_id

    rows: list[StoredMessage] = []
    n = 0
    for f in range(files):
        for _ in range(lines // max(1, files)):
            rows.append(StoredMessage("general", _h.sha256(b"l%d" % n).hexdigest(), "bob",
                                      1000 + n, encode_content(f"line {n} about nothing", "bob")))
            n += 1
        for part in split_file(f"f{f}.bin", os.urandom(int(file_mib * 2**20)), f"m{f}"):
            rows.append(StoredMessage("general", _h.sha256(b"s%d" % n).hexdigest(), f"m{f}" * 8,
                                      1000 + n, part))
            n += 1
    probe_file = next(r for r in rows if segment_file_id(r.content) is not None)
    out: dict[str, dict[str, float]] = {"messages": {}, "side file": {}}

    async def build_a(d: Path) -> float:
        t = time.perf_counter()
        async with await Store.open(d, background_checkpoints=False) as store:
            await store.join_channel("general", b"t", is_public=True)
            for i in range(0, len(rows), 64):
                await store.insert_messages(rows[i:i + 64])
        return time.perf_counter() - t

    def build_b(d: Path) -> float:
        """The same rows, segments' bytes in an attached file (headers in messages)."""
        t = time.perf_counter()
        asyncio.run(_init(d))
        db = sqlite3.connect(d / "sdschat.db", isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(f"ATTACH DATABASE '{d / 'segments.db'}' AS seg")
        db.execute("PRAGMA seg.journal_mode = WAL")
        db.execute("CREATE TABLE seg.segment_data (channel TEXT, message_id TEXT, data BLOB, "
                   "PRIMARY KEY (channel, message_id)) WITHOUT ROWID")
        for i in range(0, len(rows), 64):
            db.execute("BEGIN")
            for r in rows[i:i + 64]:
                content, data = r.content, None
                if segment_file_id(content) is not None:
                    c = pb.Content.FromString(content[1:])
                    data = c.file_segment.data
                    c.file_segment.data = b""
                    content = MAGIC + c.SerializeToString()
                    db.execute("INSERT INTO seg.segment_data VALUES (?,?,?)",
                               (r.channel, r.message_id, data))
                db.execute(
                    "INSERT INTO messages (channel, message_id, sender_id, lamport, state, "
                    "received_at, content, digest, file_id) VALUES (?,?,?,?,NULL,0,?,?,?)",
                    (r.channel, r.message_id, r.sender_id, r.lamport, content,
                     message_digest(r.channel, r.message_id, r.sender_id, r.lamport, content),
                     segment_file_id(r.content)))
            db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA seg.wal_checkpoint(TRUNCATE)")
        db.close()
        return time.perf_counter() - t

    async def _init(d: Path) -> None:
        async with await Store.open(d, background_checkpoints=False) as store:
            await store.join_channel("general", b"t", is_public=True)

    da, db_ = tmp / "a", tmp / "b"
    out["messages"]["insert_s"] = asyncio.run(build_a(da))
    out["side file"]["insert_s"] = build_b(db_)
    file_id = segment_file_id(probe_file.content)

    for name, d in (("messages", da), ("side file", db_)):
        out[name].update(_measure(d, side=name == "side file", file_id=str(file_id)))
    return out


def _best(fn: Any) -> float:
    times = []
    for _ in range(3):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _measure(d: Path, *, side: bool, file_id: str) -> dict[str, float]:
    from storage.store import FILE_SEGMENTS_SQL, log_entry

    cols = ("channel, message_id, sender_id, lamport, content, state, delivered_at, "
            "received_at, digest, was_lost, recovered, missing_before")
    db = sqlite3.connect(f"{(d / 'sdschat.db').as_uri()}?mode=ro", uri=True)
    if side:
        db.execute(f"ATTACH DATABASE '{(d / 'segments.db').as_uri()}?mode=ro' AS seg")

    def history() -> None:  # what `sdschat history` reads: every row, digest-checked
        for r in db.execute(f"SELECT {cols} FROM messages WHERE channel = 'general' "
                            "ORDER BY lamport, message_id"):
            log_entry(r)

    def newest() -> None:  # the TUI's first screen
        for r in db.execute(f"SELECT {cols} FROM messages WHERE channel = 'general' "
                            "ORDER BY lamport DESC, message_id DESC LIMIT 50"):
            log_entry(r)

    def search() -> None:  # Store.search (the TUI's find), a word nobody wrote
        db.execute("SELECT message_id FROM messages WHERE channel = 'general' AND "
                   "CAST(content AS TEXT) LIKE '%needle%' ORDER BY lamport DESC LIMIT 50"
                   ).fetchall()

    def one_file() -> None:  # /save's read of one file
        got = [log_entry(r) for r in db.execute(FILE_SEGMENTS_SQL,
                                                ("general", file_id, "m0" * 8, 400))]
        if side:
            for e in got:
                db.execute("SELECT data FROM seg.segment_data WHERE channel = ? AND "
                           "message_id = ?", (e.channel, e.message_id)).fetchone()

    try:
        out = {"history_all_s": _best(history), "newest50_s": _best(newest),
               "search_s": _best(search), "one_file_s": _best(one_file)}
    finally:
        db.close()
    out["size_mib"] = sum(p.stat().st_size for p in d.iterdir()
                          if p.name.startswith(("sdschat.db", "segments.db"))) / 2**20
    return out


def print_layouts(r: dict[str, dict[str, float]], files: int, file_mib: float, lines: int) -> None:
    print(f"where segments live: {lines} lines + {files} files of {file_mib} MiB, same rows")
    keys = list(r["messages"])
    print(f"  {'':14s}" + "".join(f"{k:>15s}" for k in keys))
    for name, row in r.items():
        print(f"  {name:14s}" + "".join(
            f"{row[k]:15.1f}" if k.endswith("mib") else f"{row[k] * 1000:13.0f}ms"
            for k in keys))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, default=30, help="flooding identities (default 30)")
    p.add_argument("--files", type=int, default=1, help="files per identity (default 1)")
    p.add_argument("--file-mib", type=float, default=4.0, help="size of each file (default 4)")
    p.add_argument("--rate", type=float, default=40.0, help="segments per second (default 40)")
    p.add_argument("--rounds", type=int, default=3, help="command rounds before/after")
    p.add_argument("--every", type=float, default=1.0, help="seconds between rounds in the flood")
    p.add_argument("--timeout", type=float, default=600.0, help="whole run bound (s)")
    p.add_argument("--small", action="store_true", help="smoke test: 5 x 1 MiB")
    p.add_argument("--json", action="store_true", help="print the report as JSON too")
    p.add_argument("--layouts", action="store_true",
                   help="instead: where segments live, two layouts side by side (storage only)")
    p.add_argument("--lines", type=int, default=2000, help="text lines for --layouts")
    p.add_argument("--tree", action="append", default=[], metavar="DIR",
                   help="run the nodes from this source tree (repeatable: each tree in "
                        "turn, in one run, for a side-by-side comparison; default: this one)")
    o = p.parse_args(argv)
    if o.small:
        o.keys, o.files, o.file_mib, o.rounds, o.timeout = 5, 1, 1.0, 2, min(o.timeout, 180)
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  load "
          f"{os.getloadavg()[0]:.2f}  {describe()}", flush=True)
    if o.layouts:
        with tempfile.TemporaryDirectory(prefix="sdschat-layouts-") as tmp:
            r = layouts(o.files, o.file_mib, o.lines, Path(tmp))
        print_layouts(r, o.files, o.file_mib, o.lines)
        print(f"load after {os.getloadavg()[0]:.2f}")
        return 0
    global TREE
    for tree in o.tree or [str(ROOT)]:
        TREE = Path(tree).resolve()
        head = subprocess.run(["git", "-C", str(TREE), "log", "-1", "--format=%h"],
                              capture_output=True, text=True, check=False).stdout.strip()
        print(f"== tree {TREE} ({head or 'not a git checkout'}), load "
              f"{os.getloadavg()[0]:.2f}", flush=True)
        with tempfile.TemporaryDirectory(prefix="sdschat-file-flood-") as tmp:
            bench = Bench(o, Path(tmp))
            try:
                report = bench.run()
            finally:
                bench.close()
        print_report(report)
        if o.json:
            print(json.dumps(report))
    print(f"load after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
