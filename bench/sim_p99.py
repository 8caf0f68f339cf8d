"""Where the delivery p99 goes at 1,000 members: before issue 28's sync changes and now.

Runs ``sdschat sim`` (:func:`app.sim.simulation.run_sim`, each in its own process) for the
``before`` and ``default`` protocol columns of ``bench/sim_sync_repair.py`` with the
same spec and seed, then splits every late delivery (latency at or above the run's
p95) of a (member, message) pair into:

* **notice**: from the message's send to the member's first ``MessagesMissing``
  naming it (the member learns the message exists: a later message or sync names
  it), or to its delivery when it never missed it (a late first copy);
* **ask**: from then to the member's own first request for it (``RepairRequested``),
  if it asked before it got the message;
* **repair**: from the notice to the delivery.

Also counted per late pair: whether the member asked itself, and how many requests
for the message went out in the channel before the pair was delivered.

With ``--timeline K``, the repair rounds of the K lines that held back the most late
pairs (the dependency a late pair waited for longest): from the line's send, each
request (who asked), each answer sent and each answer a holder dropped after a
silence (``Config.repair_answer_expiry``, recorded in the child process), with the
members still lacking the line at that moment, and when the first requests of the
members that found it missing were due (the earliest, and how many were due within
the first 5 s); then, over every line a member lacked, the requests and answers
per line, the requests that went out after its first request and before its first
answer (crossing it), and the time from the first notice to the channel's first
request (the line's first-request delay).

    .venv/bin/python bench/sim_p99.py            # 1,000 members, 40 messages, 10% loss
    .venv/bin/python bench/sim_p99.py --sizes 300 --seed 1
    .venv/bin/python bench/sim_p99.py --profiles prev default --timeline 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import calibrate, describe
from sim_sync_repair import profile_changes

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
import sds.channel as channel
from app.sim import SimSpec, run_sim  # old checkouts too (ref=DIR)
expired, due = [], []
try:  # sds split into parts (the answers and the requests own these steps)
    from sds.answers import RepairAnswers as _answers
    from sds.requests import RepairRequests as _requests
    answer_expired = _answers.answer_expired
    ask_for_missing = _requests.ask_for_missing
    def _answer_expired(self, mid, now):  # record the answers dropped after a silence
        gone = answer_expired(self, mid, now)
        if gone:
            expired.append((self.sender_id, mid, now))
        return gone
    def _ask_for_missing(self, entry, by, now):  # record when each first request is due
        ask_for_missing(self, entry, by, now)
        item = self.out._items.get(entry.message_id)
        if item is not None:
            due.append((self.sender_id, entry.message_id, now, item.due_ms))
    _answers.answer_expired = _answer_expired
    _requests.ask_for_missing = _ask_for_missing
except ImportError:  # an older checkout (ref=DIR): one Channel class
    answer_expired = channel.Channel._answer_expired
    schedule_missing = channel.Channel._schedule_missing
    def _answer_expired(self, mid, now):
        gone = answer_expired(self, mid, now)
        if gone:
            expired.append((self.sender_id, mid, now))
        return gone
    def _schedule_missing(self, info, now):
        schedule_missing(self, info, now)
        item = self._repair_out._items.get(info.entry.message_id)
        if item is not None:
            due.append((self.sender_id, info.entry.message_id, now, item.due_ms))
    channel.Channel._answer_expired = _answer_expired
    channel.Channel._schedule_missing = _schedule_missing
spec = SimSpec(**json.loads({spec!r}))
r = run_sim(spec, {out!r}, force=True)
with open({out!r} + "/repair_timeline.json", "w") as f:
    json.dump({{"expired": expired, "due": due}}, f)
print(json.dumps({{k: r.meta[k] for k in ("wall_seconds", "cpu_seconds", "peak_rss_mb")}}))
"""


