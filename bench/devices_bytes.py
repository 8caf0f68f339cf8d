"""Bytes on the wire for a person with 1, 2 and 3 devices in a 10-member channel
(issue 40 §5: devices add SDS senders; they must not multiply every member's traffic).

Usage::

    .venv/bin/python bench/devices_bytes.py [--members 10] [--lines 10] [--devices 1,2,3]

For each device count D, a fresh set of real processes over loopback
(``tests/procs.py``: every one killed by PID at the end): a relay, ``--members``
persons' headless nodes in one passphrase channel, bob with D devices (D-1 linked with
``/link`` and ``sdschat join --link CODE``), and a relay tap on the channel's topic
recording every envelope once, as the relay carries it. A warm-up first (every person
types one line and every node delivers them all), then two windows:

* **link**: from the first ``/link`` until the channel carried one device log per
  new device (the hand-over itself goes device to device);
* **lines**: each person types ``--lines`` lines, one a second each (bob's round robin
  over his devices), until every device has delivered every line typed elsewhere.

Each envelope is opened with the channel key and counted as a line (sdschat's JSON line
content), a device log (content ``FF 'S' 'D' 01``), other content, a sync or an
ephemeral message.
Printed per D: envelopes and bytes by kind, bytes per line typed, and what one member
downloads per line (every envelope but its own). Waits are bounded; the figures and
their date are in docs/benchmarks.md ("Devices on the wire").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe

from app.members.devices import DEVICE_LOG_MAGIC
from net.channel_key import ChannelKey, derive_channel_key
from net.envelope import EnvelopeError, open_for_topic
from sds.message import MessageKind, decode
from tests.procs import Cluster, Proc, Tap, running, sdschat, tap

PASS = "bench passphrase"
NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan",
         "judy", "ken", "lena", "mike", "nina", "olga", "pete"]  # fmt: skip


def kind_of(envelope: bytes, key: ChannelKey) -> str:
    """``line``, ``device_log``, ``content``, ``sync``, ``ephemeral`` or ``unopened``."""
    try:
        msg = decode(open_for_topic(envelope, lambda _t: key).sds_bytes)
    except (EnvelopeError, ValueError):
        return "unopened"
    kind = msg.kind
    if kind is MessageKind.SYNC:
        return "sync"
    if kind is MessageKind.EPHEMERAL:
        return "ephemeral"
    content = msg.content or b""
    if content.startswith(DEVICE_LOG_MAGIC):
        return "device_log"
    return "line" if content.startswith(b"{") else "content"  # sdschat's JSON lines


def logs_seen(t: Tap, mark: int, key: ChannelKey, want: int, limit: float) -> None:
    """Until the tap carried ``want`` device-log envelopes since ``mark`` (bounded;
    each envelope is opened once)."""
    deadline = time.monotonic() + limit
    seen = Counter[str]()
    while time.monotonic() < deadline:  # bounded
        new = t.since(mark)
        mark += len(new)
        seen.update(kind_of(e, key) for e in new)
        if seen["device_log"] >= want:
            return
        time.sleep(0.2)
    raise SystemExit(f"{want} device logs not on the wire within {limit} s: {dict(seen)}")


@dataclass
class Result:
    devices: int
    typed: int
    devices_total: int
    windows: dict[str, tuple[Counter[str], Counter[str]]]
    """``link`` / ``lines``: envelopes and bytes by kind."""
    seconds: dict[str, float]


def events_more(p: Proc, event: str, than: int = 0, **match: str) -> Callable[[], bool]:
    """Whether ``p`` printed more than ``than`` ``event`` events matching ``match``."""
    return lambda: len(p.select(event, **match)) > than


def has_all(p: Proc, texts: set[str]) -> Callable[[], bool]:
    """Whether ``p`` delivered every line of ``texts``."""
    return lambda: texts <= {str(e.get("text")) for e in p.select("delivered")}


def one(devices: int, members: int, lines: int, tmp: Path) -> Result:
    pf = tmp / "pass"
    pf.write_text(PASS + "\n")
    key = derive_channel_key("room", PASS.encode())
    extra = ["--passphrase-file", str(pf)]
    with running(Cluster(tmp)) as c:
        _relay, url = c.relay()
        with tap(url, key.topic) as t:
            people = [c.headless(n, tmp / n, relay=url, extra=extra) for n in NAMES[:members]]
            for p in people:
                p.wait_for(events_more(p, "connection", state="connected"), 60,
                           f"{p.name} connected")  # fmt: skip
            # warm-up: everyone has everyone's first line (the joins' own traffic and
            # the first, small filters stay out of both windows)
            for n, p in enumerate(people):
                p.send(f"hello from {NAMES[n]}")
            hellos = {f"hello from {n}" for n in NAMES[:members]}
            for n, p in enumerate(people):
                p.wait_for(has_all(p, hellos - {f"hello from {NAMES[n]}"}), 120,
                           f"{p.name}: the hellos")  # fmt: skip
            bob = people[1]
            mark0, t0 = t.count(), time.monotonic()
            bobs = [bob]
            for i in range(1, devices):  # bounded
                before = len(bob.select("link", state="offered"))
                bob.send("/link")
                bob.wait_for(events_more(bob, "link", before, state="offered"), 30, "a code")
                code = bob.select("link", state="offered")[-1]["code"]
                dev = c.start(sdschat("join", "--link", code, "--data-dir", str(tmp / f"bob{i}"),
                                      "--relay", url, "--device-name", f"laptop{i}",
                                      "--headless", "--fast"), f"bob{i}")  # fmt: skip
                dev.wait_for(events_more(dev, "link", state="linked"), 60, "linked")
                dev.wait_for(events_more(dev, "connection", state="connected"), 60,
                             "the new device connected")  # fmt: skip
                bobs.append(dev)
            logs_seen(t, mark0, key, devices - 1, 60)
            mark1, t1 = t.count(), time.monotonic()
            typed: dict[str, Proc] = {}  # text -> the device that typed it
            for r in range(lines):  # bounded: lines x members sends
                for n, p in enumerate(people):
                    dev = bobs[r % len(bobs)] if p is bob else p
                    text = f"L {NAMES[n]} {r}"
                    dev.send(text)
                    typed[text] = dev
                time.sleep(1.0)
            everyone = [*people, *bobs[1:]]
            for d in everyone:
                want = {text for text, by in typed.items() if by is not d}
                d.wait_for(has_all(d, want), 180, f"{d.name}: every line")
            captured, t2 = t.since(0), time.monotonic()
    windows = {"link": (Counter[str](), Counter[str]()), "lines": (Counter[str](), Counter[str]())}
    for i, env in enumerate(captured):
        if i < mark0:
            continue
        count, size = windows["link" if i < mark1 else "lines"]
        k = kind_of(env, key)
        count[k] += 1
        size[k] += len(env)
    return Result(devices, len(typed), len(everyone), windows,
                  {"link": t1 - t0, "lines": t2 - t1})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--lines", type=int, default=10, help="lines per person")
    ap.add_argument("--devices", default="1,2,3", help="bob's device counts, comma-separated")
    args = ap.parse_args()
    counts = [int(x) for x in args.devices.split(",")]
    if not 2 <= args.members <= len(NAMES) or not 1 <= args.lines <= 100 or not all(
            1 <= d <= 4 for d in counts):  # fmt: skip
        ap.error(f"--members is 2..{len(NAMES)}, --lines 1..100, --devices each 1..4")
    print(f"started {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {describe()}")
    results = []
    for d in counts:  # bounded
        with tempfile.TemporaryDirectory() as tmp:
            results.append(one(d, args.members, args.lines, Path(tmp)))
        print(f"  bob with {d} device(s): done, load {os.getloadavg()[0]:.1f}", flush=True)
    kinds = ("line", "sync", "device_log", "content", "ephemeral", "unopened")
    for r in results:
        for window, (count, size) in r.windows.items():
            parts = ", ".join(f"{k} {count[k]} / {size[k] / 1024:.1f} KiB" for k in kinds
                              if count[k])  # fmt: skip
            print(f"D={r.devices} {window:<5} {r.seconds[window]:5.1f} s, envelopes "
                  f"{sum(count.values()):5d}, {sum(size.values()) / 1024:8.1f} KiB: {parts}; "
                  f"syncs {count['sync'] / max(r.seconds[window], 0.1):.1f}/s")  # fmt: skip
        count, size = r.windows["lines"]
        per_line = sum(size.values()) / r.typed
        # a device's node downloads every envelope but the ones it sent itself
        n = r.devices_total
        print(f"D={r.devices} per line typed: {per_line:7.0f} B on the wire, "
              f"{sum(count.values()) / r.typed:.2f} envelopes; per device downloaded "
              f"~{per_line * (n - 1) / n:7.0f} B ({n} devices)")  # fmt: skip
    print(f"load {os.getloadavg()[0]:.1f}; {describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
