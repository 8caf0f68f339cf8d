"""Relays of a NATS relay cluster and headless nodes as real processes (loopback only)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.procs import Cluster, Proc, sdschat


def cluster_relay(
    c: Cluster, nats_urls: list[str], name: str, *, port: int = 0
) -> tuple[Proc, str]:
    """``sdschat relay --cluster URL...`` on 127.0.0.1 (generous rate, as ``Cluster.relay``)."""
    argv = sdschat(
        "relay", "--host", "127.0.0.1", "--port", str(port), "--stats-interval", "0",
        "--rate", "5000", "--burst", "10000", "--queue", "4096",
    )
    for url in nats_urls:
        argv += ["--cluster", url]
    p = c.start(argv, name, stdin=False)
    rec = p.wait_log("relay_listening", 30)
    return p, f"ws://127.0.0.1:{int(rec['port'])}"


def relay_flags(urls: list[str]) -> list[str]:
    """``--relay U1 --relay U2 ...`` (the first is the node's preferred relay)."""
    out: list[str] = []
    for u in urls:
        out += ["--relay", u]
    return out


def log_count(p: Proc) -> int:
    """Messages in the node's log according to its events (own logged + delivered)."""
    return len(p.select("own", state="logged")) + len(p.select("delivered"))


def unacked(p: Proc) -> set[str]:
    logged = {e["message_id"] for e in p.select("own", state="logged")}
    acked = {e["message_id"] for e in p.select("own", state="acknowledged")}
    return logged - acked


def assert_no_duplicate_deliveries(*procs: Proc) -> None:
    for p in procs:
        ids = [e["message_id"] for e in p.select("delivered")]
        dup = [m for m, n in Counter(ids).items() if n > 1]
        assert not dup, f"{p.name} delivered twice: {dup[:3]}"


def connected_to(p: Proc) -> list[Any]:
    """The ``connected to HOST:PORT`` reasons of a node with several relays, in order."""
    return [e.get("reason") for e in p.select("connection", state="connected")]
