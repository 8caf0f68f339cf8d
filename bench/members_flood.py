"""A member floods a members channel with membership events, each with a 200 KB bloom filter.

Issue 39 (part 3): 254 ``share_key`` events, each in an SDS message carrying a
200 KB bloom filter, grew a member's members file from 11 KB to 66 MB (it kept
every event's envelope and was rewritten whole, with two fsyncs, every round), and
an honest member's lines took p50 1.19 s / p99 3.8 s during the flood (4 / 13 ms
before). This runs that flood with real processes on 127.0.0.1:

* a relay and three headless nodes (``--fast``): alice creates ``#team``, bob and
  carol join by invite; carol says one line, then stops: her data directory is the
  attacker's;
* bob sends a line every 100 ms for the whole run; each line's latency is alice's
  ``delivered`` ``emitted_ns`` minus the moment it was written to bob's stdin;
* after ``--before`` seconds the attacker publishes ``--events`` (254) share-key
  events built from carol's data directory with that tree's own code (its
  ``MembersChannel.outgoing``: unchained events before issue 39, chained ones
  after), each in an SDS message with a ``--bloom`` (200 KB) bloom filter, sealed
  with carol's key, as fast as the relay takes them;
* the run goes on ``--after`` seconds; then alice's members files are measured.

``--compare DIR`` runs DIR's code (a ``git worktree`` of the previous commit; its
processes start there) and this tree alternately, ``--rounds`` times each, in one run.

Usage::

    .venv/bin/python bench/members_flood.py --compare /tmp/wt-41573be
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_latency import Child, start_relay
from machine import describe

ROOT = Path(__file__).resolve().parents[1]

CRAFT = r"""
import os, sys, time
from pathlib import Path
from app.members import secrets_file
from app.members.events import encode_share_key
from net.envelope import seal
from net.identity import Identity
from sds import sds_pb2
from sds.ids import message_id_for

data_dir, n, bloom, out = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
mc = secrets_file.load(data_dir, "team")
ident = Identity.load(data_dir / "identity.pem")
mc.signer = ident  # what carol's own node signs with (no effect on code without it)
now = int(time.time() * 1000)
with out.open("wb") as f:
    for i in range(n):
        [content] = mc.outgoing(encode_share_key(os.urandom(32)), now)
        lamport = now + i
        mid = message_id_for("team", ident.sender_id, lamport, content, os.urandom(8))
        msg = sds_pb2.SdsMessage(sender_id=ident.sender_id, message_id=mid, channel_id="team",
                                 lamport_timestamp=lamport, content=content,
                                 bloom_filter=os.urandom(bloom))
        env = seal(msg.SerializeToString(), ident, mc.sending_key())
        mc.on_control(ident.sender_id, lamport, mid, content, env, now)  # the next one chains on it
        f.write(len(env).to_bytes(4, "big") + env)
"""

PUBLISH = r"""
import sys
from pathlib import Path
from websockets.sync.client import connect
from net.relay_frames import encode_publish
data = Path(sys.argv[2]).read_bytes()
with connect(sys.argv[1], max_size=None, proxy=None) as ws:
    i = 0
    while i < len(data):
        n = int.from_bytes(data[i:i + 4], "big")
        ws.send(encode_publish(data[i + 4:i + 4 + n]))
        i += 4 + n
