"""Honest writers first in a members channel's store (issue 39 §5, break 7).

The audit: an outsider who knew only a members channel's topic published 3,000 garbage
envelopes to a store kept at --max-bytes 400K; 9 of the 394 rows left were honest.
Everything from a relay on a private topic counted as one unattributed writer, and a
members channel's write key could not be had.

Here, with real processes (a relay, a store peer at --max-bytes 400K, three members'
headless nodes, a relay tap recording every envelope, attacker processes): the
operator gives the store the channel's write key (``sdschat store --print-write-key
team --member-dir DIR``), and again after carol's removal (a new epoch). The outsider's
3,000 envelopes through the relay and 100 Puts with made-up proofs are refused, and so
are carol's Puts proven with every epoch key her data directory holds. Every content
envelope alice and bob sent, and carol's from before her removal, is in the store.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from store_helpers import ROOT, Cluster, Proc, T, cluster, free_port, run, sdschat, wait_until

from app.members import secrets_file
from net.envelope import EnvelopeError, envelope_hash, open_for_topic
from net.store_client import StoreClient
from net.store_proof import write_key
from tests.procs import tap


def _joined(p: Proc, what: str) -> None:
    p.wait_for(lambda: bool(p.select("members", what=what)), 60, f"members channel {what}")
    p.wait_for(lambda: bool(p.select("connection", state="connected")), 30, "connected")


def _member(c: Cluster, name: str, relay: str, store: str, *args: str) -> Proc:
    return c.start(sdschat("join", *args, "--data-dir", str(c.tmp / name), "--name", name,
                           "--headless", "--fast", "--relay", relay, "--store", store),
                   name)  # fmt: skip


def _invite(admin: Proc) -> str:
    before = len(admin.select("invite"))
    admin.send("/invite")
    admin.wait_for(lambda: len(admin.select("invite")) > before, 20, "an invite code")
    code: str = admin.select("invite")[-1]["code"]
    return code


def _write_key(member_dir: Path) -> str:
    out = subprocess.run(
        sdschat("store", "--print-write-key", "team", "--member-dir", str(member_dir)),
        cwd=ROOT, capture_output=True, text=True, timeout=T(60), check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _store(c: Cluster, relay: str, port: int, printed: str, name: str) -> Proc:
    p = c.start(sdschat("store", "--data-dir", str(c.tmp / "store"), "--listen",
                        f"127.0.0.1:{port}", "--relay", relay, "--write-key", printed,
                        "--max-bytes", "400K", "--max-age", "0", "--stats-interval", "0.5"),
                name, stdin=False)  # fmt: skip
    p.wait_log("store_listening", 30)
    return p


def _texts(p: Proc) -> set[str]:
    return {str(e.get("text")) for e in p.select("delivered") if e.get("kind") == "msg"}


def _content_envelopes(captured: list[bytes], keys_of: Path) -> dict[str, list[bytes]]:
    """The captured envelopes that open under a member's keys and carry a content
    message, by their SDS sender id (garbage opens under no key)."""
    mc = secrets_file.load(keys_of, "team")
    assert mc is not None
    out: dict[str, list[bytes]] = {}
    for env in captured:
        try:
            msg = open_for_topic(env, lambda _t: mc.opening_keys()).sds_message
        except EnvelopeError:
            continue
        assert msg is not None
        if msg.HasField("lamport_timestamp") and msg.content:
            out.setdefault(msg.sender_id, []).append(env)
    return out


async def _archived(url: str, topic: bytes) -> dict[bytes, bytes]:
    """Every envelope the store holds for ``topic``, by hash."""
    got: dict[bytes, bytes] = {}
    async with StoreClient(url) as client:
        cursor = None
        for _ in range(1000):  # bounded: pages of 1,000
            page = await client.by_time(topic, cursor=cursor, page_size=1000)
            got.update((envelope_hash(i.envelope), i.envelope) for i in page.items)
            if page.next is None:
                return got
            cursor = page.next
    raise AssertionError("the store's archive did not end")


def _sender(p: Proc) -> str:
    return str(p.select("ready")[0]["sender"])


def _attack(c: Cluster, name: str, *args: str) -> dict[str, Any]:
    p = c.start([sys.executable, "-m", "tests.store.store_attacker", *args], name, stdin=False)
    assert p.wait(T(120)) == 0, p.tail()
    done = p.select("attacked")
    assert done, p.tail()
    return done[-1]


def test_a_garbage_flood_and_a_removed_member_leave_every_honest_envelope_in_the_store(
    tmp_path: Path,
) -> None:
    port = free_port()
    store_url = f"ws://127.0.0.1:{port}"
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = _member(c, "alice", url, store_url, "team", "--create")
        _joined(alice, "created")
        topic = bytes.fromhex(alice.select("channel")[0]["topic"])
        with tap(url, topic) as relay_tap:
            bob = _member(c, "bob", url, store_url, "--invite", _invite(alice))
            _joined(bob, "joined")
            carol = _member(c, "carol", url, store_url, "--invite", _invite(alice))
            _joined(carol, "joined")
            # the operator: the write key of the channel's epoch now, from alice's dir
            first = _write_key(tmp_path / "alice")
            store = _store(c, url, port, first, "store")
            for i in range(10):
                alice.send(f"alice before {i}")
                bob.send(f"bob before {i}")
                carol.send(f"carol before {i}")
            wanted = {f"{w} before {i}" for w in ("alice", "carol") for i in range(10)}
            bob.wait_for(lambda: wanted <= _texts(bob), 90, "everyone's lines at bob")
            carol_id = _sender(carol)
            alice.send("/remove carol")
            for p in (alice, bob):
                p.wait_for(lambda p=p: any(carol_id in e["data"].get("removed", ())
                                           for e in p.select("members", what="changed")),
                           30, "carol removed")  # fmt: skip
            carol.wait_for(lambda: bool(carol.select("members", what="removed_me")), 30,
                           "told of the removal")  # fmt: skip
            carol.close_stdin()
            assert carol.wait(T(30)) == 0, carol.tail()
            removal_mark = relay_tap.count()
            # the operator again: a key of the epoch after the removal, from bob's dir
            second = _write_key(tmp_path / "bob")
            assert second != first
            stolen = secrets_file.load(tmp_path / "carol", "team")
            assert stolen is not None
            assert second.split(":")[1] not in {
                write_key(k, topic).hex() for k in stolen.epoch_keys}  # fmt: skip
            store.signal(signal.SIGTERM)
            assert store.wait(T(30)) == 0
            store = _store(c, url, port, second, "store-rotated")

            alice.send(*(f"alice during {i}" for i in range(10)))
            outsider = _attack(c, "outsider", "outsider", "--relay", url, "--store", store_url,
                               "--topic", topic.hex(), "--count", "3000", "--puts", "100")
            removed = _attack(c, "carol-attacks", "removed", "--store", store_url,
                              "--data-dir", str(tmp_path / "carol"), "--channel", "team",
                              "--count", "100")  # fmt: skip
            bob.send(*(f"bob after {i}" for i in range(10)))
            later = {f"bob after {i}" for i in range(10)} | {f"alice during {i}"
                                                            for i in range(10)}
            alice.wait_for(lambda: {t for t in later if t.startswith("bob")} <= _texts(alice),
                           90, "bob's lines at alice")  # fmt: skip
            bob.wait_for(lambda: {t for t in later if t.startswith("alice")} <= _texts(bob),
                         90, "alice's lines at bob")  # fmt: skip
            captured = relay_tap.since(0)
            before_removal = relay_tap.since(0)[:removal_mark]
        by_sender = _content_envelopes(captured, tmp_path / "bob")
        honest = {envelope_hash(e) for s in (_sender(alice), _sender(bob))
                  for e in by_sender.get(s, ())}  # fmt: skip
        carols = {envelope_hash(e) for e in
                  _content_envelopes(before_removal, tmp_path / "bob").get(carol_id, ())}
        assert len(honest) >= 40 and len(carols) >= 10, (len(honest), len(carols))

        missing: set[bytes] = set()

        def everything_archived() -> bool:
            missing.clear()
            missing.update((honest | carols) - set(run(_archived(store_url, topic))))
            return not missing

        try:
            wait_until(everything_archived, 60, "every honest envelope in the store", step=0.5)
        except AssertionError:
            whose = {s: len({envelope_hash(e) for e in envs} & missing)
                     for s, envs in by_sender.items()}  # fmt: skip
            early = {envelope_hash(e) for e in before_removal}
            whose["before the removal"] = len(missing & early)
            stats = [r for r in store.log_records() if r.get("event") == "store_stats"][-1:]
            alice.send("/stats")
            alice.wait_for(lambda: any("store" in (e.get("data") or {})
                                       for e in alice.select("info")), 10, "stats")
            puts = [e["data"]["store"] for e in alice.select("info")
                    if "store" in (e.get("data") or {})]  # fmt: skip
            raise AssertionError(f"{len(missing)} of {len(honest | carols)} honest envelopes "
                                 f"missing, by sender {whose}; store {stats}; alice's "
                                 f"store sync {puts[-1]}") from None
        keys = secrets_file.load(tmp_path / "bob", "team")
        assert keys is not None
        for env in run(_archived(store_url, topic)).values():  # no garbage among them
            open_for_topic(env, lambda _t: keys.opening_keys())
        assert outsider["put"].get("accepted") == 0, outsider
        assert outsider["put"]["bad_proof"] == 100, outsider
        assert removed["epochs"] >= 1 and removed["put"].get("accepted") == 0, removed
        assert removed["put"]["bad_proof"] == 100 * removed["epochs"], removed
        store.signal(signal.SIGTERM)
        assert store.wait(T(30)) == 0
        final = [r for r in store.log_records() if r.get("event") == "store_stats"][-1]
        assert final["rejected"].get("unproven", 0) >= 3000, final
        assert final["unattributed"] == 0, final
