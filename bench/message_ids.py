"""Micro-benchmark: what checking message ids (``sds.ids``) costs the core's receive path.

Run ``.venv/bin/python bench/message_ids.py``. For each content size, one sender
core makes 300 content messages with default settings (200-entry causal history,
18.75 KB bloom filter once the log is full); fresh receiver cores take them all
with ``verify_message_ids`` off (A) and on (B), alternated A/B/A/B in one run
(the machine drifts). Prints the median µs per received message of each, the
difference, and ``id_form`` alone.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from machine import describe

import sds

N = 300


def _messages(size: int) -> list[bytes]:
    ch = sds.Channel("bench", "s" * 32, sds.Config(), 1_000, random.Random(1))
    rng = random.Random(size)
    return [ch.send(rng.randbytes(size), 1_000 + i) for i in range(N)]


def _receive_all(msgs: list[bytes], verify: bool) -> float:
    cfg = sds.Config(verify_message_ids=verify)
    ch = sds.Channel("bench", "r" * 32, cfg, 1_000, random.Random(2))
    start = time.perf_counter_ns()
    for m in msgs:
        ch.receive(m, 2_000)
        ch.events()
    return (time.perf_counter_ns() - start) / len(msgs) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "|", describe())
    for size in (100, 4_096, 65_536):
        msgs = _messages(size)
        off, on = [], []
        for _ in range(args.repeats):  # alternated
            off.append(_receive_all(msgs, False))
            on.append(_receive_all(msgs, True))
        decoded = [sds.decode(m) for m in msgs]
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter_ns()
            for d in decoded:
                sds.id_form(d.message_id, "bench", d.sender_id, d.lamport_timestamp or 0,
                            d.content or b"")  # fmt: skip
            runs.append((time.perf_counter_ns() - start) / len(decoded) / 1000)
        a, b = statistics.median(off), statistics.median(on)
        print(
            f"content {size:>6} B: receive off {a:7.1f} µs  on {b:7.1f} µs  "
            f"(+{b - a:5.1f} µs, {100 * (b - a) / a:+.1f}%)  id_form alone "
            f"{statistics.median(runs):5.1f} µs"
        )


if __name__ == "__main__":
    main()
