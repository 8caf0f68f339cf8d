"""Micro-benchmark: ``seal`` and ``open_envelope`` of realistic ~45 KB SDS messages.

Run ``.venv/bin/python bench/envelope_open.py``. The messages come from
:func:`bench.store_data.make_history` (real SDS cores, default settings: 200
history entries and the 18.75 KB bloom filter). Prints the median and minimum
µs per call over several repeats (each a pass over the 50 messages).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from store_data import make_history

from net.channel_key import KdfParams, derive_channel_key
from net.envelope import open_envelope, seal
from net.identity import Identity


def _per_call_us(
    fn: Callable[[bytes], object], items: list[bytes], repeats: int = 15
) -> tuple[float, float]:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for item in items:
            fn(item)
        runs.append((time.perf_counter_ns() - start) / len(items) / 1000)
    return statistics.median(runs), min(runs)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    key = derive_channel_key("bench", "secret", params=KdfParams(8, 1, 1))
    history = make_history(key, 260)
    envs = history.envelopes[-50:]  # full causal history
    ident = Identity.generate()
    sdss = [open_envelope(e, key).sds_bytes for e in envs]
    size = statistics.mean(len(e) for e in envs)
    print(f"{len(envs)} envelopes, mean {size / 1000:.1f} KB")
    med, low = _per_call_us(lambda e: open_envelope(e, key), envs)
    print(f"open_envelope:               median {med:6.1f} µs  min {low:6.1f} µs")
    med, low = _per_call_us(lambda s: seal(s, ident, key), sdss)
    print(f"seal:                        median {med:6.1f} µs  min {low:6.1f} µs")


if __name__ == "__main__":
    main()
