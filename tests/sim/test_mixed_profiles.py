"""Filter-parameter agreement (docs/profiles.md): a participant whose filter has other
parameters (js-waku's sizes, an older sdschat) still delivers and converges; the
filters it cannot read are ignored for acknowledgements and counted, never fatal."""

from __future__ import annotations

import random
from collections import Counter

import sds
from net.memnet import MemNetwork


def _run(configs: dict[str, sds.Config], loss: float, seed: int) -> tuple[MemNetwork, Counter[str]]:
    drops: Counter[str] = Counter()
    acked: Counter[str] = Counter()

    def observe(node: str, ev: sds.Event, now: int) -> None:
        if isinstance(ev, sds.MessageDropped):
            drops[f"{node}:{ev.reason.value}"] += 1
        elif isinstance(ev, sds.MessageAcknowledged):
            acked[node] += 1

    net = MemNetwork(seed=seed, loss=loss, latency_ms=(20, 120), observer=observe)
    for name, cfg in configs.items():
        net.add_node(name, ["room"], cfg)
    rng = random.Random(seed)
    names = list(configs)
    for i in range(60):
        net.send(names[rng.randrange(len(names))], "room", f"line {i}".encode())
        net.run_for(300)
    net.run_for(120_000)
    drops.update({f"acked:{k}": v for k, v in acked.items()})
    return net, drops


def test_a_waku_profile_node_among_default_nodes_converges() -> None:
    """One node on js-waku's sizes, three on the defaults, 10% loss: every log holds
    all 60 messages in the same order, each side counts the other's filters as
    ``bad_filter`` (ignored for acks), and every own message is still acknowledged
    (by causal histories, which need no agreement)."""
    fast = 1000
    configs = {
        "old": sds.Config.waku().with_fast_timings(fast),
        "a": sds.Config().with_fast_timings(fast),
        "b": sds.Config().with_fast_timings(fast),
        "c": sds.Config().with_fast_timings(fast),
    }
    net, counts = _run(configs, loss=0.1, seed=5)
    logs = {n: net.nodes[n].participant.channel("room").log_ids() for n in configs}
    assert len(logs["a"]) == 60
    assert all(log == logs["a"] for log in logs.values())
    assert counts["old:bad_filter"] > 0  # our small filters, at the old node
    assert counts["a:bad_filter"] > 0  # its big filter, at ours
    for n in configs:
        sent = net.nodes[n].sent
        assert counts[f"acked:{n}"] == sent, n
        assert net.nodes[n].participant.channel("room").outgoing_ids() == []
    assert not any(k.endswith(":lost") for k in counts)


def test_a_channel_on_one_profile_counts_no_bad_filter() -> None:
    """The same channel with everyone on one profile: no bad_filter at all (agreement
    is the channel's profile), and the mixed channel converged above without it."""
    configs = {n: sds.Config().with_fast_timings(1000) for n in ("a", "b", "c")}
    net, counts = _run(configs, loss=0.1, seed=6)
    assert not [k for k in counts if k.endswith("bad_filter")]
    logs = [net.nodes[n].participant.channel("room").log_ids() for n in configs]
    assert len(logs[0]) == 60 and logs[0] == logs[1] == logs[2]
