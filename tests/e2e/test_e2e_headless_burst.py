"""Headless stdin bursts (issue 26 §9): a burst larger than the outgoing buffer is taken
with backpressure (nothing ``failed``), and EOF drains: every line read is sent before
the process exits 0. Real relay and headless processes over loopback."""

from __future__ import annotations

from pathlib import Path

from e2e_helpers import cluster, history, stdin_of


def _connected(p: object) -> bool:
    return any(e.get("state") == "connected" for e in p.select("connection"))  # type: ignore[attr-defined]


def test_a_burst_beyond_the_outgoing_buffer_is_taken_with_backpressure_and_drained(
    tmp_path: Path,
) -> None:
    # an outgoing buffer of 40 unacknowledged lines: 300 lines at once overflowed it
    # (the oldest ended "failed", buffer_full) and EOF exited 0 with lines unsent
    conf = tmp_path / "small.toml"
    conf.write_text("[protocol]\noutgoing_buffer_cap = 40\n")
    lines = [f"burst line {i}" for i in range(300)]
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        bob = c.node("bob", url)
        alice = c.node("alice", url, extra=["--config", str(conf)])
        for p in (alice, bob):
            p.wait_for(lambda p=p: _connected(p), 30, "connected")
        pipe = stdin_of(alice)
        pipe.write(("\n".join(lines) + "\n").encode())
        pipe.flush()
        alice.close_stdin()
        assert alice.wait(180) == 0, alice.tail()
        assert not alice.select("own", state="failed"), alice.select("own", state="failed")[:3]
        assert len(alice.select("own", state="sent")) == len(lines)
        assert any((e.get("data") or {}).get("waiting") for e in alice.select("info"))
        bob.wait_for(
            lambda: {e["text"] for e in bob.select("delivered")} >= set(lines), 60,
            "every line at bob",
        )
        bob.close_stdin()
        assert bob.wait(30) == 0, bob.tail()
    assert [h["content"] for h in history(tmp_path / "alice")] == lines