def breakdown(out: Path) -> dict[str, Any]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(out / "events", columns=["node_id", "kind", "message_id", "time_ms",
                                                "detail"])
    kinds = t.column("kind")
    keep = pc.is_in(kinds, value_set=__import__("pyarrow").array(
        ["MessageSent", "MessageDelivered", "MessagesMissing", "RepairRequested"]))
    rows = t.filter(keep).to_pylist()
    sent: dict[str, int] = {}
    delivered: dict[tuple[str, str], int] = {}
    noticed: dict[tuple[str, str], int] = {}
    asked: dict[tuple[str, str], int] = {}
    waited: dict[tuple[str, str], int] = {}
    requests: dict[str, list[int]] = {}
    for r in rows:
        k, node, t_ms = r["kind"], r["node_id"], r["time_ms"]
        if k == "MessageSent":
            sent[r["message_id"]] = t_ms
        elif k == "MessageDelivered":
            delivered[(node, r["message_id"])] = t_ms
        elif k == "MessagesMissing":
            for e in json.loads(r["detail"] or "{}").get("missing", ()):
                noticed.setdefault((node, e["message_id"]), t_ms)
            if r["message_id"]:  # this message arrived and waits for those
                waited.setdefault((node, r["message_id"]), t_ms)
        elif k == "RepairRequested":
            for mid in json.loads(r["detail"] or "{}").get("message_ids", ()):
                asked.setdefault((node, mid), t_ms)
                requests.setdefault(mid, []).append(t_ms)
    lat = {p: d - sent[p[1]] for p, d in delivered.items() if p[1] in sent}
    ordered = sorted(lat.values())
    q = lambda f: ordered[min(len(ordered) - 1, int(f * len(ordered)))]  # noqa: E731
    p95 = q(0.95)
    late = [p for p, v in lat.items() if v >= p95]
    notice, repair, ask_wait = [], [], []
    arrive, wait = [], []
    own_ask = 0
    reqs_before = []
    for p in late:
        s, d = sent[p[1]], delivered[p]
        if p in noticed:  # the member lacked it: it learned of it, then got it
            n = min(noticed[p], d)
            notice.append((n - s) / 1000)
            repair.append((d - n) / 1000)
        elif p in waited:  # it had it, waiting for a dependency it lacked
            w = min(waited[p], d)
            arrive.append((w - s) / 1000)
            wait.append((d - w) / 1000)
        a = asked.get(p)
        if a is not None and a <= d:
            own_ask += 1
            ask_wait.append((a - min(n, d)) / 1000)
        reqs_before.append(sum(1 for x in requests.get(p[1], ()) if x <= d))

    def med(xs: list[float]) -> float | None:
        return round(statistics.median(xs), 1) if xs else None

    return {
        "pairs": len(lat), "p50_s": q(0.5) / 1000, "p95_s": p95 / 1000, "p99_s": q(0.99) / 1000,
        "late_pairs": len(late),
        "late_lacked": len(notice), "lacked_notice_median_s": med(notice),
        "lacked_repair_median_s": med(repair),
        "late_waited_for_a_dependency": len(wait), "waited_arrival_median_s": med(arrive),
        "waited_median_s": med(wait),
        "late_other": len(late) - len(notice) - len(wait),
        "late_that_asked_themselves": own_ask, "own_ask_wait_median_s": med(ask_wait),
        "requests_in_channel_before_delivery_median": (
            statistics.median(reqs_before) if reqs_before else None),
        "late_messages": len({p[1] for p in late}),
    }


