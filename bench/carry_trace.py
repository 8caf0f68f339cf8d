"""``sdschat`` with ``sds.channel.carry_trace`` on: every ``Channel.to_carry`` decision
of the process appended as one JSON line to a file (a debug switch for
bench/real_vs_sim.py ``--carry-trace``, which starts the real nodes through it and
sets the same hook in its sims).

Usage::

    python bench/carry_trace.py TRACE.jsonl join CHANNEL ...   # as `sdschat join ...`

:func:`summarise_trace` reads such files (real nodes' or a sim's) into one summary:
decisions with something to carry (``k`` > 0) and without, the loss estimates and
participant counts the cores saw when they decided, and what became of the recent
messages they looked at (carried, older than the base window, enough copies seen).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]


def tracer(out: IO[str]) -> Callable[[dict[str, Any]], None]:
    """A ``carry_trace`` hook writing one JSON line per decision to ``out``."""

    def trace(decision: dict[str, Any]) -> None:
        out.write(json.dumps(decision) + "\n")
        out.flush()

    return trace


def _pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def summarise_trace(paths: Iterable[Path]) -> dict[str, Any]:
    """One summary of the decisions in the trace files ``paths``."""
    decisions = 0
    ks: Counter[int] = Counter()
    loss: list[float] = []
    lines: list[int] = []
    participants: list[int] = []
    fate: Counter[str] = Counter()
    age_carried: list[int] = []
    age_cut: list[int] = []
    copies_seen: Counter[int] = Counter()
    for path in paths:
        if not path.exists():
            continue
        for raw in path.read_text().splitlines():
            try:
                d = json.loads(raw)
            except ValueError:
                continue
            decisions += 1
            ks[int(d["k"])] += 1
            loss.append(float(d["loss"]))
            lines.append(int(d["loss_lines"]))
            participants.append(int(d["participants"]))
            for _mid, why, age, copies in d["candidates"]:
                fate[why] += 1
                if why == "carried":
                    age_carried.append(age)
                    copies_seen[copies] += 1
                elif why == "older_than_base_window":
                    age_cut.append(age)
    return {
        "decisions": decisions,
        "k": dict(sorted(ks.items())),
        "loss_p10_p50_p90": [_pct(loss, q) for q in (0.1, 0.5, 0.9)],
        "loss_lines_p50": _pct([float(x) for x in lines], 0.5),
        "participants_p10_p50_p90": [_pct([float(x) for x in participants], q)
                                     for q in (0.1, 0.5, 0.9)],
        "candidates": dict(fate),
        "carried_with_copies_seen": dict(sorted(copies_seen.items())),
        "carried_age_ms_p50_p90": [_pct([float(x) for x in age_carried], q)
                                   for q in (0.5, 0.9)],
        "cut_age_ms_p50": _pct([float(x) for x in age_cut], 0.5),
    }


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: carry_trace.py TRACE.jsonl SDSCHAT-ARGS...", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    import sds.channel
    from app.cli import main as cli_main

    with open(sys.argv[1], "a", encoding="utf-8") as out:
        sds.channel.carry_trace = tracer(out)
        return cli_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