"""


def _wait(child: Child, pred: Any, timeout: float, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # bounded
        for e in child.events():
            if pred(e):
                return e
        if child.popen.poll() is not None:
            raise RuntimeError(f"{child.name} exited waiting for {what}:\n{child.tail()}")
        time.sleep(0.05)
    raise RuntimeError(f"{child.name}: no {what} in {timeout} s\n{child.tail()}")


def _node(code: Path, tmp: Path, name: str, url: str, extra: list[str]) -> Child:
    argv = [sys.executable, "-m", "app.cli", "join", *extra, "--data-dir", str(tmp / name),
            "--name", name, "--headless", "--fast", "--relay", url]  # fmt: skip
    return Child(argv, name, tmp, stdin=True, cwd=code)


def _invite(alice: Child) -> str:
    before = len([e for e in alice.events() if e.get("event") == "invite"])
    alice.write(b"/invite\n")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # bounded
        found = [e for e in alice.events() if e.get("event") == "invite"]
        if len(found) > before:
            return str(found[-1]["code"])
        time.sleep(0.05)
    raise RuntimeError("no invite code")


def _files_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in (data_dir / "members").glob("*") if p.is_file())


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One run of the scenario with the code of ``code``."""
    with tempfile.TemporaryDirectory(prefix="sdschat-flood-") as tmp_s:
        tmp = Path(tmp_s)
        children: list[Child] = []
        try:
            url = start_relay(children, tmp, code)
            alice = _node(code, tmp, "alice", url, ["team", "--create"])
            children.append(alice)
            _wait(alice, lambda e: e.get("event") == "members" and e.get("what") == "created",
                  60, "created")  # fmt: skip
            joined = []
            for name in ("bob", "carol"):
                p = _node(code, tmp, name, url, ["--invite", _invite(alice)])
                children.append(p)
                _wait(p, lambda e: e.get("event") == "members" and e.get("what") == "joined",
                      90, "joined")  # fmt: skip
                joined.append(p)
            bob, carol = joined
            carol.write(b"carol is here\n")
            _wait(alice, lambda e: e.get("text") == "carol is here", 60, "carol's line")
            carol.stop(grace=20)
            before_bytes = _files_bytes(tmp / "alice")
            flood = tmp / "flood.bin"
            subprocess.run([sys.executable, "-c", CRAFT, str(tmp / "carol"), str(args.events),
                            str(args.bloom), str(flood)], cwd=code, check=True,
                           timeout=600)  # fmt: skip
            sent: dict[str, float] = {}
            stop = threading.Event()

            def talk() -> None:
                i = 0
                while not stop.is_set() and i < 10_000:  # bounded in count and time
                    text = f"honest {i}"
                    sent[text] = time.time_ns() / 1e9
                    bob.write(text.encode() + b"\n")
                    i += 1
                    stop.wait(0.1)

            t0 = time.time()
            speaker = threading.Thread(target=talk, daemon=True)
            speaker.start()
            time.sleep(args.before)  # the phase before the flood (the line keeps going)
            flood_at = time.time()
            subprocess.run([sys.executable, "-c", PUBLISH, url, str(flood)], cwd=code,
                           check=True, timeout=600)  # fmt: skip
            flood_sent = time.time()
            time.sleep(args.after)
            stop.set()
            speaker.join(5)
            time.sleep(2)
            got = {e["text"]: e.get("emitted_ns", e["ts"] * 1e9) / 1e9 for e in alice.events()
                   if e.get("event") == "delivered" and str(e.get("text", "")).startswith(
                       "honest ")}  # fmt: skip
            lat: dict[str, list[float]] = {"before": [], "during": [], "after": []}
            settle = flood_sent + args.settle
            for text, at in sent.items():
                if text not in got:
                    continue
                phase = "before" if at < flood_at else "during" if at < settle else "after"
                lat[phase].append((got[text] - at) * 1000)
            cpu = alice.cpu_s()
            out = {
                "code": str(code), "events": args.events, "bloom": args.bloom,
                "file_before": before_bytes, "file_after": _files_bytes(tmp / "alice"),
                "lines": len(sent), "delivered": len(got), "alice_cpu_s": cpu,
                "flood_s": flood_sent - flood_at, "run_s": time.time() - t0,
                **{f"{k}_p50_ms": _pct(v, 0.5) for k, v in lat.items()},
                **{f"{k}_p99_ms": _pct(v, 0.99) for k, v in lat.items()},
                **{f"{k}_n": len(v) for k, v in lat.items()},
            }
            return out
        finally:
            for c in children:
                c.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=254)
    ap.add_argument("--bloom", type=int, default=200_000)
    ap.add_argument("--before", type=float, default=10.0)
    ap.add_argument("--after", type=float, default=20.0)
    ap.add_argument("--settle", type=float, default=15.0,
                    help="seconds after the last flood envelope still counted as 'during'")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--compare", type=Path, default=None, help="another checkout to run too")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    print(describe(), flush=True)
    trees = [ROOT] if args.compare is None else [args.compare, ROOT]
    results = []
    for r in range(args.rounds):
        for code in trees if r % 2 == 0 else trees[::-1]:
            res = run(code, args)
            results.append(res)
            if args.json:
                print(json.dumps(res), flush=True)
            else:
                print(f"{code}: members file {res['file_before']:,} -> {res['file_after']:,} B; "
                      f"honest p50/p99 before {res['before_p50_ms']:.0f} / "
                      f"{res['before_p99_ms']:.0f} ms, during {res['during_p50_ms']:.0f} / "
                      f"{res['during_p99_ms']:.0f} ms, after {res['after_p50_ms']:.0f} / "
                      f"{res['after_p99_ms']:.0f} ms; {res['delivered']}/{res['lines']} lines; "
                      f"flood sent in {res['flood_s']:.1f} s", flush=True)  # fmt: skip
    if len(trees) == 2 and not args.json:
        for code in trees:
            mine = [r for r in results if r["code"] == str(code)]
            print(f"median over rounds, {code}: during p99 "
                  f"{statistics.median(r['during_p99_ms'] for r in mine):.0f} ms, file "
                  f"{statistics.median(r['file_after'] for r in mine):,.0f} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
