"""Where the SDS-R rebroadcasts of a ``sdschat sim`` run come from, per message.

Reads ``OUT/events`` of a run and classifies every rebroadcast (``RepairSent``) of a
message by who sent it (the author or another holder) and when, relative to the
previous rebroadcast of the same message:

* ``first``: the first rebroadcast of the message;
* ``within 150 ms``: came within one network latency of the previous copy (the two
  holders could not have heard each other: a collision);
* ``later, new request``: a request for the message was sent since the previous
  rebroadcast (a new repair round);
* ``later, no request``: no request since the previous copy: a holder that scheduled
  its answer for an earlier request and did not receive any copy since (the copy
  that would have cancelled its answer was lost to it).

Also: request entries per message, the histogram of rebroadcasts per message, and
the collisions per 10 s of run time::

    .venv/bin/python -m app.cli sim -n 1000 -m 200 --loss 0.05 --seed 0 --out runs/r1000
    .venv/bin/python bench/sim_repairs.py runs/r1000
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from typing import Any

WITHIN_MS = 150


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", help="the --out directory of a sdschat sim run")
    args = ap.parse_args()
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(f"{args.run}/events",
                      columns=["node_id", "time_ms", "kind", "message_id", "detail"])

    def rows(kind: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = t.filter(pc.equal(t.column("kind"), kind)).to_pylist()
        return out

    sent = rows("MessageSent")
    author = {r["message_id"]: r["node_id"] for r in sent}
    start = min((r["time_ms"] for r in sent), default=0)
    reps = sorted(rows("RepairSent"), key=lambda r: r["time_ms"])
    requests: dict[str, list[int]] = collections.defaultdict(list)
    for r in rows("RepairRequested"):
        for m in json.loads(r["detail"])["message_ids"]:
            requests[m].append(r["time_ms"])
    by_message: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in reps:
        by_message[r["message_id"]].append(r)
    kinds: collections.Counter[tuple[str, str]] = collections.Counter()
    collisions: collections.Counter[int] = collections.Counter()
    for m, rs in by_message.items():
        prev: int | None = None
        for r in rs:
            now = r["time_ms"]
            who = "author" if r["node_id"] == author.get(m) else "other holder"
            if prev is None:
                what = "first"
            elif now - prev < WITHIN_MS:
                what = f"within {WITHIN_MS} ms of the previous copy"
                collisions[(now - start) // 10_000 * 10] += 1
            elif any(prev < x <= now for x in requests[m]):
                what = "later, a new request since the previous copy"
            else:
                what = "later, no request since the previous copy"
            kinds[(who, what)] += 1
            prev = now
    n_req = sum(len(v) for v in requests.values())
    print(f"{len(sent)} content messages, {len(reps)} rebroadcasts of {len(by_message)} "
          f"messages ({len(reps) / max(1, len(by_message)):.2f} each), {n_req} request "
          f"entries for {len(requests)} messages")
    for (who, what), v in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"{v:8,}  {who:12}  {what}")
    hist = collections.Counter(len(v) for v in by_message.values())
    print("rebroadcasts per message: " + ", ".join(f"{k}: {v}" for k, v in sorted(hist.items())))
    print("collisions per 10 s of run time: "
          + ", ".join(f"{k}-{k + 10} s: {v}" for k, v in sorted(collisions.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
