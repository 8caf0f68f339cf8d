"""What one crafted message costs an honest node: syncs, repair requests, events.

Issue 14 section 3: a message whose causal history names thousands of unknown ids
made every node send one sync per three due repair requests (~3,400 syncs in
20 s with ``--fast``) and report every id lost one event at a time (20,001
events for a 30,000-id history). This benchmark feeds such messages to one SDS
core in virtual time (no network, no clock: the figures are counts, not
timings, and do not depend on the machine) and counts what the core emits:

* ``syncs``: sync messages it broadcasts;
* ``requests``: repair requests they carry;
* ``events``: events it reports (``lost``: of them ``MessageLost``);
* ``first_s``: the same within the first second after the message.

Each scenario runs against the current ``sds`` and against a baseline revision
(``--baseline``, default ``main``; extracted with ``git archive`` into a temporary
directory and imported in a subprocess), side by side in one run::

    .venv/bin/python bench/repair_storm.py [--baseline main] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_700_000_000_000

#: (name, ids named, timings, virtual seconds run)
SCENARIOS = [
    ("3300-fast", 3_300, "fast", 30),
    ("30000-fast", 30_000, "fast", 30),
    ("1000-fast", 1_000, "fast", 30),
    ("3300-default", 3_300, "default", 400),
    ("30000-default", 30_000, "default", 400),
    ("1000-default", 1_000, "default", 400),
]


def run_scenario(n_ids: int, timings: str, seconds: int) -> dict[str, int]:
    """One honest node with a short log receives one message naming ``n_ids``
    unknown ids, then runs its timers for ``seconds`` of virtual time."""
    import random

    import sds

    cfg = sds.Config.fast(1_000) if timings == "fast" else sds.Config()
    ch = sds.Channel("chan", "honest", cfg, NOW, random.Random(1))
    for i in range(5):  # an ordinary conversation so far
        other = sds.Message("peer", f"ok{i}", "chan", NOW - 1_000 + i, (), None, b"hi")
        ch.receive(sds.encode(other), NOW)
    ch.events()
    ch.datagrams_to_send()
    hist = tuple(
        sds.HistoryEntry(f"{i:064x}", None, "ghost") for i in range(n_ids)
    )
    bomb = sds.Message("hostile", "b" * 64, "chan", NOW, hist, None, b"boom")
    ch.receive(sds.encode(bomb), NOW)
    counts = {"syncs": 0, "requests": 0, "events": 0, "lost": 0,
              "syncs_first_s": 0, "events_first_s": 0}

    def drain(t: int) -> None:
        evs = ch.events()
        grams = ch.datagrams_to_send()
        syncs = [g for g in grams if g.kind == "sync"]
        counts["syncs"] += len(syncs)
        counts["requests"] += sum(len(sds.decode(g.data).repair_request) for g in syncs)
        counts["events"] += len(evs)
        counts["lost"] += sum(type(e).__name__ == "MessageLost" for e in evs)
        if t < NOW + 1_000:
            counts["syncs_first_s"] += len(syncs)
            counts["events_first_s"] += len(evs)

    drain(NOW)
    end = NOW + seconds * 1_000
    for _ in range(1_000_000):
        t = ch.get_timer()
        if t is None or t > end:
            break
        ch.handle_timer(t)
        drain(t)
    return counts


def _child(path: str) -> None:
    sys.path.insert(0, path)
    out = {name: run_scenario(n, timings, secs) for name, n, timings, secs in SCENARIOS}
    print(json.dumps(out))


def _measure(path: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(path))
    code = (
        f"import sys; sys.path.insert(0, {str(path)!r}); "
        f"from bench.repair_storm import _child; _child({str(path)!r})"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=path, env=env, capture_output=True, text=True,
        timeout=1_800, check=True,
    )
    result: dict[str, Any] = json.loads(res.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="storm-base-") as tmp:
        base = Path(tmp)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline, "sds"],
            capture_output=True, check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        (base / "bench").mkdir()
        (base / "bench" / "__init__.py").write_text("")
        (base / "bench" / "repair_storm.py").write_text(Path(__file__).read_text())
        before = _measure(base)
    after = _measure(ROOT)
    if args.json:
        print(json.dumps({"baseline": args.baseline, "before": before, "after": after}))
        return 0
    from machine import describe  # bench/machine.py (run as bench/repair_storm.py)

    print(f"one crafted message, one honest node; baseline {args.baseline} vs this tree")
    print(describe())
    cols = ("syncs", "requests", "events", "lost", "syncs_first_s", "events_first_s")
    print(f"{'scenario':<15}" + "".join(f"{c:>22}" for c in cols))
    for name, *_ in SCENARIOS:
        row = "".join(f"{before[name][c]:>12,} ->{after[name][c]:>7,}" for c in cols)
        print(f"{name:<15}{row}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
