"""A mixed channel over a real relay: one node on js-waku's sizes (``--profile waku``),
two on the defaults. Loopback only."""

from __future__ import annotations

from pathlib import Path

from e2e_helpers import cluster, comparable, history, log_count, write_lines_paced


def test_mixed_profiles_converge_over_a_relay(tmp_path: Path) -> None:
    """Every node delivers every line, the three logs are identical, every own line is
    acknowledged, and the filters of the other size were counted (``bad_filter``),
    never fatal."""
    per_node = 8
    names = ("olda", "bob", "carol")
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        nodes = [
            c.node(n, url, extra=["--profile", "waku"] if n == "olda" else [])
            for n in names
        ]
        for p in nodes:
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 20,
                       "connected")
        for p in nodes:
            write_lines_paced(p, [f"{p.name} says {i}" for i in range(per_node)], 20.0)
        total = per_node * len(nodes)
        for p in nodes:
            p.wait_for(lambda p=p: log_count(p) >= total, 60, f"{total} messages in the log")
        for p in nodes:
            p.wait_for(lambda p=p: len(p.select("own", state="acknowledged")) == per_node,
                       60, "every own message acknowledged")
        for p in nodes:
            p.close_stdin()
        counters = {}
        for p in nodes:
            assert p.wait(30) == 0, p.tail()
            counters[p.name] = p.select("closed")[-1]["counters"]
            assert counters[p.name].get("internal_errors", 0) == 0
        assert counters["olda"].get("dropped_bad_filter", 0) > 0
        assert counters["bob"].get("dropped_bad_filter", 0) > 0
        hists = [history(tmp_path / n) for n in names]
        assert len(hists[0]) == total
        assert comparable(hists[0]) == comparable(hists[1]) == comparable(hists[2])
