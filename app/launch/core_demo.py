"""``sdschat demo``: three participants chat over a lossy in-memory network.

A short, self-checking demonstration of the SDS core (the chat demo with real
processes and the TUI replaces it as those land): alice, bob and carol each send
messages while a fraction of every broadcast is dropped; the protocol's
resends, sync messages and SDS-R repairs close the gaps, and at the end every
participant holds the identical log in the identical order.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import TextIO

import sds
from net.memnet import MemNetwork

CHANNEL = "demo"
NAMES = ("alice", "bob", "carol")


def run_core_demo(
    messages: int = 20, loss: float = 0.3, seed: int = 1, out: TextIO | None = None
) -> int:
    """Run the demo; print a transcript and a summary. Returns 0 if everyone converged."""
    out = out or sys.stdout
    counts: Counter[str] = Counter()
    start = 1_700_000_000_000

    def observe(node: str, ev: sds.Event, now: int) -> None:
        counts[type(ev).__name__] += 1
        t = (now - start) / 1000
        if isinstance(ev, sds.MessageDelivered) and node == "bob":
            mark = f"  [after {ev.missing_before} lost]" if ev.missing_before else ""
            print(f"{t:8.2f}s  bob sees  <{ev.sender_id}> {ev.content.decode()}{mark}", file=out)
        elif isinstance(ev, sds.MessagesMissing) and node == "bob" and ev.first:
            print(f"{t:8.2f}s  bob: {len(ev.missing)} earlier message(s) missing", file=out)
        elif isinstance(ev, sds.MessageLost):
            print(f"{t:8.2f}s  {node}: message {ev.message_id[:8]} lost", file=out)

    cfg = sds.Config.fast(1_000)
    net = MemNetwork(seed=seed, loss=loss, latency_ms=(5, 80), start_ms=start, observer=observe)
    for name in NAMES:
        net.add_node(name, [CHANNEL], cfg)

    print(
        f"sdschat core demo: {len(NAMES)} participants, {messages} messages each, "
        f"{loss:.0%} of broadcasts dropped (virtual time)\n",
        file=out,
    )
    for i in range(messages):
        for name in NAMES:
            net.send(name, CHANNEL, f"message {i + 1} from {name}".encode())
            net.run_for(150)
    net.run_for(60_000)  # let resends, syncs and repairs finish

    logs = {n: net.nodes[n].participant.channel(CHANNEL).log_ids() for n in NAMES}
    converged = all(log == logs[NAMES[0]] for log in logs.values())
    unacked = {n: len(net.nodes[n].participant.channel(CHANNEL).outgoing_ids()) for n in NAMES}
    print("\nsummary", file=out)
    c = net.counters
    # a broadcast goes to every other participant: each copy is dropped or delivered
    print(
        f"  broadcasts {c['broadcasts']} (datagrams sent), copies to recipients: "
        f"delivered {c['deliveries']}, dropped {c['lost']}",
        file=out,
    )
    for name in ("MessageResent", "SyncSent", "RepairRequested", "RepairSent", "MessageLost"):
        print(f"  {name:<16} {counts[name]}", file=out)
    print(f"  log sizes      {', '.join(f'{n}={len(v)}' for n, v in logs.items())}", file=out)
    print(f"  unacknowledged {unacked}", file=out)
    print(f"  converged      {'yes' if converged else 'NO'}", file=out)
    return 0 if converged else 1
