"""Sync and repair traffic at scale, side by side: today's default, the behaviour
before issue 28, and js-waku's profile, in one invocation, same seeds.

Each cell is ``sdschat sim`` (:func:`app.sim.simulation.run_sim`) in its own process (peak
RSS is per process), with these protocol columns:

* ``default``: ``sds.Config()`` as shipped;
* ``before``: the default sizes with issue 28's changes turned off (every due sync
  sent, the sim's ``N²/64`` sync interval, every member re-naming);
* ``round2``: the default with the second round's changes turned off (:data:`ROUND2`);
* ``prev``: the default with the third round's repair rules turned off (:data:`PREV`);
* ``nocarry``: the default without carrying (``carry_copies = 0``, :data:`NOCARRY`);
* ``waku``: ``sds.Config.waku()`` (js-waku's sizes and fixed windows, the sim's
  ``N²/64`` interval as before);
* ``ref=DIR``: the default of another checkout (``git worktree add --detach DIR
  COMMIT``), the same spec, to compare an older commit side by side.

With several ``--seed`` values the cells run seed by seed, every profile of a seed
in a row.

Per cell: bytes uploaded per content message (everything participants send,
divided by the content messages: docs/profiles.md's bytes/msg; and by kind),
deliveries per content delivery, broadcasts by kind (sync, repair), repair requests,
participants holding every message, messages declared lost, delivery p50/p99, the
acknowledgement p50/p99 (the author's first ``MessageAcknowledged`` of each line) and that
of the last line sent, wall time, peak RSS::

    .venv/bin/python bench/sim_sync_repair.py --sizes 1000 --messages 40 --loss 0.1 \\
        --rate 1 --timings default --bandwidth 1,20 --seed 3
    .venv/bin/python bench/sim_sync_repair.py --sizes 10000 --messages 200 --loss 0.05 \\
        --profiles default --store
    .venv/bin/python bench/sim_sync_repair.py --sizes 100 --seed 1 2 3 4 5 \\
        --profiles ref=/tmp/old default
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

#: The sds.Config changes that give the behaviour before issue 28.
BEFORE: dict[str, Any] = {
    "sync_suppression": False,
    "sync_interval_participants": None,
}

#: The sds.Config changes that give issue 28's first round (suppression, the census
#: interval, store-first repair) without the second's: naming syncs that wait while
#: content flows, ids asked for by others noted as missing, follow-up requests within
#: the base window, lacked ids named again only in runs.
ROUND2: dict[str, Any] = {
    "sync_defer_naming": False,
    "repair_note_asked": False,
    "repair_follow_up_base_window": False,
    "sync_rename_sparingly": False,
}

#: The sds.Config changes that turn off the third round's repair rules (issue 28,
#: the channel without a store): holders' answers dropped after a silence, more than
#: one copy of an answer while someone likely still lacks the line, first requests
#: spread over the members expected to lack the line and within a few base windows.
PREV: dict[str, Any] = {
    "repair_answer_expiry": False,
    "repair_answer_copies": 1,
    "repair_first_request_capped": False,
}

#: The sds.Config changes that turn carrying off (recent messages riding on later
#: content messages, sds.Config.carry_copies).
NOCARRY: dict[str, Any] = {"carry_copies": 0}


def profile_changes(profile: str) -> dict[str, Any] | None:
    """The ``protocol`` changes of a named profile (``None``: the default's own)."""
    if profile == "before":
        return dict(BEFORE)
    if profile == "round2":
        return dict(ROUND2)
    if profile == "prev":
        return dict(PREV)
    if profile == "nocarry":
        return dict(NOCARRY)
    if profile.startswith("{"):
        changes: dict[str, Any] = json.loads(profile)  # a candidate: sds.Config changes
        return changes
    return None

_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from app.sim.simulation import SimSpec, run_sim
spec = SimSpec(**json.loads({spec!r}))
r = run_sim(spec, {out!r}, force=True)
m = r.meta
import pyarrow.compute as pc, pyarrow.parquet as pq
t = pq.read_table({out!r} + "/events", columns=["node_id", "kind", "message_id", "time_ms"])
kinds = {{k["values"]: k["counts"] for k in pc.value_counts(t.column("kind")).to_pylist()}}
sent = t.filter(pc.equal(t.column("kind"), "MessageSent"))
when = dict(zip(sent.column("message_id").to_pylist(), sent.column("time_ms").to_pylist()))
author = dict(zip(sent.column("message_id").to_pylist(), sent.column("node_id").to_pylist()))
ak = t.filter(pc.equal(t.column("kind"), "MessageAcknowledged"))
acked = {{}}
for node, i, x in zip(ak.column("node_id").to_pylist(), ak.column("message_id").to_pylist(),
                      ak.column("time_ms").to_pylist()):
    if author.get(i) == node and i not in acked:
        acked[i] = x - when[i]
ack = sorted(acked.values())
last = max(when, key=lambda i: (when[i], i)) if when else None
apct = lambda q: ack[min(len(ack) - 1, int(q * len(ack)))] if ack else None
dl = t.filter(pc.equal(t.column("kind"), "MessageDelivered"))
lat = sorted(x - when[i] for i, x in zip(dl.column("message_id").to_pylist(),
             dl.column("time_ms").to_pylist()) if i in when)
pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None
rep = t.filter(pc.equal(t.column("kind"), "RepairSent")).column("message_id")
lost = t.filter(pc.equal(t.column("kind"), "MessageLost")).column("message_id")
out = {{k: m[k] for k in ("network", "traffic", "wall_seconds", "cpu_seconds", "peak_rss_mb",
      "participants_holding_every_message", "messages_sent")}}
req = t.filter(pc.equal(t.column("kind"), "RepairRequested"))
out.update(kinds=kinds, p50=pct(0.5), p99=pct(0.99), acked=len(ack), ack_p50=apct(0.5),
           ack_p99=apct(0.99), last_ack=acked.get(last),
           repaired_messages=len(pc.unique(rep)), lost_messages=len(pc.unique(lost)))
print(json.dumps(out))
"""


def cell_spec(args: argparse.Namespace, n: int, profile: str, seed: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "participants": n, "messages": args.messages, "loss": args.loss, "seed": seed,
        "rate": args.rate, "timings": args.timings, "store": args.store,
        "bandwidth_mbps": args.bandwidth,
        "profile": "waku" if profile == "waku" else "default",
    }
    if args.drain is not None:
        spec["drain_ms"] = int(args.drain * 1000)
    changes = profile_changes(profile)
    if changes is not None:
        spec["protocol"] = changes
    return spec


def run_cell(args: argparse.Namespace, n: int, profile: str, tmp: Path,
             seed: int) -> dict[str, Any]:
    out = tmp / f"{abs(hash(profile))}-{n}-{seed}"
    root, spec = ROOT, cell_spec(args, n, profile, seed)
    if profile.startswith("ref="):  # the default of another checkout, same spec
        root = Path(profile[4:]).resolve()
        spec.pop("protocol", None)
    code = _CHILD.format(root=str(root), spec=json.dumps(spec), out=str(out))
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"profile": profile, "n": n, "seed": seed,
                "error": f"timeout after {args.timeout} s"}
    if proc.returncode != 0:
        return {"profile": profile, "n": n, "seed": seed,
                "error": proc.stderr.strip().splitlines()[-1:]}
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    kinds = r["traffic"]["by_kind"]
    content = kinds["content"]["deliveries"] or 1
    m = r["messages_sent"] or 1
    return {
        "profile": profile, "n": n, "seed": seed,
        "bytes_per_message": round(sum(v["bytes_sent"] for v in kinds.values()) / m),
        "deliveries_per_content_delivery": round(
            sum(v["deliveries"] for v in kinds.values()) / content, 2),
        "syncs": kinds["sync"]["broadcasts"],
        "repairs": kinds["repair"]["broadcasts"],
        "requests": r["kinds"].get("RepairRequested", 0),
        "bytes_by_kind": {k: v["bytes_sent"] for k, v in kinds.items()},
        "repairs_per_repaired_message": round(
            kinds["repair"]["broadcasts"] / max(1, r["repaired_messages"]), 2),
        "resends": kinds["resend"]["broadcasts"],
        "carried": r["traffic"].get("carried"),
        "store_retrievals": r["network"].get("store_retrievals", 0),
        "holding_every_message": r["participants_holding_every_message"],
        "lost_messages": r["lost_messages"],
        "p50_ms": r["p50"], "p99_ms": r["p99"],
        "acked": r["acked"], "ack_p50_ms": r["ack_p50"], "ack_p99_ms": r["ack_p99"],
        "last_line_ack_ms": r["last_ack"],
        "phases": r["traffic"]["phases"],
        "wall_s": r["wall_seconds"], "cpu_s": r["cpu_seconds"], "peak_rss_mb": r["peak_rss_mb"],
        "elapsed_s": round(time.monotonic() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000])
    p.add_argument("--profiles", nargs="+", default=["before", "default", "waku"],
                   help="before, round2, prev, nocarry, default, waku, ref=DIR (the default "
                   "of another checkout, e.g. a `git worktree add --detach` of an older commit, "
                   "run "
                   "beside ours), or a JSON dict of sds.Config changes to the default")
    p.add_argument("--messages", type=int, default=40)
    p.add_argument("--loss", type=float, default=0.1)
    p.add_argument("--rate", type=float, default=1.0)
    p.add_argument("--seed", type=int, nargs="+", default=[3],
                   help="one or more seeds; cells run interleaved, seed by seed")
    p.add_argument("--timings", choices=("fast", "default"), default="default")
    p.add_argument("--bandwidth", default="1,20",
                   help="Mbit/s per participant, cycled (empty: unlimited)")
    p.add_argument("--store", action="store_true")
    p.add_argument("--drain", type=float, default=None, help="seconds (default: the sim's)")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--json", default=None, help="also write the rows here")
    args = p.parse_args(argv)
    args.bandwidth = [float(x) for x in args.bandwidth.split(",") if x.strip()]
    for prof in args.profiles:
        if prof.startswith("ref=") and not (Path(prof[4:]) / "sds").is_dir():
            p.error(f"{prof}: no checkout there (no sds/ directory)")
    sys.path.insert(0, str(ROOT))
    import os

    from machine import calibrate, describe

    load = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {describe(calibrate())}", flush=True)
    print(json.dumps({"args": vars(args)}), flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="sim-sync-repair-") as tmp:
        for n in args.sizes:
            for seed in args.seed:
                for profile in args.profiles:
                    row = run_cell(args, n, profile, Path(tmp), seed)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
