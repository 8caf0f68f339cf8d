"""Per-sender budgets (issue 26 item 4): whatever fresh identities do, an honest
member's lines are delivered within seconds.

The audit: 11 fresh signing keys each naming 1,000 unknown ids every 2 s made a victim
lose honest messages; 300 keys with 30% loss delivered 1 of 46 honest lines within
150 s. Here the real core of three honest members runs over a lossy broadcast in
virtual time, beside hostile identities that send well-formed content messages (the
project's own wire format, ``sds.encode``) naming ids nobody has, each within its own
per-sender budget: together they far exceed the channel-wide caps.
"""

from __future__ import annotations

import random

import pytest
from sds_helpers import msg

import sds

NOW = 1_700_000_000_000
#: The audit's shape, scaled by 10 to keep the test at a few seconds: 30 identities
#: x 100 invented ids every 2 s against caps of 1,000 missing ids (100 per sender).
CFG = sds.Config().with_changes(
    max_missing=1_000, max_missing_per_sender=100, repair_buffer_size=100,
    incoming_buffer_cap=1_000,
)


class _LossyNet:
    """Broadcast between honest channels with independent loss per delivery.

    A holder answers ``RepairDataNeeded`` with the message's bytes, as the node does
    from its database: the core's own repair cache holds only the latest messages.
    """

    def __init__(self, channels: list[sds.Channel], loss: float, seed: int) -> None:
        self.channels = channels
        self.loss = loss
        self.rng = random.Random(seed)
        self.now = NOW
        self.delivered: dict[tuple[str, str], int] = {}  # (receiver, id) -> time
        self.stored: dict[str, bytes] = {}  # content message id -> its bytes

    def _collect(self, ch: sds.Channel) -> list[bytes]:
        for ev in ch.events():
            if isinstance(ev, sds.MessageDelivered):
                self.delivered[(ch.sender_id, ev.message_id)] = self.now
            elif isinstance(ev, sds.RepairDataNeeded) and ch.has_message(ev.message_id):
                ch.supply_repair_data(ev.message_id, self.stored[ev.message_id], self.now)
        return [d.data for d in ch.datagrams_to_send()]

    def broadcast(self, src: sds.Channel | None, data: bytes) -> None:
        m = sds.decode(data)
        if m.content is not None and m.lamport_timestamp is not None:
            self.stored.setdefault(m.message_id, data)
        queue = [(src, data)]
        while queue:
            s, d = queue.pop()
            for ch in self.channels:
                if ch is s or self.rng.random() < self.loss:
                    continue
                ch.receive(d, self.now)
                queue.extend((ch, out) for out in self._collect(ch))

    def advance(self, until: int) -> None:
        for _ in range(1_000_000):
            due = [t for t in (ch.get_timer() for ch in self.channels) if t is not None]
            if not due or min(due) > until:
                break
            self.now = max(self.now, min(due))
            for ch in self.channels:
                t = ch.get_timer()
                if t is not None and t <= self.now:
                    ch.handle_timer(self.now)
                    for out in self._collect(ch):
                        self.broadcast(ch, out)
        self.now = max(self.now, until)


def _honest_delivery_s(
    identities: int, config: sds.Config, seconds: int = 40, seed: int = 5
) -> list[float]:
    alice, bob, carol = (sds.Channel("room", n, config, NOW, random.Random(i))
                         for i, n in enumerate(("alice", "bob", "carol")))
    net = _LossyNet([alice, bob, carol], loss=0.3, seed=seed)
    sent: dict[str, int] = {}
    invented = 0
    for second in range(seconds):
        t = NOW + second * 1_000
        net.advance(t)
        if second % 2 == 0:
            for k in range(identities):
                ids = [f"{invented + j:064x}" for j in range(config.max_missing_per_sender)]
                invented += len(ids)
                net.broadcast(None, msg(f"sybil-{k}", f"sybil-{k}-{second}", t, ids,
                                         channel="room"))
        data = alice.send(f"line {second}".encode(), t)
        sent.update((ev.message_id, t) for ev in alice.events()
                    if isinstance(ev, sds.MessageSent))
        alice.datagrams_to_send()
        net.broadcast(alice, data)
    net.advance(NOW + (seconds + 30) * 1_000)
    out = []
    for mid, t in sent.items():
        got = net.delivered.get(("bob", mid))
        out.append(float("inf") if got is None else (got - t) / 1000)
    return sorted(out)


def _quiet_and_hostile(identities: int) -> tuple[list[float], list[list[float]]]:
    quiet: list[float] = []
    hostile = []
    for seed in (1, 2, 3, 4):
        quiet += _honest_delivery_s(0, CFG, seed=seed)
        hostile.append(_honest_delivery_s(identities, CFG, seed=seed))
    return sorted(quiet), hostile


@pytest.mark.parametrize("identities", [30, 100])
def test_fresh_identities_naming_invented_ids_do_not_hold_up_honest_lines(identities: int) -> None:
    """30 identities naming 100 invented ids each every 2 s (3,000 outstanding against
    caps of 1,000 missing ids and 100 repair requests), and 100 (ten times the cap),
    beside one honest member typing a line a second at 30% loss, with four loss
    patterns: every line reaches bob within the run, half of them about as fast as in
    the same channel without the identities.

    Before the budgets were shared per sender, the caps let the invented ids crowd
    out the honest ones: 14 of 40 lines never arrived. Before a message of such an
    identity named by another member released what it waits for after three repair
    rounds (``Channel._vouch``) and the requests kept each namer's share, three of
    eight loss patterns delivered none of the 40: alice's lines named such a message,
    which waited for the lost timeout (5 minutes) on ids nobody has. With 100
    identities alice's lines still named the messages she took once their ids were
    declared lost, and bob waited for each one he lacked (asked for it, then for the
    ids it names) behind the requests of a hundred namers: 54 of 640 line-deliveries
    were missing after 70 s over 16 loss patterns, 22 of 40 in the third of these
    four. Such messages are not named by lines now (``Channel._withhold``); and the
    cap on missing ids, which took one id from each of the hundred in a single pass
    and went on to alice's, levels them one id at a time."""
    quiet: list[float] = []
    hostile: list[float] = []
    for seed in (1, 2, 3, 4):
        quiet += _honest_delivery_s(0, CFG, seed=seed)
        got = _honest_delivery_s(identities, CFG, seed=seed)
        assert got[-1] < 30, (seed, got)  # none lost or held
        hostile += got
    quiet.sort()
    hostile.sort()
    assert hostile[len(hostile) // 2] <= quiet[len(quiet) // 2] + 2, (quiet, hostile)
