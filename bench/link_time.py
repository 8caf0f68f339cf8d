"""How long linking a device takes on loopback: the code typed -> the history readable
(issue 40 §5).

Usage::

    .venv/bin/python bench/link_time.py [--lines 200] [--repeat 5]

Real processes over loopback (``tests/procs.py``: every one killed by PID at the end):
a relay, a store peer of a passphrase channel, and bob's headless node, which sends
``--lines`` lines and waits until they are acknowledged. Then ``--repeat`` times: bob
types ``/link``; a new process ``sdschat join --link CODE --data-dir NEW --headless``
starts (the moment the code is typed); its ``link`` event ``linked`` (the link done,
the data directory written); its last history line delivered (the history readable,
from the store peer). Prints each phase's median and range, the hand-over's size,
and the machine's calibration (bench/machine.py).

Figures and their date are in docs/benchmarks.md ("Linking a device").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe

from app.members.link_handover import gather
from net.channel_key import derive_channel_key
from tests.procs import Cluster, Proc, running, sdschat

PASS = "bench passphrase"


def _more(p: Proc, state: str, than: int) -> Callable[[], bool]:
    """Whether ``p`` printed more than ``than`` link events in ``state``."""
    return lambda: len(p.select("link", state=state)) > than


def _has_delivered(p: Proc, lines: int) -> Callable[[], bool]:
    return lambda: len(p.select("delivered")) >= lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if not 1 <= args.repeat <= 20 or not 1 <= args.lines <= 5000:
        ap.error("--repeat is 1..20 and --lines 1..5000")
    with tempfile.TemporaryDirectory() as tmp_s, running(Cluster(Path(tmp_s))) as c:
        tmp = Path(tmp_s)
        pf = tmp / "pass"
        pf.write_text(PASS + "\n")
        key = derive_channel_key("room", PASS.encode())
        _relay, url = c.relay()
        _store, store_url = c.store(url, tmp / "store", topics=(key.topic,))
        bob = c.headless("bob", tmp / "bob", relay=url,
                         extra=["--passphrase-file", str(pf), "--store", store_url])  # fmt: skip
        bob.wait_for(lambda: bool(bob.select("connection", state="connected")), 30, "bob up")
        bob.send(*(f"line {i}" for i in range(args.lines)))
        bob.wait_for(lambda: len(bob.select("own", state="sent")) >= args.lines, 120,
                     "bob's lines sent")  # fmt: skip
        payload = len(gather(tmp / "bob"))
        linked, readable = [], []
        for i in range(args.repeat):  # bounded
            before = len(bob.select("link", state="offered"))
            bob.send("/link")
            bob.wait_for(_more(bob, "offered", before), 30, "a code")
            code = bob.select("link", state="offered")[-1]["code"]
            t0 = time.monotonic()
            laptop = c.start(sdschat("join", "--link", code, "--data-dir", str(tmp / f"l{i}"),
                                     "--relay", url, "--headless", "--fast"), f"laptop{i}")
            laptop.wait_for(_more(laptop, "linked", 0), 60, "linked")
            t1 = time.monotonic()
            laptop.wait_for(_has_delivered(laptop, args.lines), 120, "the history")
            t2 = time.monotonic()
            linked.append(t1 - t0)
            readable.append(t2 - t0)
            laptop.stop()
            bob.wait_for(_more(bob, "linked", i), 30, "bob: linked")

    def row(name: str, xs: list[float]) -> str:
        return (f"{name:<34} median {statistics.median(xs):6.2f} s   "
                f"min {min(xs):6.2f}   max {max(xs):6.2f}")  # fmt: skip

    print(f"link time on loopback: {args.lines} lines of history, {args.repeat} links, "
          f"hand-over {payload / 1024:.1f} KiB compressed")  # fmt: skip
    print(row("code typed -> linked", linked))
    print(row("code typed -> history readable", readable))
    print(f"load {os.getloadavg()[0]:.1f}; {describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
