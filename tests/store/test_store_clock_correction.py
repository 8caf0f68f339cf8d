"""A store whose clock was a day ahead, then corrected (issue 26 item 3): real relay,
store and headless processes on 127.0.0.1, the store first run under libfaketime
(Debian's ``faketime``, ``make tools``). Before: bob's catch-up position was a day
ahead on the store's clock, the corrected store stamped new envelopes a day earlier,
and bob's catch-up got 0 of 5 new lines. Now the store's arrival times never go back
across a restart (nor within a run), so its time ranges and cursors stay valid."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
from store_helpers import channel, cluster, free_port, history, run, sdschat, sealed, wait_until

from net.identity import Identity
from net.relay_log import RelayLogger
from net.store_config import StorePeerConfig
from net.store_peer import StorePeer

QUIET = RelayLogger("json", open(os.devnull, "w"))  # noqa: SIM115 (process lifetime)
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

needs_faketime = pytest.mark.skipif(
    not LIBFAKETIME.exists() or shutil.which("env") is None,
    reason="libfaketime is not installed (make tools)",
)


def _store(
    c: object, relay_url: str, data: Path, port: int, name: str, faketime: str | None
) -> object:
    argv = sdschat("store", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}",
                   "--stats-interval", "0.3", "--relay", relay_url, "--channel", "room")
    if faketime is not None:
        argv = ["env", f"LD_PRELOAD={LIBFAKETIME}", f"FAKETIME={faketime}", *argv]
    p = c.start(argv, name, stdin=False)  # type: ignore[attr-defined]
    p.wait_log("store_listening", 30)
    wait_until(
        lambda: any(r.get("event") == "relay_state" and r.get("state") == "connected"
                    for r in p.log_records()),
        30, f"{name} subscribed",
    )
    return p


def _archived(p: object) -> int:
    stats = [r for r in p.log_records() if r.get("event") == "store_stats"]  # type: ignore[attr-defined]
    return int(stats[-1]["archived"]) if stats else 0


def _texts(p: object) -> set[str]:
    return {e["text"] for e in p.select("delivered")}  # type: ignore[attr-defined]


@needs_faketime
def test_a_store_corrected_from_a_day_ahead_still_serves_new_lines(tmp_path: Path) -> None:
    data = tmp_path / "store"
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        port = free_port()  # the same address before and after: a node's position is per store
        store_url = f"ws://127.0.0.1:{port}"
        ahead = _store(c, url, data, port, "store-ahead", "+1d")
        alice = c.node("alice", tmp_path / "alice", relay=url)
        bob = c.node("bob", tmp_path / "bob", relay=url, extra=["--store", store_url])
        for p in (alice, bob):
            p.wait_for(lambda p=p: bool(p.select("channel")) and any(
                e.get("state") == "connected" for e in p.select("connection")), 30, "connected")
        bob.wait_for(lambda: any(e.get("state") == "done" for e in bob.select("catchup")),
                     30, "bob's first catch-up")
        before = [f"before {i}" for i in range(3)]
        alice.send(*before)
        bob.wait_for(lambda: set(before) <= _texts(bob), 30, "the first lines")
        wait_until(lambda: _archived(ahead) >= 3, 30, "the first lines archived")
        bob.close_stdin()  # bob leaves (his catch-up position is on the store's clock)
        assert bob.wait(60) == 0
        ahead.signal(signal.SIGTERM)  # type: ignore[attr-defined]
        assert ahead.wait(30) == 0  # type: ignore[attr-defined]

        fixed = _store(c, url, data, port, "store-fixed", None)  # same archive, right clock
        after = [f"after {i}" for i in range(5)]
        alice.send(*after)
        wait_until(lambda: _archived(fixed) >= 5, 30, "the new lines archived")
        alice.close_stdin()  # nobody but the store has them now
        assert alice.wait(60) == 0

        bob2 = c.node("bob", tmp_path / "bob", relay=url,
                      extra=["--store", store_url], label="bob2")
        bob2.wait_for(lambda: any(e.get("state") == "done" for e in bob2.select("catchup")),
                      30, "bob's catch-up from the corrected store")
        wait_until(
            lambda: set(after) <= {h["content"] for h in history(tmp_path / "bob")}, 30,
            "the 5 new lines at bob",
        )


def test_arrival_times_never_go_back_within_a_run(tmp_path: Path) -> None:
    """In-process, with an injected clock: envelopes in the same millisecond, then a wall
    clock stepped back a day; arrival times strictly increase and a cursor taken before
    the step still finds what came after it."""

    async def main() -> None:
        now = [1_800_000_000_000]
        key = channel("room")
        cfg = StorePeerConfig(tmp_path / "s", topics=(key.topic,), listen=None,
                              stats_interval_s=0, max_age_ms=0)
        ident = Identity.generate()
        async with StorePeer(cfg, logger=QUIET, clock=lambda: now[0]) as peer:
            first = [sealed(ident, key, f"a{i}", i) for i in range(3)]
            for env, _ in first:
                await peer.ingest(env)  # the same millisecond
            await peer.flush()
            page = await peer.store.archive.range(key.topic)
            assert [a.arrival_ms for a in page] == [now[0], now[0] + 1, now[0] + 2]
            cursor = page[-1].cursor
            now[0] -= 86_400_000  # corrected: a day back
            later = [sealed(ident, key, f"b{i}", 10 + i) for i in range(5)]
            for env, _ in later:
                await peer.ingest(env)
            await peer.flush()
            rest = await peer.store.archive.range(key.topic, cursor=cursor)
            assert {a.hash for a in rest} == {h for _, h in later}
            assert min(a.arrival_ms for a in rest) > cursor[0]

    run(main(), 30)
