"""What a person's extra devices cost the channel (issue 40 §5), in the simulator.

A device is an SDS sender of its own (its own key, sender id, Lamport clock, bloom
filter and syncs); the channel's protocol does not know persons. So a channel of
``P`` persons of which some have several devices is, to SDS, a channel of one
participant per device, and the simulator (``app.sim.simulation.run_sim``, which
imports nothing of ``app/members``) measures it as such: the persons' lines are sent
by their devices (the sender of each line drawn uniformly among all devices).

Two shapes, each beside its one-device reference in the same invocation:

* ``--small`` (default 10 persons): one person with 1, 2 and 3 devices, everyone else
  with one (``--seeds`` seeds each, 5 by default: at 5% loss the repairs vary a lot
  from seed to seed);
* ``--large`` (default 1,000 persons): every person with 1 and with 2 devices
  (``--large-seeds``, 2).

Per run: bytes put on the wire per content line (every kind: content, syncs,
repairs, carried copies), what one device downloads per content line and per busy
second, what a **person** downloads (its devices together), the members holding every
line at the end and the delivery p50 / p99 (virtual ms, from the deliveries). The
question the issue asks: extra devices add SDS senders; they must not multiply every
member's traffic::

    .venv/bin/python bench/devices_cost.py                 # 10 persons, 1,000 persons
    .venv/bin/python bench/devices_cost.py --large 0 --seeds 9 --json

Deterministic: the same seeds give the same figures on any machine (virtual time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.sim.simulation import SimSpec, run_sim  # noqa: E402


def measure(participants: int, messages: int, loss: float, seed: int) -> dict[str, Any]:
    """One simulated run: its traffic per content line and per device."""
    spec = SimSpec(participants=participants, messages=messages, loss=loss, seed=seed,
                   timings="default", sender_id_chars=32)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="sdschat-devices-") as tmp:
        result = run_sim(spec, Path(tmp) / "run", force=True)
        meta = result.meta
        lat = _latencies(result.files)
    kinds = meta["traffic"]["by_kind"]
    sent = sum(v["bytes_sent"] for v in kinds.values()) + meta["traffic"]["carried"]["bytes_sent"]
    received = sum(v["bytes_received"] for v in kinds.values())
    busy = meta["traffic"]["phases"].get("busy", {})
    return {
        "participants": participants,
        "seed": seed,
        "wire_bytes_per_line": round(sent / messages),
        "device_down_bytes_per_line": round(received / participants / messages),
        "device_down_bytes_per_s_busy": busy.get("member_down_bytes_per_s"),
        "holding_every_line": meta["participants_holding_every_message"],
        "delivery_p50_ms": lat[0],
        "delivery_p99_ms": lat[1],
    }


def _latencies(files: list[Path]) -> tuple[float | None, float | None]:
    """Delivery latency p50 / p99 in virtual ms: delivered at minus sent at, per pair."""
    import pyarrow.parquet as pq

    sent: dict[str, int] = {}
    delivered: list[tuple[str, int]] = []
    for f in files:
        t = pq.read_table(f, columns=["kind", "message_id", "time_ms"]).to_pydict()
        for kind, mid, ts in zip(t["kind"], t["message_id"], t["time_ms"], strict=True):
            if kind == "MessageSent" and mid is not None:
                sent[mid] = ts
            elif kind == "MessageDelivered" and mid is not None:
                delivered.append((mid, ts))
    lat = sorted(ts - sent[mid] for mid, ts in delivered if mid in sent)
    if not lat:
        return None, None
    return float(lat[len(lat) // 2]), float(lat[min(len(lat) - 1, int(len(lat) * 0.99))])


def small(persons: int, messages: int, loss: float, seeds: int) -> list[dict[str, Any]]:
    rows = []
    for devices in (1, 2, 3):
        runs = [measure(persons - 1 + devices, messages, loss, s) for s in range(seeds)]
        rows.append(_row(f"{persons} persons, one with {devices} device(s)", devices, runs,
                         person_devices=devices))  # fmt: skip
    return rows


def large(persons: int, messages: int, loss: float, seeds: int) -> list[dict[str, Any]]:
    rows = []
    for devices in (1, 2):
        runs = [measure(persons * devices, messages, loss, s) for s in range(seeds)]
        rows.append(_row(f"{persons:,} persons x {devices} device(s)", devices, runs,
                         person_devices=devices))  # fmt: skip
    return rows


def _row(label: str, devices: int, runs: list[dict[str, Any]], person_devices: int
         ) -> dict[str, Any]:  # fmt: skip
    def med(key: str) -> float | None:
        vals = [r[key] for r in runs if r[key] is not None]
        return statistics.median(vals) if vals else None

    down = med("device_down_bytes_per_line")
    return {
        "shape": label,
        "devices": devices,
        "participants": runs[0]["participants"],
        "wire_bytes_per_line": med("wire_bytes_per_line"),
        "device_down_bytes_per_line": down,
        "person_down_bytes_per_line": down * person_devices if down is not None else None,
        "device_down_bytes_per_s_busy": med("device_down_bytes_per_s_busy"),
        "holding_every_line": [f"{r['holding_every_line']}/{r['participants']}" for r in runs],
        "delivery_p50_ms": med("delivery_p50_ms"),
        "delivery_p99_ms": med("delivery_p99_ms"),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=10, help="persons of the small channel (0: skip)")
    ap.add_argument("--large", type=int, default=1000, help="persons of the large one (0: skip)")
    ap.add_argument("--messages", type=int, default=200, help="lines in the small channel")
    ap.add_argument("--large-messages", type=int, default=40, help="lines in the large one")
    ap.add_argument("--loss", type=float, default=0.05)
    ap.add_argument("--seeds", type=int, default=5, help="seeds of the small shape (medians)")
    ap.add_argument("--large-seeds", type=int, default=2, help="seeds of the large shape")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.small < 0 or args.large < 0 or args.seeds < 1 or args.large_seeds < 1:
        ap.error("--small and --large must be >= 0, --seeds and --large-seeds >= 1")
    if 0 < args.small < 2:
        ap.error("--small needs at least 2 persons")
    rows: list[dict[str, Any]] = []
    if args.small:
        rows += small(args.small, args.messages, args.loss, args.seeds)
    if args.large:
        rows += large(args.large, args.large_messages, args.loss, args.large_seeds)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        "shape | SDS participants | wire B per line | a device downloads per line | "
        "the person downloads per line | a device, busy B/s down | holding every line | "
        "delivery p50 / p99 (virtual ms)"
    )
    for r in rows:
        print(
            f"{r['shape']} | {r['participants']:,} | {r['wire_bytes_per_line']:,.0f} | "
            f"{r['device_down_bytes_per_line']:,.0f} | {r['person_down_bytes_per_line']:,.0f} | "
            f"{r['device_down_bytes_per_s_busy']:,.0f} | {', '.join(r['holding_every_line'])} | "
            f"{r['delivery_p50_ms']:,.0f} / {r['delivery_p99_ms']:,.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
