"""Where a lossy ``sdschat sim`` run's deliveries go: content, requests, answers that
reached someone lacking the message, answers that reached nobody new.

Runs :func:`app.sim.simulation.run_sim` in this process with two observers on the simulated
network (:mod:`net.memnet`), and for every copy of a content message on the wire
(the author's first broadcast, its resends, every SDS-R answer) counts the
receivers for which it was the first copy (neither delivered nor waiting in the
incoming buffer when it arrived). Then, from the run's events:

* request-carrying syncs: how many, and how many ids each asks for;
* per message: request entries, answers, the answers that reached a member
  lacking it (``useful``) and those that reached nobody new (``duplicate``:
  every receiver held it), by the class of ``bench/sim_repairs.py`` (the first
  answer, one after a new request, one without a request since the previous copy,
  one within 150 ms of the previous copy);
* the deliveries per content delivery (the summary's figure: every delivery
  divided by the content broadcasts' first-hand deliveries) split into content,
  syncs with and without requests, useful and duplicate answers;
* how many answers each message needed (the answer rounds: copies that reached
  someone new).

Profiles side by side in one invocation, the same seed::

    .venv/bin/python bench/sim_repair_rounds.py -n 2000 -m 200 --loss 0.05 --seed 0 \\
        --profiles prev default

``prev`` is :data:`sim_sync_repair.PREV` (this round's repair rules off); a JSON
dict of ``sds.Config`` changes is a profile too. Each profile runs in its own
process (peak RSS per process).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

WITHIN_MS = 150


def run_one(spec_d: dict[str, Any], out: Path) -> dict[str, Any]:
    """Run the sim with the copy observers; return the breakdown."""
    import net.memnet as memnet
    import sds
    from app.sim.simulation import SimSpec, run_sim
    from sds import sds_pb2

    copies: list[list[Any]] = []  # [message id, sender, time, new receivers]
    current: list[int | None] = [None]

    class _Tagged(memnet._Parsed):  # type: ignore[misc,name-defined]
        __slots__ = ("tag",)

        def __init__(self, data: bytes, carried: tuple[bytes, ...] = ()) -> None:
            super().__init__(data, carried)
            self.tag = current[0]

    orig_broadcast = memnet.MemNetwork._broadcast
    orig_deliver = memnet.MemNetwork._deliver_batch

    def broadcast(self: Any, src: Any, channel_id: str, data: bytes,
                  carried: tuple[bytes, ...] = ()) -> None:
        pb = sds_pb2.SdsMessage()
        pb.ParseFromString(data)
        if pb.content and pb.HasField("lamport_timestamp"):
            current[0] = len(copies)
            copies.append([pb.message_id, src.node_id, self.now_ms, 0])
        else:
            current[0] = None
        try:
            orig_broadcast(self, src, channel_id, data, carried)
        finally:
            current[0] = None

    def deliver(self: Any, parsed: Any, receivers: list[Any]) -> None:
        tag = getattr(parsed, "tag", None)
        if tag is not None:
            mid = copies[tag][0]
            new = 0
            for node in receivers:
                if not node.online:
                    continue
                for ch in node.participant.channels.values():
                    if not (ch.has_message(mid) or mid in ch._incoming):
                        new += 1
            copies[tag][3] += new
        orig_deliver(self, parsed, receivers)

    memnet._Parsed = _Tagged  # type: ignore[misc]
    memnet.MemNetwork._broadcast = broadcast  # type: ignore[method-assign]
    memnet.MemNetwork._deliver_batch = deliver  # type: ignore[method-assign]
    del sds
    r = run_sim(SimSpec(**spec_d), out, force=True)
    return analyse(out, r.meta, copies)


def analyse(out: Path, meta: dict[str, Any], copies: list[list[Any]]) -> dict[str, Any]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(out / "events", columns=["node_id", "time_ms", "kind", "message_id",
                                               "detail"])

    def rows(kind: str) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = t.filter(pc.equal(t.column("kind"), kind)).to_pylist()
        return got

    sent = rows("MessageSent")
    author = {r["message_id"]: r["node_id"] for r in sent}
    req_sizes: collections.Counter[int] = collections.Counter()
    requests: dict[str, list[int]] = collections.defaultdict(list)
    for r in rows("RepairRequested"):
        ids = json.loads(r["detail"])["message_ids"]
        req_sizes[len(ids)] += 1
        for m in ids:
            requests[m].append(r["time_ms"])
    by_kind = meta["traffic"]["by_kind"]
    content_first = by_kind["content"]["deliveries"] or 1
    syncs = by_kind["sync"]["broadcasts"] or 1
    req_syncs = sum(req_sizes.values())
    per_sync = by_kind["sync"]["deliveries"] / syncs
    # copies: the author's first broadcast is content; every later one an answer
    # (or a resend by the author)
    by_msg: dict[str, list[list[Any]]] = collections.defaultdict(list)
    for c in copies:
        by_msg[c[0]].append(c)
    classes: collections.Counter[tuple[str, str]] = collections.Counter()
    useful_per_msg: collections.Counter[int] = collections.Counter()
    answers_per_msg: collections.Counter[int] = collections.Counter()
    useful_new = 0
    for m, cs in by_msg.items():
        answers = cs[1:]
        answers_per_msg[len(answers)] += 1
        useful_per_msg[sum(1 for c in answers if c[3] > 0)] += 1
        prev = cs[0][2]
        for i, c in enumerate(answers):
            now = c[2]
            if i == 0:
                what = "first"
            elif now - prev < WITHIN_MS:
                what = "within 150 ms"
            elif any(prev < x <= now for x in requests[m]):
                what = "after a new request"
            else:
                what = "no request since"
            classes[(what, "useful" if c[3] > 0 else "duplicate")] += 1
            if c[3] > 0:
                useful_new += c[3]
            prev = now
    n_answers = sum(len(cs) - 1 for cs in by_msg.values())
    per_answer = by_kind["repair"]["deliveries"] / max(1, by_kind["repair"]["broadcasts"])
    useful = sum(v for (_, u), v in classes.items() if u == "useful")
    msgs = max(1, len(by_msg))
    split = {
        "content": round(by_kind["content"]["deliveries"] / content_first, 2),
        "syncs with requests": round(req_syncs * per_sync / content_first, 2),
        "syncs without": round((syncs - req_syncs) * per_sync / content_first, 2),
        "answers reaching someone new": round(useful * per_answer / content_first, 2),
        "answers reaching nobody new": round((n_answers - useful) * per_answer / content_first,
                                             2),
        "resends": round(by_kind["resend"]["deliveries"] / content_first, 2),
    }
    total = sum(v["deliveries"] for v in by_kind.values())
    return {
        "deliveries_per_content_delivery": round(total / content_first, 2),
        "split": split,
        "syncs": by_kind["sync"]["broadcasts"],
        "request_syncs": req_syncs,
        "ids_per_request_sync": dict(sorted(req_sizes.items())),
        "request_entries_per_message": round(sum(map(len, requests.values())) / msgs, 2),
        "answers": n_answers,
        "answers_per_message": round(n_answers / msgs, 2),
        "useful_answers_per_message": round(useful / msgs, 2),
        "answer_classes": {f"{w}, {u}": v for (w, u), v in sorted(classes.items())},
        "answers_per_message_hist": dict(sorted(answers_per_msg.items())),
        "useful_answers_per_message_hist": dict(sorted(useful_per_msg.items())),
        "first_copies_by_answers": useful_new,
        "holding_every_message": meta["participants_holding_every_message"],
        "resend_broadcasts": by_kind["resend"]["broadcasts"],
        "cpu_s": meta["cpu_seconds"], "peak_rss_mb": meta["peak_rss_mb"],
        "authors": len(set(author.values())),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", "--participants", type=int, default=2000)
    p.add_argument("-m", "--messages", type=int, default=200)
    p.add_argument("--loss", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profiles", nargs="+", default=["prev", "default"])
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_spec, child_out = json.loads(args.child)
        print(json.dumps(run_one(child_spec, Path(child_out))))
        return 0
    import os

    from machine import calibrate, describe
    from sim_sync_repair import profile_changes

    load = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {describe(calibrate())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="sim-repair-rounds-") as tmp:
        for prof in args.profiles:
            spec_d: dict[str, Any] = {
                "participants": args.participants, "messages": args.messages,
                "loss": args.loss, "seed": args.seed,
            }
            changes = profile_changes(prof)
            if changes:
                spec_d["protocol"] = changes
            out = Path(tmp) / f"p{abs(hash(prof))}"
            try:
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", json.dumps([spec_d, str(out)])],
                    capture_output=True, text=True, timeout=args.timeout, check=False)
            except subprocess.TimeoutExpired:
                print(json.dumps({"profile": prof, "error": "timeout"}), flush=True)
                continue
            if proc.returncode != 0:
                print(json.dumps({"profile": prof, "error": proc.stderr[-2000:]}), flush=True)
                continue
            row = {"profile": prof, "n": args.participants, **json.loads(
                proc.stdout.strip().splitlines()[-1])}
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