def timeline(out: Path, top: int) -> list[str]:
    """The repair rounds of the ``top`` lines that held back the most late pairs, and
    the first-request delay over every lacked line (see the module docstring)."""
    import bisect

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(out / "events", columns=["node_id", "kind", "message_id", "time_ms",
                                                "detail"])
    t = t.filter(pc.is_in(t.column("kind"), value_set=pa.array(
        ["MessageSent", "MessageDelivered", "MessagesMissing", "RepairRequested",
         "RepairSent"])))
    extra = json.loads((out / "repair_timeline.json").read_text())
    sent: dict[str, int] = {}
    author: dict[str, str] = {}
    delivered: dict[tuple[str, str], int] = {}
    noticed: dict[tuple[str, str], int] = {}
    deps: dict[tuple[str, str], list[str]] = {}
    rounds: dict[str, list[tuple[int, str, str]]] = {}
    for r in t.to_pylist():
        k, node, t_ms, mid = r["kind"], r["node_id"], r["time_ms"], r["message_id"]
        if k == "MessageSent":
            sent[mid], author[mid] = t_ms, node
        elif k == "MessageDelivered":
            delivered[(node, mid)] = t_ms
        elif k == "MessagesMissing":
            missing = [e["message_id"] for e in json.loads(r["detail"] or "{}").get(
                "missing", ())]
            for m in missing:
                noticed.setdefault((node, m), t_ms)
            if mid:
                deps.setdefault((node, mid), missing)
        elif k == "RepairRequested":
            for m in json.loads(r["detail"] or "{}").get("message_ids", ()):
                rounds.setdefault(m, []).append((t_ms, "request", node))
        elif k == "RepairSent":
            rounds.setdefault(mid, []).append((t_ms, "answer", node))
    for node, mid, t_ms in extra["expired"]:
        rounds.setdefault(mid, []).append((t_ms, "expired", node))
    first_due: dict[str, list[int]] = {}
    for _node, mid, now, due in extra["due"]:
        first_due.setdefault(mid, []).append(due - now)
    lat = sorted(d - sent[m] for (_, m), d in delivered.items() if m in sent)
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else 0
    never = 1 << 62
    held: dict[str, int] = {}
    for (node, mid), d in delivered.items():
        if mid in sent and d - sent[mid] >= p95 and deps.get((node, mid)):
            b = max(deps[(node, mid)], key=lambda x: delivered.get((node, x), never))
            held[b] = held.get(b, 0) + 1
    lacked: dict[str, list[int]] = {}
    first_notice: dict[str, int] = {}
    for (node, mid), n_ms in noticed.items():
        if mid in sent:
            lacked.setdefault(mid, []).append(delivered.get((node, mid), never))
            first_notice[mid] = min(n_ms, first_notice.get(mid, n_ms))
    for v in lacked.values():
        v.sort()
    lines: list[str] = []
    for mid, count in sorted(held.items(), key=lambda kv: -kv[1])[:top]:
        s0 = sent.get(mid)
        if s0 is None:
            continue
        got = lacked.get(mid, [])
        dues = sorted(first_due.get(mid, ()))
        lines.append(
            f"line {mid[:8]} by {author[mid]} at +{(s0 - min(sent.values())) / 1000:.0f} s: "
            f"held {count} late pairs; {len(got)} members found it missing (first "
            f"+{(first_notice.get(mid, s0) - s0) / 1000:.2f} s); their first requests due after "
            f"{dues[0] / 1000 if dues else float('nan'):.2f} s at the earliest, "
            f"{sum(d < 5_000 for d in dues)} within 5 s")
        for t_ms, what, node in sorted(rounds.get(mid, ())):
            lacking = len(got) - bisect.bisect_right(got, t_ms)
            lines.append(f"  +{(t_ms - s0) / 1000:7.2f} s {what:8s} {node:8s} "
                         f"still lacking {lacking}")
    delays = []
    for mid in lacked:
        asks = [x for x, what, _ in rounds.get(mid, ()) if what == "request"]
        if asks:
            delays.append((min(asks) - first_notice[mid]) / 1000)
    # per lacked line: requests and answers, and the requests that went out before the
    # line's first answer (crossing the first request instead of hearing its answer)
    reqs = answers = early = 0
    for mid in lacked:
        r = rounds.get(mid, ())
        asks = sorted(x for x, what, _ in r if what == "request")
        ans = sorted(x for x, what, _ in r if what == "answer")
        reqs, answers = reqs + len(asks), answers + len(ans)
        if asks:
            early += sum(1 for x in asks[1:] if not ans or x < ans[0])
    if lacked:
        k = len(lacked)
        lines.append(f"{k} lacked lines: requests {reqs} ({reqs / k:.2f} a line), of which "
                     f"{early} ({early / k:.2f} a line) after the first and before the "
                     f"first answer; answers {answers} ({answers / k:.2f} a line)")
    delays.sort()
    if delays:
        q = lambda f: delays[min(len(delays) - 1, int(f * len(delays)))]  # noqa: E731
        lines.append(f"first-request delay after the first notice, {len(delays)} lacked "
                     f"lines: p50 {q(0.5):.2f} s, p90 {q(0.9):.2f} s, max {delays[-1]:.2f} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000])
    ap.add_argument("--messages", type=int, default=40)
    ap.add_argument("--loss", type=float, default=0.1)
    ap.add_argument("--rate", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--bandwidth", type=float, nargs="*", default=[1.0, 20.0])
    ap.add_argument("--profiles", nargs="+", default=["before", "default"])
    ap.add_argument("--protocol", default="{}", help="extra sds.Config changes (JSON) for "
                    "'default', e.g. a candidate fix")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--timeline", type=int, default=0, metavar="K",
                    help="also print the repair rounds of the K lines that held back the "
                    "most late pairs")
    o = ap.parse_args(argv)
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load",
          " ".join(f"{x:.2f}" for x in __import__("os").getloadavg()), describe(calibrate()))
    extra = json.loads(o.protocol)
    with tempfile.TemporaryDirectory(prefix="p99-") as tmp:
        for n in o.sizes:
            for prof in o.profiles:
                spec: dict[str, Any] = {
                    "participants": n, "messages": o.messages, "loss": o.loss,
                    "seed": o.seed, "rate": o.rate, "timings": "default",
                    "bandwidth_mbps": o.bandwidth,
                }
                changes = profile_changes(prof)  # before, round2, prev, or JSON
                if changes is not None:
                    spec["protocol"] = changes
                if prof == "default" and extra:
                    spec["protocol"] = extra
                out = Path(tmp) / f"{n}-{len(str(prof))}-{abs(hash(prof))}"
                code = _CHILD.format(root=str(ROOT), spec=json.dumps(spec), out=str(out))
                proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                      text=True, timeout=o.timeout, check=False)
                if proc.returncode != 0:
                    print(n, prof, "failed:", proc.stderr.strip().splitlines()[-1:])
                    continue
                meta = json.loads(proc.stdout.strip().splitlines()[-1])
                print(json.dumps({"n": n, "profile": prof, **meta, **breakdown(out)}),
                      flush=True)
                if o.timeline:
                    for line in timeline(out, o.timeline):
                        print(f"  [{prof}] {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
