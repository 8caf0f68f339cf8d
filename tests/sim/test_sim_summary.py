"""``sdschat sim``'s end-of-run traffic summary (issue 28 item 2): deliveries and bytes
by kind of message, and what one member pays per second, busy and idle."""

from __future__ import annotations

from pathlib import Path

from app.cli import main
from app.sim.simulation import SimSpec, run_sim


def test_traffic_by_kind_adds_up_to_the_network_counters(tmp_path: Path) -> None:
    r = run_sim(SimSpec(participants=20, messages=20, loss=0.1, seed=2), tmp_path / "r")
    traffic, net = r.meta["traffic"], r.meta["network"]
    kinds = traffic["by_kind"]
    assert set(kinds) == {"content", "sync", "resend", "repair"}
    for ours, theirs in (("broadcasts", "broadcasts"), ("bytes_sent", "bytes_sent"),
                         ("deliveries", "deliveries"), ("bytes_received", "bytes")):
        assert sum(v[ours] for v in kinds.values()) == net[theirs], ours
    assert kinds["content"]["broadcasts"] == 20
    assert kinds["sync"]["broadcasts"] > 0 and kinds["repair"]["broadcasts"] > 0
    phases = traffic["phases"]
    assert list(phases) == ["busy", "settling", "idle"]
    assert phases["busy"]["seconds"] == 10.0  # 20 messages at 2/s
    busy, idle = phases["busy"], phases["idle"]
    assert busy["member_down_bytes_per_s"] > idle["member_down_bytes_per_s"] >= 0
    assert sum(p["broadcasts"] for p in phases.values()) == net["broadcasts"]


def test_the_command_prints_the_summary(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["sim", "-n", "10", "-m", "5", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "deliveries per content delivery" in out
    for kind in ("content", "sync", "resend", "repair"):
        assert f"    {kind}" in out
    assert "per member, busy" in out and "per member, idle" in out
